/**
 * A hostile agent floods a streamed turn whose events nobody reads yet
 * (issue 39, finding 4): 300,000 session/update notifications. The
 * gateway must not hold them: past the turn's byte bound it stops reading
 * the agent's stdout, so the agent blocks on its write and the turn cannot
 * end; then the consumer reads all 300,000, in order, none lost. The
 * gateway's RSS growth over the whole flood stays under 256 MB (printed).
 * Build first (`npm run build`): the wrapper runs from dist/.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxSessionClosedError } from "../../src/acpx/report/errors.js";
import { disposeAfterEach, GRACE_MS, ROOT, tempStateDir, trackLease, waitFor } from "../acpx/controller-helpers.js";
import { RssPeak } from "./flood-rss.js";

const FLOOD_AGENT = join(ROOT, "test/fixtures/adversarial/flood-agent.mjs");
const UPDATES = 300_000;
const TEXT_BYTES = 100;
const RSS_GROWTH_LIMIT_MB = 256;

const controllers = disposeAfterEach();

describe("a flood into a turn whose events are not read yet", () => {
  it("backpressures the agent instead of buffering, then delivers all 300,000 updates in order", async () => {
    const ctl = await createAcpxLifecycleController({
      stateDir: tempStateDir("flood-turn"),
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({
      sessionKey: "k-flood-turn",
      agentId: "main",
      command: [process.execPath, FLOOD_AGENT],
    });
    trackLease(h.leaseId);
    const rss = new RssPeak();
    const turn = ctl.startTurn(h, `/flood ${UPDATES} ${TEXT_BYTES}`);
    let settled = false;
    turn.result.then(
      () => (settled = true),
      () => (settled = true),
    );
    // nobody reads: wait until the gateway stopped reading the agent, or (without a bound) the whole flood is in memory
    const waited = await waitFor(async () => settled || (await ctl.sessionStatus(h)).stdoutHeld === true, 30_000, 50);
    const endedUnread = settled;
    const held = await ctl.sessionStatus(h);

    let n = 0;
    let outOfOrder = 0;
    for await (const u of turn.events) {
      if ((u._meta as { i?: number } | undefined)?.i !== n) outOfOrder++;
      n++;
    }
    const report = rss.stop();
    console.log(
      `flood-turn: ${UPDATES} updates of ${TEXT_BYTES} B; gateway RSS baseline ${report.baselineMb} MB, peak ${report.peakMb} MB, growth ${report.growthMb} MB (${report.samples} samples, kernel peak ${report.kernelPeak}); stdout held ${(await ctl.sessionStatus(h)).stdoutHolds} times`,
    );
    expect(waited).toBeGreaterThanOrEqual(0);
    // the agent was blocked on its write: its turn could not end while its events were unread
    expect(endedUnread).toBe(false);
    expect(held.stdoutHeld).toBe(true);
    expect(n).toBe(UPDATES);
    expect(outOfOrder).toBe(0);
    await expect(turn.result).resolves.toMatchObject({ stopReason: "end_turn" });
    expect((await ctl.sessionStatus(h)).stdoutHeld).toBe(false);
    expect(report.growthMb).toBeLessThan(RSS_GROWTH_LIMIT_MB);
    await ctl.closeSession({ handle: h });
  }, 180_000);

  it("a close while the agent is held back settles the session; the turn fails with the close after what was buffered", async () => {
    const ctl = await createAcpxLifecycleController({
      stateDir: tempStateDir("flood-close"),
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({
      sessionKey: "k-flood-close",
      agentId: "main",
      command: [process.execPath, FLOOD_AGENT],
    });
    trackLease(h.leaseId);
    const turn = ctl.startTurn(h, `/flood ${UPDATES} ${TEXT_BYTES}`);
    expect(await waitFor(async () => (await ctl.sessionStatus(h)).stdoutHeld, 30_000, 50)).toBeGreaterThanOrEqual(0);
    const report = await ctl.closeSession({ handle: h });
    expect(report.outcome).toBe("closed");
    await expect(turn.result).rejects.toBeInstanceOf(AcpxSessionClosedError);
    // what was buffered before the close is still read; the events end with the turn (cleanly when the
    // agent answered the prompt before the kill, else with the close error)
    let n = 0;
    try {
      for await (const _u of turn.events) n++;
    } catch (err) {
      expect(err).toBeInstanceOf(AcpxSessionClosedError);
    }
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThan(UPDATES);
  }, 60_000);
});
