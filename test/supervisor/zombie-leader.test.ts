/**
 * A zombie leader whose other threads still run is alive by the library's one
 * rule (facts/liveness.ts isAlive): a signal to its pid reaches the threads
 * that run on. The supervisor's tree kill, its one-signal walk, its group
 * proof and the exec sessions' adopt read liveness through that rule, so such
 * a process is killed, signalled, swept and adopted like any live one, never
 * taken for gone while it runs.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { createExecSessions } from "../../src/supervisor/exec/actions.js";
import { groupToSweep, killProcessTree, signalProcessTree } from "../../src/supervisor/shared/kill-tree.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import {
  buildCHelper,
  exited,
  isRunning,
  killAll,
  printed,
  removeCHelpers,
  spawnGroup,
  waitFor,
} from "../fixtures/facts/procs.js";

const facts = getProcessFacts();
const helper = buildCHelper("zombie-leader");
const skip = helper.path === null || facts.identityStrength === "none";
const note =
  helper.path === null
    ? ` [skipped: ${helper.why}]`
    : facts.identityStrength === "none"
      ? " [skipped: facts backend none]"
      : "";
afterEach(() => killAll());
afterAll(() => removeCHelpers());

/** The helper, detached (it leads its own group), once its main thread has exited and it reads as a zombie leader. */
async function zombieLeader() {
  const child = spawnGroup(helper.path!, []);
  await printed(child, "ready");
  const d = await waitFor("the leader to read as a zombie leader", async () => {
    const x = await facts.inspect(child.pid);
    return x?.state === "Z" && x.zombieLeader === true ? x : null;
  });
  return { child, pid: child.pid, startTime: String(d.startTime) };
}

describe.skipIf(skip)(`a zombie leader with live threads is alive for the supervisor${note}`, () => {
  it("killProcessTree kills it (bound to its start time) instead of reporting it gone", async () => {
    const { child, pid, startTime } = await zombieLeader();
    const r = await killProcessTree(pid, { graceMs: 300, facts, expectedStartTime: startTime });
    expect(r.outcome).toBe("killed");
    await exited(child);
    expect(isRunning(child)).toBe(false);
  });

  it("signalProcessTree signals it instead of reporting it gone", async () => {
    const { child, pid } = await zombieLeader();
    const r = await signalProcessTree(pid, "SIGTERM", { facts });
    expect(r).toMatchObject({ outcome: "signalled", members: 1, results: [{ pid, outcome: "signalled" }] });
    await exited(child);
    expect(child.signalCode).toBe("SIGTERM");
  });

  it("the group it leads is its own: groupToSweep allows the sweep", async () => {
    const { pid } = await zombieLeader();
    const snapshot = await facts.snapshot();
    const root = snapshot.processes.get(pid)!;
    expect(root).toMatchObject({ state: "Z", zombieLeader: true, pgid: pid });
    expect(groupToSweep(snapshot, root)).toBe(pid);
  });

  it("adopt takes it (it runs), and kill then ends it", async () => {
    const { child, pid } = await zombieLeader();
    const sessions = createExecSessions({ supervisor: createProcessSupervisor({ graceMs: 300 }), graceMs: 300, facts });
    const info = await sessions.adopt({ pid, command: "zombie-leader" });
    expect(info).toMatchObject({ pid, status: "running", mode: "adopted" });
    const r = await sessions.kill(info.id);
    expect(r).toMatchObject({ via: "tree-kill", result: { outcome: "killed" } });
    await exited(child);
    expect(sessions.list().find((s) => s.id === info.id)?.status).toBe("exited");
  });
});
