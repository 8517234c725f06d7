/**
 * The table-driven process-lifecycle simulator. One row per
 * case; every row states the exact list of signals that must be delivered,
 * an empty list included, and the verdict. Every row, whatever its verdict,
 * goes through the production path (explainLease → killLeaseVerification)
 * with the recording signaller, and the simulated family runs under this
 * process's uid, so an empty signal list is something a row can fail.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  computeCommandHash,
  explainLease,
  openLeaseStore,
  killLeaseVerification,
  killOwnedTree,
  tokenizeShellCommand,
  verifyLeases,
  verifyLegacyRecord,
  type LeaseVerdict,
  type TreeKillOutcome,
} from "../../src/ownership/index.js";
import { ownProcessGroupId } from "../../src/facts/guards.js";
import { A, adapter, ARGV, BOOT, E, ENV, family, G, grandchild, lease, MY, nameOf, NS, P, RecordingSignaller, ROOT, SimFacts, unrelated, type SimRowBase, W, WRAPPER, wrapper, X, type SimProc } from "./sim.js";

interface Row extends SimRowBase {
  /** mutate the table after verification, before reaping */
  between?: (sim: SimFacts) => void;
  verdict: LeaseVerdict;
  /** names of the remnant members reaped (leaves first); undefined = no remnants */
  remnants?: string[];
  outcomes?: Record<string, TreeKillOutcome>;
  evidence?: string; // a check that must appear as mismatch/unknown
}

