/**
 * The table-driven process-lifecycle simulator (issue 3, test 1). One row per
 * case; every row states the exact list of signals that must be delivered,
 * an empty list included, and the verdict.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  computeCommandHash,
  explainLease,
  openLeaseStore,
  ownProcessGroupId,
  reapOwnedTree,
  tokenizeShellCommand,
  verifyLeases,
  verifyLegacyRecord,
  type LeaseVerdict,
  type ReapOutcome,
} from "../../src/ownership/index.js";
import { A, adapter, ARGV, BOOT, E, ENV, family, G, grandchild, lease, nameOf, NS, P, RecordingSignaller, ROOT, SimFacts, unrelated, type SimRowBase, W, WRAPPER, wrapper, X, type SimProc } from "./sim.js";

interface Row extends SimRowBase {
  /** mutate the table after verification, before reaping */
  between?: (sim: SimFacts) => void;
  verdict: LeaseVerdict;
  outcomes?: Record<string, ReapOutcome>;
  evidence?: string; // a check that must appear as mismatch/unknown
}

const rows: Row[] = [
  {
    name: "baseline: verified wrapper, adapter and grandchild are reaped leaves first",
    setup: family,
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
    outcomes: { G: "exited-after-term", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "pid reused by an unrelated process",
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, startTime: "7000" })),
    verdict: "mismatch",
    signals: [],
    evidence: "start-time",
  },
  {
    name: "pid reused by another gateway's wrapper root (even with an equal start time)",
    setup: (sim) =>
      sim.add(wrapper({ name: "W-other", env: { OPENCLAW_ACPX_LEASE_ID: "lease-of-B", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } })),
    verdict: "mismatch",
    signals: [],
    evidence: "lease-env",
  },
  {
    name: "pid reused by another gateway's wrapper root under a different wrapperRoot",
    setup: (sim) => sim.add(wrapper({ name: "W-other", startTime: "5000", argv: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"], env: {} , envReadable: false })),
    verdict: "mismatch",
    signals: [],
    evidence: "wrapper-path",
  },
  {
    name: "stored wrapper command is shell-quoted, live argv is not: same argv verifies",
    setup: (sim) => sim.add(wrapper({ argv: ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a b"] })),
    lease: lease({
      processGroupId: undefined,
      wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs",
      commandHash: computeCommandHash(tokenizeShellCommand(`/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`)!),
    }),
    verdict: "owned",
    signals: ["SIGTERM W"],
  },
  {
    name: "stored wrapper command is shell-quoted, live argv differs (split differently): refused",
    setup: (sim) => sim.add(wrapper({ argv: ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a", "b"] })),
    lease: lease({
      processGroupId: undefined,
      wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs",
      commandHash: computeCommandHash(tokenizeShellCommand(`/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`)!),
    }),
    verdict: "mismatch",
    signals: [],
    evidence: "command-hash",
  },
  {
    name: "adapter child exited, grandchild stays in the process group (re-parented to init, found via group + marker)",
    setup: (sim) => sim.add(wrapper()).add(grandchild({ ppid: 1 })).add(unrelated()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
  },
  {
    name: "adapter child exited, grandchild in the group without a readable marker, wrapper is its subreaper",
    setup: (sim) => sim.add(wrapper()).add(grandchild({ ppid: W, envReadable: false })),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
  },
  {
    name: "parent-death SIGTERM escalates to SIGKILL for a stubborn grandchild",
    setup: (sim) => sim.add(wrapper({ ppid: 1 })).add(adapter()).add(grandchild({ onTerm: "ignore" })),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W", "SIGKILL G"],
    outcomes: { G: "killed", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "process list unavailable",
    setup: (sim) => {
      family(sim);
      sim.snapshotFails = true;
    },
    verdict: "unknown",
    signals: [],
    evidence: "process-list",
  },
  {
    name: "stale lease whose process is missing",
    setup: (sim) => sim.add(unrelated()),
    verdict: "gone",
    signals: [],
    evidence: "root-alive",
  },
  {
    name: "startup orphan: wrapper (re-parented to init), adapter child and grandchild",
    setup: (sim) => sim.add(wrapper({ ppid: 1 })).add(adapter()).add(grandchild()).add(unrelated()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "zombie root",
    setup: (sim) => sim.add(wrapper({ state: "Z" })).add(adapter()),
    verdict: "gone",
    signals: [],
    evidence: "root-alive",
  },
  {
    name: "different boot id (host rebooted)",
    setup: (sim) => {
      family(sim);
      sim.bootId = "boot-bbbb";
    },
    verdict: "gone",
    signals: [],
    evidence: "boot-id",
  },
  {
    name: "different pid namespace",
    setup: (sim) => sim.add(wrapper({ pidNamespace: "pid:[4026532999]" })).add(adapter()),
    verdict: "mismatch",
    signals: [],
    evidence: "pid-namespace",
  },
  {
    name: "unreadable environment, exact identity: start time + argv still prove it",
    setup: (sim) => sim.add(wrapper({ envReadable: false })).add(adapter({ envReadable: false })),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
  },
  {
    name: "unreadable environment, coarse identity, nothing else readable, no group recorded",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ envReadable: false })),
    lease: lease({ processGroupId: undefined, bootId: undefined, pidNamespace: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    name: "deleted exe of the interpreter, argv[1] is still the leased wrapper",
    setup: (sim) => sim.add(wrapper({ exePath: "/usr/bin/node (deleted)" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "owned",
    signals: ["SIGTERM W"],
  },
  {
    name: "deleted exe of a binary wrapper under wrapperRoot: not proof, refused",
    setup: (sim) => sim.add(wrapper({ exePath: `${ROOT}/wrapper (deleted)`, argv: [`${ROOT}/wrapper`] })),
    lease: lease({ processGroupId: undefined, wrapperPath: `${ROOT}/wrapper`, commandHash: computeCommandHash([`${ROOT}/wrapper`]) }),
    verdict: "mismatch",
    signals: [],
    evidence: "wrapper-path",
  },
  {
    name: "lease whose pgid is our own process group",
    setup: family,
    lease: lease({ processGroupId: ownProcessGroupId() ?? 1 }),
    verdict: "mismatch",
    signals: [],
    evidence: "process-group",
  },
  {
    name: "root pid 1",
    setup: family,
    lease: lease({ rootPid: 1 }),
    verdict: "mismatch",
    signals: [],
    evidence: "root-pid",
  },
  {
    name: "root pid is our own pid",
    setup: family,
    lease: lease({ rootPid: process.pid, rootStartTime: "10" }),
    verdict: "mismatch",
    signals: [],
    evidence: "root-pid",
  },
  {
    name: "same-second pid reuse under the ps backend: start time equal, group differs",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, pgid: W + 100, startTime: "1700000000" })),
    lease: lease({ processGroupId: W, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "mismatch",
    signals: [],
    evidence: "process-group",
  },
  {
    name: "same-second pid reuse under the ps backend: start time equal and nothing else known",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, startTime: "1700000000" })),
    lease: lease({ processGroupId: undefined, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    name: "ps backend, start time plus recorded group match: verified",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ startTime: "1700000000" })),
    lease: lease({ processGroupId: W, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "owned",
    signals: ["SIGTERM W"],
  },
  {
    name: "lease from another gateway instance",
    setup: family,
    lease: lease({ gatewayInstanceId: "gw-B" }),
    gatewayInstanceId: "gw-A",
    verdict: "mismatch",
    signals: [],
    evidence: "instance",
  },
  {
    name: "setsid escapee found by its env marker",
    setup: (sim) =>
      family(sim).add({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: 1000, state: "S", startTime: "5003", argv: ["daemon"], env: ENV }),
    verdict: "owned",
    signals: ["SIGTERM E", "SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "a process of another uid carrying the lease id is not collected",
    setup: (sim) =>
      family(sim).add({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: 2000, state: "S", startTime: "5003", argv: ["daemon"], env: ENV }),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "EPERM on one member never stops the others",
    setup: (sim) => sim.add(wrapper()).add(adapter({ deny: true })).add(grandchild()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
    outcomes: { G: "exited-after-term", A: "permission-denied", W: "exited-after-term" },
  },
  {
    name: "a member's pid is reused between verification and signal: skipped",
    setup: family,
    between: (sim) => {
      sim.exit(G);
      sim.add(unrelated({ name: "G'", pid: G, ppid: 1, startTime: "9000" }));
    },
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
    outcomes: { G: "identity-mismatch", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "zombie member counts as exited",
    setup: (sim) => sim.add(wrapper()).add(adapter({ onTerm: "zombie" })),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
    outcomes: { A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "spawn pending: rootPid 0",
    setup: family,
    lease: lease({ rootPid: 0, rootStartTime: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "root-pid",
  },
];

describe("process-lifecycle simulator", () => {
  it("the table does not collide with this process's pids", () => {
    for (const pid of [W, A, G, E, X]) expect([process.pid, process.ppid]).not.toContain(pid);
  });

  for (const row of rows) {
    it(row.name, async () => {
      const sim = row.facts ? row.facts() : new SimFacts();
      row.setup(sim);
      const sig = new RecordingSignaller(sim);
      const l = row.lease ?? lease();
      const v = await explainLease(l, sim, row.gatewayInstanceId ? { gatewayInstanceId: row.gatewayInstanceId } : undefined);
      expect(v.verdict, JSON.stringify(v.evidence)).toBe(row.verdict);
      if (row.evidence) {
        expect(v.evidence.some((e) => e.check === row.evidence && e.result !== "match"), JSON.stringify(v.evidence)).toBe(true);
      }
      expect(v.tree === null).toBe(row.verdict !== "owned");
      row.between?.(sim);
      if (v.tree) {
        const report = await reapOwnedTree(v.tree, { facts: sim, signaller: sig, graceMs: 150, pollMs: 5, confirmMs: 150 });
        if (row.outcomes) {
          const names = new Map([...v.tree.members].map((m) => [m.pid, nameOf(m.pid)]));
          const got = Object.fromEntries(report.results.map((r) => [names.get(r.pid), r.outcome]));
          expect(got).toEqual(row.outcomes);
        }
        expect(report.termSent).toBe(row.signals.filter((s) => s.startsWith("SIGTERM")).length);
        expect(report.killSent).toBe(row.signals.filter((s) => s.startsWith("SIGKILL")).length);
      }
      expect(sig.log).toEqual(row.signals);
    });
  }

  it("verifyLeases walks the table once for many leases", async () => {
    const sim = new SimFacts();
    family(sim);
    const leases = [lease(), lease({ leaseId: "lease-2", rootPid: P + 50 }), lease({ leaseId: "lease-3", rootPid: 1 })];
    const vs = await verifyLeases(leases, sim);
    expect(vs.map((v) => v.verdict)).toEqual(["owned", "gone", "mismatch"]);
    expect(sim.snapshots).toBe(1);
  });

  it("a corrupt lease file is quarantined and produces no signal", async () => {
    const dir = await mkdtemp(join(tmpdir(), "own-sim-"));
    try {
      const store = await openLeaseStore(dir, { durable: false });
      const good = await store.create({ gatewayInstanceId: "gw-A", sessionKey: "s", wrapperRoot: ROOT, wrapperPath: WRAPPER, commandHash: computeCommandHash(ARGV), leaseId: "lease-1" });
      await store.update(good.leaseId, { rootPid: W, rootStartTime: "5000", processGroupId: A, bootId: BOOT, pidNamespace: NS });
      await writeFile(join(store.dir, "lease-2.json"), '{"schemaVersion":1,"leaseId":"lease-2","rootPid":', { mode: 0o600 });
      const { leases, problems } = await store.list({ gatewayInstanceId: "gw-A", states: ["open"] });
      expect(problems.map((p) => p.kind)).toEqual(["corrupt"]);
      expect(problems[0]!.quarantinedTo).toContain("quarantine");
      // the corrupt lease names a live process that is NOT ours: it must not be touched
      const sim = new SimFacts();
      sim.add(wrapper({ name: "W2", pid: P + 60, startTime: "5100" }));
      const sig = new RecordingSignaller(sim);
      const vs = await verifyLeases(leases, sim);
      expect(vs.map((v) => v.verdict)).toEqual(["gone"]);
      expect(sig.log).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});


describe("legacy records in the simulator", () => {
  const quoted = `/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`;
  const live = ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a b"];
  const legacyRows: { name: string; proc: Partial<SimProc>; record: { pid: number; command: string | string[]; wrapperPath?: string }; wrapperRoot?: string; signals: string[] }[] = [
    { name: "shell-quoted stored command, same live argv, no wrapper: verified", proc: { argv: live }, record: { pid: W, command: quoted }, signals: ["SIGTERM W"] },
    { name: "shell-quoted stored command, different live argv: left alone", proc: { argv: [...live.slice(0, 3), "agent:a", "b"] }, record: { pid: W, command: quoted }, signals: [] },
    { name: "wrapper recorded and under wrapperRoot: verified", proc: { argv: live }, record: { pid: W, command: quoted, wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs" }, wrapperRoot: ROOT, signals: ["SIGTERM W"] },
    { name: "wrapper recorded but no wrapperRoot to check: left alone", proc: { argv: live }, record: { pid: W, command: quoted, wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs" }, signals: [] },
    { name: "wrapper recorded, live root is another gateway's wrapper: left alone", proc: { argv: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"] }, record: { pid: W, command: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"], wrapperPath: "/opt/gw-a/acpx/wrapper.mjs" }, wrapperRoot: ROOT, signals: [] },
    { name: "stored pid metadata alone (untokenisable command, argv unreadable): left alone", proc: { argv: null }, record: { pid: W, command: "node $(cat x)" }, signals: [] },
    { name: "dead root: left alone", proc: { pid: P + 77 }, record: { pid: W, command: quoted }, signals: [] },
  ];
  for (const row of legacyRows) {
    it(row.name, async () => {
      const sim = new SimFacts();
      sim.add(wrapper({ envReadable: false, ...row.proc }));
      const sig = new RecordingSignaller(sim);
      const { tree, evidence } = await verifyLegacyRecord({ sessionKey: "old", ...row.record }, sim, row.wrapperRoot ? { wrapperRoot: row.wrapperRoot } : {});
      expect(evidence.length).toBeGreaterThan(0);
      if (tree) {
        expect(tree.lease.leaseId.startsWith("legacy-")).toBe(true);
        await reapOwnedTree(tree, { facts: sim, signaller: sig, graceMs: 100, pollMs: 5, confirmMs: 100 });
      }
      expect(sig.log).toEqual(row.signals);
    });
  }
});
