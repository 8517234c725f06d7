/**
 * One live supervisor per run, with two real processes: A runs a leased
 * background `sleep 30`; B, on the same state dir (a rolling restart),
 * calls reconcileOrphans(): A's run is left alone while A lives, and once A
 * is SIGKILLed (the kernel drops its holder lock) B's next reconcile reaps
 * the run and closes its lease.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  alive,
  killGateways,
  leaseFiles,
  removeTempDirs,
  startGateway,
  startTimeOf,
  tempDir,
  waitFor,
} from "./harness.js";

const started: Array<{ pid: number; start: string | null }> = [];
afterEach(() => {
  killGateways();
  for (const { pid, start } of started.splice(0))
    if (start !== null && startTimeOf(pid) === start) process.kill(pid, "SIGKILL");
});
afterAll(removeTempDirs);

describe("two supervisors on one state dir", () => {
  it("B's reconcileOrphans leaves A's live run alone; after A dies, B's reconcile reaps it", async () => {
    const stateDir = tempDir("two-sup");
    const a = await startGateway();
    const b = await startGateway();
    await a.call("supervisor", { stateDir });
    await b.call("supervisor", { stateDir });
    const run = await a.call<{ pid: number; leaseId: string }>("spawn", {
      runId: "a-sleep",
      argv: ["sleep", "30"],
      background: true,
    });
    started.push({ pid: run.pid, start: startTimeOf(run.pid) });
    const waited = a.request("wait", { runId: "a-sleep" }, 120_000);
    let ended: unknown = null;
    void waited.then((w) => (ended = w));

    const rep = await b.call<{ runs: unknown[] }>("reconcile");
    expect(rep.runs).toEqual([]);
    // what the unfixed reconcile did took ~300 ms: give it three times that
    await new Promise((r) => setTimeout(r, 1000));
    expect(alive(run.pid)).toBe(true);
    expect(ended).toBeNull();
    expect(leaseFiles(stateDir).find((f) => f.lease?.leaseId === run.leaseId)?.lease?.state).toBe("open");

    a.kill();
    await a.exited;
    const after = await b.call<{ runs: Array<{ leaseId: string; state: string; action: string }> }>("reconcile");
    expect(after.runs).toEqual([expect.objectContaining({ leaseId: run.leaseId, state: "closed", action: "killed" })]);
    await waitFor(() => !alive(run.pid), 10_000);
    expect(await b.lives()).toBe(true);
  }, 60_000);
});
