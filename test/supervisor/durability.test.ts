import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessSignaller } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { LEASE_ENV_KEY } from "../../src/ownership/leases/types.js";
import { SUPERVISOR_SESSION_PREFIX } from "../../src/supervisor/hold/durability.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import { fixture, gatewayProcessHarness, isAlive, matcher, waitFor } from "./helpers.js";

// see reconcile-rules.test.ts: on ps a supervisor lease verifies as unknown, and environments cannot be read
const PS = getProcessFacts().backend === "ps";
const PS_NOTE = " [skipped on the ps backend: supervisor leases verify as unknown there]";
if (PS) console.log(`durability.test:${PS_NOTE}`);

const { pids, gateways, stateDir } = gatewayProcessHarness("proclease-sup-");

interface Crashed {
  root: number;
  grandchild: number;
  leaseId: string;
  runId: string;
}

/** Runs the stand-in gateway, waits for its background run, then SIGKILLs the gateway. */
async function crashGateway(dir: string, runId = "crash-run"): Promise<Crashed> {
  const gw = spawn(process.execPath, [fixture("gateway.mjs"), dir, runId], { stdio: ["ignore", "pipe", "inherit"] });
  gateways.push(gw);
  const out = matcher();
  gw.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
  const line = (await out.waitFor(/\{.*\}\n/, 15_000))[0];
  const info = JSON.parse(line) as Crashed & { gateway: number };
  pids.add(info.root);
  pids.add(info.grandchild);
  gw.kill("SIGKILL");
  await new Promise((r) => gw.once("exit", r));
  // the run was detached: the crash left it running
  expect(isAlive(info.gateway)).toBe(false);
  expect(isAlive(info.root)).toBe(true);
  expect(isAlive(info.grandchild)).toBe(true);
  return info;
}

