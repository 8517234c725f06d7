/**
 * The rules every kind of lease shares, each written once in ownership:
 * "which kind is this lease?", "did the tree kill finish?", and "what does a
 * lease record about its root after the spawn?".
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { createNoneFacts } from "../../src/facts/none.js";
import type { ProcessDetails, ProcessFacts } from "../../src/facts/types.js";
import {
  computeCommandHash,
  explainLease,
  INSTANCE_ENV_KEY,
  LEASE_ENV_KEY,
  openLeaseStore,
  killCompleted,
  killStoppedPid,
  recordRootIdentity,
  parseLeaseRecord,
  survivorsOf,
  type LeaseStore,
  type TreeKillOutcome,
} from "../../src/ownership/index.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function freshStore(): Promise<LeaseStore> {
  const d = await mkdtemp(join(tmpdir(), "proclease-rules-"));
  dirs.push(d);
  return openLeaseStore(d, { durable: false });
}

const INSTANCE = "rules-test-instance";
const SLEEPER = [process.execPath, "-e", "setTimeout(() => {}, 60000)"];

async function newLease(store: LeaseStore, argv: readonly string[] = SLEEPER) {
  return store.create({
    kind: "acpx",
    gatewayInstanceId: INSTANCE,
    sessionKey: "agent:rules",
    wrapperRoot: "",
    wrapperPath: "",
    commandHash: computeCommandHash(argv),
  });
}

function startSleeper(env: Record<string, string> = {}): ChildProcess {
  const c = spawn(SLEEPER[0]!, SLEEPER.slice(1), { detached: true, stdio: "ignore", env: { ...process.env, ...env } });
  children.push(c);
  return c;
}

describe("a lease's kind", () => {
  const record = (over: Record<string, unknown>) => ({
    leaseId: "l1",
    gatewayInstanceId: INSTANCE,
    sessionKey: "agent:main:acp:1",
    wrapperRoot: "",
    wrapperPath: "",
    rootPid: 0,
    commandHash: "",
    startedAt: 1,
    state: "open",
    ...over,
  });
  const kindOf = (over: Record<string, unknown>) => {
    const r = parseLeaseRecord(record(over), false);
    return r.ok ? r.lease.kind : `refused: ${r.reason}`;
  };

  it("is the record's own field, whatever its session key says", () => {
    expect(kindOf({ kind: "supervisor", sessionKey: "agent:main:acp:1" })).toBe("supervisor");
    expect(kindOf({ kind: "acpx", sessionKey: "supervisor:run-1" })).toBe("acpx");
    expect(kindOf({ kind: "other" })).toBe("refused: kind must be absent or acpx | supervisor");
  });

  it("of a record written before the field: the supervisor's session-key prefix, and nothing looser", () => {
    expect(kindOf({ sessionKey: "supervisor:run-1" })).toBe("supervisor");
    expect(kindOf({ sessionKey: "supervisor:" })).toBe("supervisor");
    expect(kindOf({ sessionKey: "agent:main:acp:1" })).toBe("acpx");
    expect(kindOf({ sessionKey: "agent:supervisor:x" })).toBe("acpx");
    expect(kindOf({ sessionKey: "Supervisor:run-1" })).toBe("acpx");
  });

  it("is written into every new record, and a create without one is refused", async () => {
    const store = await freshStore();
    const l = await store.create({
      kind: "supervisor",
      gatewayInstanceId: INSTANCE,
      sessionKey: "supervisor:run-1",
      wrapperRoot: "",
      wrapperPath: "",
      commandHash: "",
    });
    expect((await store.get(l.leaseId))?.kind).toBe("supervisor");
    const untyped = {
      gatewayInstanceId: INSTANCE,
      sessionKey: "agent:x",
      wrapperRoot: "",
      wrapperPath: "",
      commandHash: "",
    } as unknown as Parameters<LeaseStore["create"]>[0];
    await expect(store.create(untyped)).rejects.toThrow(TypeError);
  });
});

describe("what a reap report says about the tree", () => {
  const report = (outcomes: TreeKillOutcome[]) => ({
    results: outcomes.map((outcome, i) => ({ pid: 100 + i, startTime: "1", outcome })),
  });
  const cases: [TreeKillOutcome, { survivor: boolean; stopped: boolean }][] = [
    ["exited-after-term", { survivor: false, stopped: true }],
    ["killed", { survivor: false, stopped: true }],
    ["gone-before-signal", { survivor: false, stopped: true }],
    ["identity-mismatch", { survivor: false, stopped: false }],
    ["refused-by-guard", { survivor: false, stopped: false }],
    // a verified member that may still be alive: the lease must not be settled closed
    ["permission-denied", { survivor: true, stopped: false }],
    ["survived", { survivor: true, stopped: false }],
    ["unknown", { survivor: true, stopped: false }],
  ];
  for (const [outcome, want] of cases) {
    it(`${outcome}: ${want.survivor ? "may still run (not completed)" : "nothing left to stop"}${want.stopped ? ", seen stopped" : ""}`, () => {
      const r = report([outcome]);
      expect(survivorsOf(r)).toEqual(want.survivor ? [100] : []);
      expect(killCompleted(r)).toBe(!want.survivor);
      expect(killStoppedPid(r, 100)).toBe(want.stopped);
    });
  }
  it("a mixed report lists every possible survivor in report order; an unknown pid was not seen stopped", () => {
    const r = report(["killed", "permission-denied", "exited-after-term", "unknown", "survived", "identity-mismatch"]);
    expect(survivorsOf(r)).toEqual([101, 103, 104]);
    expect(killCompleted(r)).toBe(false);
    expect(killCompleted(report(["killed", "gone-before-signal", "identity-mismatch"]))).toBe(true);
    expect(killCompleted(report([]))).toBe(true);
    expect(killStoppedPid(r, 999)).toBe(false);
  });
});

describe("recordRootIdentity", () => {
  const facts = getProcessFacts();

  it("a live root: its start time, own group, boot id and pid namespace go into the lease; verification then matches them", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    const child = startSleeper({ [LEASE_ENV_KEY]: lease.leaseId, [INSTANCE_ENV_KEY]: INSTANCE });
    const pid = child.pid!;
    const live = await facts.inspect(pid);
    expect(live).not.toBeNull();

    const r = await recordRootIdentity(store, lease.leaseId, { rootPid: pid }, facts);
    expect(r.identity).toBe("recorded");
    expect(r.code).toBeUndefined();
    expect(r.detail).toBeUndefined();
    expect(r.lease).toMatchObject({ rootPid: pid, processGroupId: pid, rootStartTime: String(live!.startTime) });
    if (live!.bootId) expect(r.lease.bootId).toBe(live!.bootId);
    if (live!.pidNamespace) expect(r.lease.pidNamespace).toBe(live!.pidNamespace);
    // what was returned is what was written
    expect(await store.get(lease.leaseId)).toEqual(r.lease);

    const v = await explainLease(r.lease, facts, { gatewayInstanceId: INSTANCE });
    expect(v.evidence.find((e) => e.check === "start-time")?.result).toBe("match");
    expect(v.evidence.find((e) => e.check === "process-group")?.result).toBe("match");
    // ps: a start time of 1 s resolution and no readable environment or argv corroborate nothing more (docs/process-facts.md)
    expect(v.verdict, JSON.stringify(v.evidence)).toBe(facts.identityStrength === "coarse" ? "unknown" : "owned");
  });

  it("a group the spawn reported is recorded as given, not replaced by the root's own", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    const child = startSleeper();
    const r = await recordRootIdentity(store, lease.leaseId, { rootPid: child.pid!, processGroupId: 4242 }, facts);
    expect(r.identity).toBe("recorded");
    expect(r.lease.processGroupId).toBe(4242);
    expect(r.lease.rootStartTime).toMatch(/^\d+$/);
  });

  it("a root already gone: the pid (and a reported group) are recorded, no identity, and it says why", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => child.once("exit", r));
    // Node has reaped it by now: the pid names nothing (a reuse this fast would need a full pid wrap)
    const r = await recordRootIdentity(
      store,
      lease.leaseId,
      { rootPid: child.pid!, processGroupId: child.pid! },
      facts,
    );
    expect(r).toMatchObject({ identity: "gone", code: "absent" });
    expect(r.lease.rootPid).toBe(child.pid);
    expect(r.lease.processGroupId).toBe(child.pid);
    expect(r.lease.rootStartTime).toBeUndefined();
    expect(r.lease.bootId).toBeUndefined();
    expect(r.lease.pidNamespace).toBeUndefined();
  });

  it("a zombie root counts as gone: its exit is final, so no identity is recorded for it", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    const zombie: ProcessDetails = {
      pid: 31337,
      ppid: process.pid,
      pgid: 31337,
      sid: 1,
      uid: 0,
      state: "Z",
      startTime: "12345",
      exePath: null,
      argv: null,
      env: {},
      bootId: "b",
      pidNamespace: "pid:[1]",
    };
    const stub: ProcessFacts = {
      backend: "procfs",
      identityStrength: "exact",
      snapshot: () => Promise.reject(new Error("not used")),
      inspect: async (pid) => (pid === 31337 ? zombie : null),
      inspectMany: (pids, o) => inspectEach(stub.inspect, pids, o, 1),
    };
    const r = await recordRootIdentity(store, lease.leaseId, { rootPid: 31337 }, stub);
    expect(r).toMatchObject({ identity: "gone", code: "zombie" });
    expect(r.lease.rootPid).toBe(31337);
    expect(r.lease.processGroupId).toBeUndefined();
    expect(r.lease.rootStartTime).toBeUndefined();
  });

  it("facts that cannot answer: only the pid and the reported group are recorded (fail closed), reported as unknown", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    const child = startSleeper();
    const r = await recordRootIdentity(
      store,
      lease.leaseId,
      { rootPid: child.pid!, processGroupId: child.pid! },
      createNoneFacts("test"),
    );
    expect(r).toMatchObject({ identity: "unknown", code: "inspect-failed" });
    // the words name the backend that could not answer
    expect(r.detail).toContain('backend "none"');
    expect(r.lease).toMatchObject({ rootPid: child.pid, processGroupId: child.pid });
    expect(r.lease.rootStartTime).toBeUndefined();
    // verification of such a lease never gets past "unknown" on the same facts
    expect((await explainLease(r.lease, createNoneFacts("test"), { gatewayInstanceId: INSTANCE })).verdict).toBe(
      "unknown",
    );
  });

  it("bad input names the argument and writes nothing", async () => {
    const store = await freshStore();
    const lease = await newLease(store);
    await expect(recordRootIdentity(store, lease.leaseId, { rootPid: 0 }, facts)).rejects.toThrow(RangeError);
    await expect(recordRootIdentity(store, lease.leaseId, { rootPid: 0 }, facts)).rejects.toThrow(/root\.rootPid/);
    await expect(recordRootIdentity(store, lease.leaseId, { rootPid: Number.NaN }, facts)).rejects.toThrow(TypeError);
    await expect(recordRootIdentity(store, lease.leaseId, { rootPid: 2 ** 23 }, facts)).rejects.toThrow(
      /root\.rootPid/,
    );
    await expect(
      recordRootIdentity(store, lease.leaseId, { rootPid: process.pid, processGroupId: -1 }, facts),
    ).rejects.toThrow(/root\.processGroupId/);
    expect((await store.get(lease.leaseId))?.rootPid).toBe(0);
  });
});
