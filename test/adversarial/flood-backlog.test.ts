/**
 * A hostile agent floods a session nobody listens to (issue 39, finding
 * 4): 9,000 session/update notifications of 400 KB during a prompt() turn
 * with no onUpdate listener. Nobody will ever read them, so they are not
 * backpressured (the turn must still end) but bounded in bytes: the oldest
 * are dropped, counted in sessionStatus, logged once, and the first update
 * a late listener receives carries how many were dropped before it. The
 * gateway's RSS growth stays under 256 MB (printed).
 * Build first (`npm run build`): the wrapper runs from dist/.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { DroppedUpdates } from "../../src/acpx/connection/session-updates.js";
import { disposeAfterEach, GRACE_MS, ROOT, tempStateDir, trackLease } from "../acpx/controller-helpers.js";
import { RssPeak } from "./flood-rss.js";

const FLOOD_AGENT = join(ROOT, "test/fixtures/adversarial/flood-agent.mjs");
const UPDATES = 9_000;
const TEXT_BYTES = 400_000;
const RSS_GROWTH_LIMIT_MB = 256;
const BACKLOG_BYTES = 4 * 1024 * 1024;

const controllers = disposeAfterEach();

describe("a flood into a session with no listener", () => {
  it("holds at most the session's byte bound, drops the oldest, and says so", async () => {
    const warnings: string[] = [];
    const ctl = await createAcpxLifecycleController({
      stateDir: tempStateDir("flood-backlog"),
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      updateLimits: { sessionBacklogBytes: BACKLOG_BYTES },
      logger: { warn: (m: string) => warnings.push(m) },
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({
      sessionKey: "k-flood-backlog",
      agentId: "main",
      command: [process.execPath, FLOOD_AGENT],
    });
    trackLease(h.leaseId);
    const rss = new RssPeak();
    // a prompt() turn streams nothing: its updates go to onUpdate listeners, and there are none
    await expect(ctl.prompt(h, `/flood ${UPDATES} ${TEXT_BYTES}`)).resolves.toEqual({ stopReason: "end_turn" });
    const report = rss.stop();
    const st = await ctl.sessionStatus(h);
    console.log(
      `flood-backlog: ${UPDATES} updates of ${TEXT_BYTES} B; gateway RSS baseline ${report.baselineMb} MB, peak ${report.peakMb} MB, growth ${report.growthMb} MB (${report.samples} samples, kernel peak ${report.kernelPeak}); dropped ${st.droppedUpdates} (${st.droppedUpdateBytes} B)`,
    );

    // the typed outcome: counted, logged once, and marked on the first update a listener gets after the gap
    expect(st.droppedUpdates).toBeGreaterThan(0);
    expect(st.droppedUpdateBytes).toBeGreaterThan(st.droppedUpdates * TEXT_BYTES - 1);
    expect(warnings.filter((w) => w.includes("dropped")).length).toBe(1);
    const got: { i: number; dropped: DroppedUpdates | undefined }[] = [];
    const off = ctl.onUpdate(h, (u, _n, dropped) => got.push({ i: (u._meta as { i: number }).i, dropped }));
    off();
    expect(got.length).toBeGreaterThan(0);
    expect(got.length * TEXT_BYTES).toBeLessThanOrEqual(BACKLOG_BYTES);
    // the newest are kept, in order; the first carries the gap, which accounts for every other update
    expect(got.map((g) => g.i)).toEqual([...Array(got.length).keys()].map((k) => UPDATES - got.length + k));
    expect(got[0]!.dropped).toEqual({ count: st.droppedUpdates, bytes: st.droppedUpdateBytes });
    expect(got.slice(1).every((g) => g.dropped === undefined)).toBe(true);
    expect(st.droppedUpdates + got.length).toBe(UPDATES);
    expect(report.growthMb).toBeLessThan(RSS_GROWTH_LIMIT_MB);
    await ctl.closeSession({ handle: h });
  }, 180_000);
});