describe("restart durability: background runs hold leases", () => {
  it.skipIf(PS)(
    `reconcileOrphans after a gateway crash reaps the leftover tree and closes its lease${PS ? PS_NOTE : ""}`,
    async () => {
      const dir = await stateDir();
      const crashed = await crashGateway(dir);
      const store = await openLeaseStore(dir);
      const lease = await store.get(crashed.leaseId);
      expect(lease).toMatchObject({
        state: "open",
        rootPid: crashed.root,
        processGroupId: crashed.root,
        sessionKey: SUPERVISOR_SESSION_PREFIX + crashed.runId,
      });
      expect(lease?.rootStartTime).toMatch(/^\d+$/);

      // another gateway instance sharing the store never touches this run
      const other = createProcessSupervisor({
        stateDir: dir,
        gatewayInstanceId: "another-gateway-instance",
        graceMs: 300,
      });
      expect((await other.reconcileOrphans()).runs).toEqual([]);
      expect(isAlive(crashed.root)).toBe(true);

      // the next incarnation of the same instance (same stateDir → same id)
      const next = createProcessSupervisor({ stateDir: dir, graceMs: 300 });
      const report = await next.reconcileOrphans();
      expect(report.runs).toHaveLength(1);
      const [run] = report.runs;
      expect(run).toMatchObject({
        leaseId: crashed.leaseId,
        runId: crashed.runId,
        verdict: "owned",
        action: "killed",
        state: "closed",
      });
      const pidsReaped = run!.kill!.results.map((r) => r.pid);
      expect(pidsReaped).toEqual(expect.arrayContaining([crashed.root, crashed.grandchild]));
      expect(run!.evidence.find((e) => e.check === "start-time")?.result).toBe("match");
      // the ps backend cannot read argv: the hash is then "unknown", never a mismatch
      const hash = run!.evidence.find((e) => e.check === "command-hash")?.result;
      expect(hash).toBe(getProcessFacts().backend === "ps" ? "unknown" : "match");
      expect(isAlive(crashed.root)).toBe(false);
      expect(isAlive(crashed.grandchild)).toBe(false);
      expect((await store.get(crashed.leaseId))?.state).toBe("closed");
      // idempotent: nothing left to reconcile
      expect((await next.reconcileOrphans()).runs).toEqual([]);
    },
  );

  it("a leftover that died on its own is settled as lost, without a signal", async () => {
    const dir = await stateDir();
    const crashed = await crashGateway(dir, "died-alone");
    process.kill(crashed.grandchild, "SIGKILL");
    process.kill(crashed.root, "SIGKILL");
    await waitFor(() => !isAlive(crashed.root) && !isAlive(crashed.grandchild));
    const report = await createProcessSupervisor({ stateDir: dir }).reconcileOrphans();
    expect(report.runs).toEqual([
      expect.objectContaining({ leaseId: crashed.leaseId, verdict: "gone", action: "settled", state: "lost" }),
    ]);
  });

  it("background runs get a lease (env injected) that closes on exit (stays closing where environments cannot be searched); foreground runs get none", async () => {
    const dir = await stateDir();
    const sup = createProcessSupervisor({ stateDir: dir });
    const bg = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      background: true,
      argv: ["sh", "-c", `printf %s "$${LEASE_ENV_KEY}"`],
    });
    const leaseId = sup.getRecord(bg.runId)?.leaseId;
    expect(leaseId).toMatch(/^[A-Za-z0-9_-]+$/);
    expect((await bg.wait()).stdout).toBe(leaseId);
    const store = await openLeaseStore(dir);
    // on ps no remnant search can prove that nothing of the run is left
    expect((await store.get(leaseId!))?.state).toBe(PS ? "closing" : "closed");

    const fg = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sh", "-c", `printf %s "$${LEASE_ENV_KEY}"`],
    });
    expect(sup.getRecord(fg.runId)?.leaseId).toBeUndefined();
    expect((await fg.wait()).stdout).toBe("");
  });

  it("a cancel whose reap left a survivor keeps the lease closing; reconcileOrphans later reaps the survivor and closes it", async (ctx) => {
    const dir = await stateDir();
    // every identity-checked signal is denied: the tree kill reaps nothing; the
    // root still goes, through the supervisor's own (unreaped) child handle
    const denying: ProcessSignaller = { raceFree: true, signal: async () => "denied" };
    // containment off: the lease's cgroup would end the survivor without the signaller (containment.test.ts covers that)
    const sup = createProcessSupervisor({ stateDir: dir, signaller: denying, graceMs: 200, containment: "off" });
    const out = matcher();
    const run = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      background: true,
      argv: [process.execPath, fixture("stubborn-tree.mjs")],
      onStdout: (c) => out.push(c),
    });
    pids.add(run.pid!);
    const grandchild = Number((await out.waitFor(/tree (\d+) (\d+)/))[2]);
    pids.add(grandchild);
    const leaseId = sup.getRecord(run.runId)!.leaseId!;
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
    expect(isAlive(run.pid!)).toBe(false);
    expect(isAlive(grandchild)).toBe(true);
    const store = await openLeaseStore(dir);
    expect((await store.get(leaseId))?.state).toBe("closing");
    if (getProcessFacts().backend === "ps")
      ctx.skip(
        "the ps backend cannot read environments, so the survivor cannot be proven ours and reconcile does not reap it",
      );

    const next = createProcessSupervisor({ stateDir: dir, graceMs: 300 });
    const report = await next.reconcileOrphans();
    expect(report.runs).toEqual([expect.objectContaining({ leaseId, action: "killed", state: "closed" })]);
    expect(report.runs[0]!.kill!.results.map((r) => r.pid)).toContain(grandchild);
    await waitFor(() => !isAlive(grandchild));
    expect((await store.get(leaseId))?.state).toBe("closed");
  });

  it("a root that exits on its own leaving a marked process alive keeps the lease closing, not closed", async (ctx) => {
    const dir = await stateDir();
    const sup = createProcessSupervisor({ stateDir: dir, graceMs: 300 });
    const run = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      background: true,
      argv: ["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"],
    });
    pids.add(run.pid!);
    const exit = await run.wait();
    const left = Number(exit.stdout.trim());
    pids.add(left);
    expect(exit.reason).toBe("exit");
    expect(isAlive(left)).toBe(true);
    const leaseId = sup.getRecord(run.runId)!.leaseId!;
    const store = await openLeaseStore(dir);
    expect((await store.get(leaseId))?.state).toBe("closing");
    if (getProcessFacts().backend === "ps")
      ctx.skip(
        "the ps backend cannot read environments, so the leftover cannot be proven ours and reconcile does not reap it",
      );
    const report = await createProcessSupervisor({ stateDir: dir, graceMs: 300 }).reconcileOrphans();
    expect(report.runs).toEqual([expect.objectContaining({ leaseId, action: "killed", state: "closed" })]);
    await waitFor(() => !isAlive(left));
  });

  it("reconcileOrphans never touches the runs this supervisor is still running", async () => {
    const dir = await stateDir();
    const sup = createProcessSupervisor({ stateDir: dir, graceMs: 300 });
    const run = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      background: true,
      argv: ["sleep", "30"],
    });
    pids.add(run.pid!);
    expect((await sup.reconcileOrphans()).runs).toEqual([]);
    expect(isAlive(run.pid!)).toBe(true);
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
  });

  it("without a stateDir reconcileOrphans has nothing durable to do", async () => {
    expect(await createProcessSupervisor().reconcileOrphans()).toEqual({ instanceId: null, runs: [] });
  });
});
