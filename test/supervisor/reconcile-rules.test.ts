/**
 * Reconciliation settles a supervisor lease by ownership's one reap rule: a
 * verified member whose signal was denied may still be alive, so the lease
 * goes back to open (retried later), exactly as the ACPX controller keeps its
 * lease closing. And attach records the root through ownership's one helper.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessSignaller } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/lease-store.js";
import { createRunLeases } from "../../src/supervisor/durability.js";
import { isAlive, waitFor } from "./helpers.js";

const ARGV = [process.execPath, "-e", "setTimeout(() => {}, 60000)"];
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** Every signal is "denied": nothing is ever sent, as for a process we may not signal. */
const denying: ProcessSignaller = { raceFree: true, signal: async () => "denied" };

describe("reconcile follows ownership's reap rule", () => {
  it("permission-denied leaves the lease open and the run untouched; a later reconcile with a working signaller closes it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "proclease-sup-rules-"));
    dirs.push(dir);
    const facts = getProcessFacts();
    const runs = createRunLeases({ stateDir: dir, gatewayInstanceId: "sup-rules", facts, signaller: denying, graceMs: 100 });
    const { leaseId, env } = await runs.open("denied-run", ARGV);
    const child = spawn(ARGV[0]!, ARGV.slice(1), { detached: true, stdio: "ignore", env: { ...process.env, ...env } });
    children.push(child);
    await runs.attach(leaseId, child.pid!);
    const store = await openLeaseStore(dir);
    const attached = await store.get(leaseId);
    expect(attached).toMatchObject({ rootPid: child.pid, processGroupId: child.pid, state: "open" });
    expect(attached?.rootStartTime).toMatch(/^\d+$/);

    const first = await runs.reconcile();
    expect(first.runs).toHaveLength(1);
    const [run] = first.runs;
    expect(run).toMatchObject({ leaseId, runId: "denied-run", verdict: "owned", action: "left", state: "open" });
    expect(run!.reap!.results.map((r) => r.outcome)).toContain("permission-denied");
    expect((await store.get(leaseId))?.state).toBe("open");
    expect(isAlive(child.pid!)).toBe(true);

    const next = createRunLeases({ stateDir: dir, gatewayInstanceId: "sup-rules", facts, graceMs: 100 });
    const second = await next.reconcile();
    expect(second.runs).toEqual([expect.objectContaining({ leaseId, action: "reaped", state: "closed" })]);
    await waitFor(() => !isAlive(child.pid!), 5000);
    expect((await store.get(leaseId))?.state).toBe("closed");
  });

  it("attach of a root already gone records the pid without identity; reconcile then settles the lease lost without a signal", async () => {
    const dir = await mkdtemp(join(tmpdir(), "proclease-sup-rules-"));
    dirs.push(dir);
    const runs = createRunLeases({ stateDir: dir, gatewayInstanceId: "sup-rules", signaller: denying, graceMs: 100 });
    const { leaseId, env } = await runs.open("gone-run", [process.execPath, "-e", ""]);
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore", env: { ...process.env, ...env } });
    await new Promise((r) => child.once("exit", r));
    await runs.attach(leaseId, child.pid!);
    const lease = await (await openLeaseStore(dir)).get(leaseId);
    expect(lease?.rootPid).toBe(child.pid);
    expect(lease?.rootStartTime).toBeUndefined();
    expect(lease?.processGroupId).toBeUndefined();
    const report = await runs.reconcile();
    expect(report.runs).toEqual([expect.objectContaining({ leaseId, verdict: "gone", action: "settled", state: "lost" })]);
    expect(report.runs[0]!.reap).toBeUndefined();
  });
});