// Rows on `new SimFacts("procfs", "coarse")`: argv and exe readable, but a start time of 1 s
// resolution (as on macOS): a different command then still refuses the pid.
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
    // fail closed: the impostor carries this lease's markers and the old adapter and grandchild
    // are still alive with them, but a reused root pid is a mismatch: nothing is searched or signalled
    name: "pid reused by a process carrying our markers, the old adapter and grandchild still alive: nothing signalled",
    setup: (sim) => sim.add(wrapper({ name: "W'", startTime: "7000", ppid: 1 })).add(adapter({ ppid: 1 })).add(grandchild()),
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
    // under exact identity an equal start time on the same boot and namespace IS our process (see the exec'd rows)
    name: "pid reused by another gateway's wrapper root under a different wrapperRoot (coarse identity)",
    facts: () => new SimFacts("procfs", "coarse"),
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
    name: "stored wrapper command is shell-quoted, live argv differs (split differently), coarse identity: refused",
    facts: () => new SimFacts("procfs", "coarse"),
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
    // a zombie root has exited (same boot): "gone", so what still carries BOTH markers of this lease
    // under our uid, started after the root, is a remnant and reaped; the zombie itself is never signalled
    name: "zombie root, adapter and grandchild carry both markers: reaped as remnants, the zombie is not signalled",
    setup: (sim) => sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1 })).add(grandchild()).add(unrelated()),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
    evidence: "root-alive",
  },
  {
    name: "zombie root, its adapter carries the lease id but not this gateway's instance id: untouched",
    setup: (sim) => sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1, env: { OPENCLAW_ACPX_LEASE_ID: "lease-1" } })),
    verdict: "gone",
    signals: [],
    evidence: "remnant-env",
  },
  {
    name: "zombie root, its adapter carries both markers but started before the root: untouched",
    setup: (sim) => sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1, startTime: "4999" })),
    verdict: "gone",
    signals: [],
    evidence: "remnant-env",
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
    // backends report the observer's namespace: this gateway now runs in another one (a container
    // sharing the state dir), so the lease's pid numbers name other processes here
    name: "this gateway now sees another pid namespace than at spawn: mismatch before any pid is looked up",
    setup: (sim) => {
      family(sim);
      sim.pidNamespace = "pid:[4026532999]";
    },
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
    name: "deleted exe of a binary wrapper under wrapperRoot, coarse identity: not proof, refused",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) => sim.add(wrapper({ exePath: `${ROOT}/wrapper (deleted)`, argv: [`${ROOT}/wrapper`] })),
    lease: lease({ processGroupId: undefined, wrapperPath: `${ROOT}/wrapper`, commandHash: computeCommandHash([`${ROOT}/wrapper`]) }),
    verdict: "mismatch",
    signals: [],
    evidence: "wrapper-path",
  },
  {
    // F1: `sh -c "exec sleep 30"`, `bash -c "sleep 30"`: same process (same start time, boot, namespace), another program
    name: "exec'd root (same start time, different argv and executable), exact identity: owned, reaped",
    setup: (sim) => sim.add(wrapper({ argv: ["/bin/sleep", "30"], exePath: "/bin/sleep" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "owned",
    signals: ["SIGTERM W"],
    evidence: "command-hash",
  },
  {
    name: "exec'd root (same start time, different argv), coarse identity: the start time alone proves nothing, refused",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) => sim.add(wrapper({ argv: ["/bin/sleep", "30"], exePath: "/bin/sleep" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "mismatch",
    signals: [],
    evidence: "command-hash",
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
    // any same-second impostor leading its own group looks exactly like this: pgid == rootPid is implied by the pid
    name: "ps backend, start time plus a recorded group that is the root's own pid: not enough, left alone",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ startTime: "1700000000" })),
    lease: lease({ processGroupId: W, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    name: "ps backend, start time plus the adapter group led by a child of the root: verified",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ startTime: "1700000000" })).add(adapter({ startTime: "1700000001" })),
    lease: lease({ processGroupId: A, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
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
      family(sim).add({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: MY, state: "S", startTime: "5003", argv: ["daemon"], env: ENV }),
    verdict: "owned",
    signals: ["SIGTERM E", "SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "a setsid process carrying the lease id but another gateway's instance id is not collected",
    setup: (sim) =>
      family(sim).add({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: MY, state: "S", startTime: "5003", argv: ["daemon"], env: { ...ENV, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } }),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "a process of another uid carrying the lease id is not collected",
    setup: (sim) =>
      family(sim).add({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: MY + 1, state: "S", startTime: "5003", argv: ["daemon"], env: ENV }),
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
    name: "coarse identity (ps) against a start time recorded in another unit (ticks): unknown, never a mismatch that would settle a live lease lost",
    facts: () => new SimFacts("ps", "coarse"),
    setup: family,
    lease: lease({ rootStartTime: "1700000000" }),
    verdict: "unknown",
    signals: [],
    evidence: "start-time",
  },
  {
    // its gateway died between the lease write and the wrapper's report (a live gateway's own
    // pending spawn is never verified: it is in flight, and one gateway holds the state dir)
    name: "no pid recorded: a gone root, the family found by its markers",
    setup: family,
    lease: lease({ rootPid: 0, rootStartTime: undefined }),
    verdict: "gone",
    remnants: ["G", "A", "W"],
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
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
      expect(v.remnants?.members.map((m) => nameOf(m.pid)) ?? null, JSON.stringify(v.evidence)).toEqual(row.remnants ?? null);
      row.between?.(sim);
      // the production path for every row, owned or not
      const r = await killLeaseVerification(v, { facts: sim, signaller: sig, graceMs: 150, pollMs: 5, confirmMs: 150 });
      expect(r.target).toBe(row.verdict === "owned" ? "tree" : row.remnants ? "remnants" : null);
      if (r.report) {
        if (row.outcomes) {
          const got = Object.fromEntries(r.report.results.map((x) => [nameOf(x.pid), x.outcome]));
          expect(got).toEqual(row.outcomes);
        }
        expect(r.report.termSent).toBe(row.signals.filter((s) => s.startsWith("SIGTERM")).length);
        expect(r.report.killSent).toBe(row.signals.filter((s) => s.startsWith("SIGKILL")).length);
      } else {
        expect(sig.attempts).toEqual([]);
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
      const good = await store.create({ kind: "acpx", gatewayInstanceId: "gw-A", sessionKey: "s", wrapperRoot: ROOT, wrapperPath: WRAPPER, commandHash: computeCommandHash(ARGV), leaseId: "lease-1" });
      await store.update(good.leaseId, { rootPid: W, rootStartTime: "5000", processGroupId: A, bootId: BOOT, pidNamespace: NS });
      await writeFile(join(store.dir, "lease-2.json"), '{"schemaVersion":1,"leaseId":"lease-2","rootPid":', { mode: 0o600 });
      const { leases, problems } = await store.list({ gatewayInstanceId: "gw-A", states: ["open"] });
      expect(problems.map((p) => p.kind)).toEqual(["corrupt"]);
      expect(problems[0]!.quarantinedTo).toContain("quarantine");
      expect(leases.map((l) => l.leaseId)).toEqual(["lease-1"]);
      // the corrupt file was meant to be lease-2, whose live wrapper W2 (our uid, its markers) is NOT
      // proven ours by anything that was readable: nothing may touch it, though lease-1's root is gone
      // and its remnant search runs over every process of our uid
      const sim = new SimFacts();
      sim.add(wrapper({ name: "W2", pid: P + 60, startTime: "5100", env: { OPENCLAW_ACPX_LEASE_ID: "lease-2", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-A" } }));
      const sig = new RecordingSignaller(sim);
      const vs = await verifyLeases(leases, sim);
      expect(vs.map((v) => v.verdict)).toEqual(["gone"]);
      expect(vs[0]!.evidence.some((e) => e.check === "remnant-env")).toBe(true); // the search ran
      for (const v of vs) {
        const r = await killLeaseVerification(v, { facts: sim, signaller: sig, graceMs: 50, pollMs: 5, confirmMs: 50 });
        expect(r.target).toBeNull();
      }
      expect(sig.attempts).toEqual([]);
      expect(sim.table.has(P + 60)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});


describe("legacy records in the simulator", () => {
  const quoted = `/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`;
  const live = ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a b"];
  const wrapperV2 = "/opt/gw-a/acpx/wrapper v2.mjs";
  type LegacyRow = {
    name: string;
    proc: Partial<SimProc>;
    record: { pid: number; command: string | string[]; wrapperPath?: string };
    wrapperRoot?: string;
    signals: string[];
    /** a check that must appear with this result */
    evidence?: [string, "match" | "mismatch" | "unknown"];
  };
  // the legacy process's environment is readable and carries no lease markers unless a row says otherwise
  const legacyRows: LegacyRow[] = [
    { name: "shell-quoted stored command, same live argv, no wrapper: verified", proc: { argv: live }, record: { pid: W, command: quoted }, signals: ["SIGTERM W"], evidence: ["lease-env", "match"] },
    { name: "shell-quoted stored command, different live argv: left alone", proc: { argv: [...live.slice(0, 3), "agent:a", "b"] }, record: { pid: W, command: quoted }, signals: [], evidence: ["command", "mismatch"] },
    { name: "wrapper recorded and under wrapperRoot: verified", proc: { argv: live }, record: { pid: W, command: quoted, wrapperPath: wrapperV2 }, wrapperRoot: ROOT, signals: ["SIGTERM W"], evidence: ["wrapper-root", "match"] },
    { name: "wrapper recorded but no wrapperRoot to check: left alone", proc: { argv: live }, record: { pid: W, command: quoted, wrapperPath: wrapperV2 }, signals: [], evidence: ["wrapper-root", "unknown"] },
    { name: "wrapper recorded, live root is another gateway's wrapper: left alone", proc: { argv: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"] }, record: { pid: W, command: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"], wrapperPath: "/opt/gw-a/acpx/wrapper.mjs" }, wrapperRoot: ROOT, signals: [], evidence: ["wrapper-root", "mismatch"] },
    { name: "stored pid metadata alone (untokenisable command, argv unreadable): left alone", proc: { argv: null }, record: { pid: W, command: "node $(cat x)" }, signals: [], evidence: ["command", "unknown"] },
    {
      // the legacy pid now runs this installation's shared wrapper shim for a CURRENT session
      name: "untokenisable stored command, live root runs the recorded wrapper: never a match, left alone",
      proc: { argv: live },
      record: { pid: W, command: `node '${wrapperV2}' $(session)`, wrapperPath: wrapperV2 },
      wrapperRoot: ROOT,
      signals: [],
      evidence: ["command", "unknown"],
    },
    {
      name: "wrapper root carrying OPENCLAW_ACPX_LEASE_ID is a leased wrapper, not a legacy one: left alone",
      proc: { argv: live, env: ENV },
      record: { pid: W, command: quoted, wrapperPath: wrapperV2 },
      wrapperRoot: ROOT,
      signals: [],
      evidence: ["lease-env", "mismatch"],
    },
    {
      name: "command-only legacy root carrying OPENCLAW_ACPX_LEASE_ID (a current session's process on the reused pid): left alone",
      proc: { argv: live, env: { OPENCLAW_ACPX_LEASE_ID: "lease-9" } },
      record: { pid: W, command: quoted },
      signals: [],
      evidence: ["lease-env", "mismatch"],
    },
    {
      name: "wrapper root whose environment cannot be read: unknown, left alone",
      proc: { argv: live, envReadable: false },
      record: { pid: W, command: quoted, wrapperPath: wrapperV2 },
      wrapperRoot: ROOT,
      signals: [],
      evidence: ["lease-env", "unknown"],
    },
    { name: "dead root: left alone", proc: { pid: P + 77 }, record: { pid: W, command: quoted }, signals: [], evidence: ["root-alive", "mismatch"] },
  ];
  for (const row of legacyRows) {
    it(row.name, async () => {
      const sim = new SimFacts();
      sim.add(wrapper({ env: {}, ...row.proc }));
      const sig = new RecordingSignaller(sim);
      const { tree, evidence } = await verifyLegacyRecord({ sessionKey: "old", ...row.record }, sim, row.wrapperRoot ? { wrapperRoot: row.wrapperRoot } : {});
      expect(evidence.length).toBeGreaterThan(0);
      if (row.evidence) {
        const [check, result] = row.evidence;
        expect(evidence.some((e) => e.check === check && e.result === result), JSON.stringify(evidence)).toBe(true);
      }
      expect(tree !== null).toBe(row.signals.length > 0);
      if (tree) {
        expect(tree.lease.leaseId.startsWith("legacy-")).toBe(true);
        await killOwnedTree(tree, { facts: sim, signaller: sig, graceMs: 100, pollMs: 5, confirmMs: 100 });
      }
      expect(sig.log).toEqual(row.signals);
    });
  }
});

describe("reaper: a tree that contains this process and its parent", () => {
  // A caller hands the reaper a target that (wrongly) lists our parent and this process next to
  // the legit members. Our parent has another child (our sibling S), we have a child of our own (C),
  // and the legit root W forks a newcomer N on its way out. Only W, its child K and N may be signalled.
  const S = P + 40;
  const C = P + 41;
  const K = P + 42;
  const N = P + 43;
  const names: Record<number, string> = { [process.ppid]: "parent", [process.pid]: "self", [S]: "S", [C]: "C", [K]: "K", [N]: "N", [W]: "W" };

  it("guard-refused members never seed the new-children search; only the legit members are signalled", async () => {
    const sim = new SimFacts();
    sim.add({ name: "parent", pid: process.ppid, ppid: 1, pgid: process.ppid, sid: process.ppid, uid: MY, state: "S", startTime: "1" });
    sim.add({ name: "S", pid: S, ppid: process.ppid, pgid: S, sid: S, uid: MY, state: "S", startTime: "20" });
    sim.add({ name: "C", pid: C, ppid: process.pid, pgid: C, sid: C, uid: MY, state: "S", startTime: "30" });
    sim.add({ name: "K", pid: K, ppid: W, pgid: W, sid: W, uid: MY, state: "S", startTime: "5001" });
    sim.add(wrapper({ ppid: 1, onTerm: "ignore", onTermSpawn: { name: "N", pid: N, ppid: W, pgid: W, sid: W, uid: MY, state: "S", startTime: "5010" } }));
    const snap = await sim.snapshot();
    const info = (pid: number) => snap.processes.get(pid)!;
    const target = { root: info(W), members: [info(K), info(process.pid), info(process.ppid), info(W)] };
    const sig = new RecordingSignaller(sim);
    const report = await killOwnedTree(target, { facts: sim, signaller: sig, graceMs: 100, pollMs: 5, confirmMs: 100 });
    expect(sig.log).toEqual(["SIGTERM K", "SIGTERM W", "SIGTERM N", "SIGKILL W"]);
    expect(sig.attempts.map((a) => names[a.pid])).toEqual(["K", "W", "N", "W"]);
    const outcome = Object.fromEntries(report.results.map((r) => [names[r.pid] ?? String(r.pid), r.outcome]));
    expect(outcome).toEqual({ K: "exited-after-term", self: "refused-by-guard", parent: "refused-by-guard", W: "killed", N: "exited-after-term" });
    for (const pid of [S, C, process.pid, process.ppid]) expect(sim.table.has(pid), names[pid]).toBe(true);
  });

  it("a newcomer that is this process's ancestor or refused by the guards is neither signalled nor walked through", async () => {
    // W's snapshot child is (by the table) our parent: the chain W → parent → self → C must stop at W
    const sim = new SimFacts();
    sim.add(wrapper({ ppid: 1, onTerm: "ignore" }));
    sim.add({ name: "parent", pid: process.ppid, ppid: W, pgid: process.ppid, sid: process.ppid, uid: MY, state: "S", startTime: "1" });
    sim.add({ name: "S", pid: S, ppid: process.ppid, pgid: S, sid: S, uid: MY, state: "S", startTime: "20" });
    sim.add({ name: "C", pid: C, ppid: process.pid, pgid: C, sid: C, uid: MY, state: "S", startTime: "30" });
    const root = (await sim.snapshot()).processes.get(W)!;
    const sig = new RecordingSignaller(sim);
    await killOwnedTree({ root, members: [root] }, { facts: sim, signaller: sig, graceMs: 60, pollMs: 5, confirmMs: 60 });
    expect(sig.attempts.map((a) => `${a.sig} ${names[a.pid]}`)).toEqual(["SIGTERM W", "SIGKILL W"]);
    for (const pid of [S, C, process.pid, process.ppid]) expect(sim.table.has(pid), names[pid]).toBe(true);
  });
});
