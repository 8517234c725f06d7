/**
 * The same flood through the OpenClaw backend: a turn whose events
 * OpenClaw does not read yet. The backend's own event queue is bounded in
 * bytes too; past it, its turn stops reading the controller's events, whose
 * turn then holds the agent's stdout. Then OpenClaw reads every event.
 * Build first (`npm run build`): the wrapper runs from dist/.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { disposeAfterEach, ROOT, waitFor } from "../acpx/controller-helpers.js";
import { drain, ensure, newRuntime } from "../openclaw/helpers.js";
import { RssPeak } from "./flood-rss.js";

const FLOOD_AGENT = join(ROOT, "test/fixtures/adversarial/flood-agent.mjs");
const UPDATES = 100_000;
const TEXT_BYTES = 100;

const controllers = disposeAfterEach();

describe("a flood into an OpenClaw turn whose events are not read yet", () => {
  it("backpressures through the backend's queue and the controller's turn to the agent; every event arrives", async () => {
    const rt = await newRuntime(controllers, "flood", {
      agents: { flood: { command: [process.execPath, FLOOD_AGENT] } },
    });
    const h = await ensure(rt, { agent: "flood" });
    const rss = new RssPeak();
    const turn = rt.startTurn({
      handle: h,
      text: `/flood ${UPDATES} ${TEXT_BYTES}`,
      mode: "prompt",
      requestId: "flood-1",
    });
    let settled = false;
    void turn.result.then(() => (settled = true));
    const held = async () => (await rt.getStatus({ handle: h })).details?.["stdoutHeld"] === true;
    const waited = await waitFor(async () => settled || (await held()), 30_000, 100);
    const endedUnread = settled;
    const events = await drain(turn);
    const report = rss.stop();
    console.log(
      `flood-openclaw: ${UPDATES} updates of ${TEXT_BYTES} B; gateway RSS baseline ${report.baselineMb} MB, peak ${report.peakMb} MB, growth ${report.growthMb} MB`,
    );
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(endedUnread).toBe(false);
    expect(events.length).toBe(UPDATES);
    expect(events.every((e) => e.type === "text_delta" && e.text.length === TEXT_BYTES)).toBe(true);
    await expect(turn.result).resolves.toEqual({ status: "completed", stopReason: "end_turn" });
    expect(report.growthMb).toBeLessThan(256);
  }, 90_000);
});
