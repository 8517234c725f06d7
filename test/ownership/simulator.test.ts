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
  verifyLeases,
  verifyLegacyRecord,
} from "../../src/ownership/index.js";
import {
  A,
  ARGV,
  BOOT,
  E,
  ENV,
  family,
  G,
  lease,
  MY,
  nameOf,
  NS,
  P,
  RecordingSignaller,
  ROOT,
  SimFacts,
  W,
  WRAPPER,
  wrapper,
  X,
  type SimProc,
} from "./sim.js";
import { rows } from "./simulator-rows.js";

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
      const v = await explainLease(
        l,
        sim,
        row.gatewayInstanceId ? { gatewayInstanceId: row.gatewayInstanceId } : undefined,
      );
      expect(v.verdict, JSON.stringify(v.evidence)).toBe(row.verdict);
      if (row.evidence) {
        expect(
          v.evidence.some((e) => e.check === row.evidence && e.result !== "match"),
          JSON.stringify(v.evidence),
        ).toBe(true);
      }
      expect(v.tree === null).toBe(row.verdict !== "owned");
      expect(v.remnants?.members.map((m) => nameOf(m.pid)) ?? null, JSON.stringify(v.evidence)).toEqual(
        row.remnants ?? null,
      );
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
      const good = await store.create({
        kind: "acpx",
        gatewayInstanceId: "gw-A",
        sessionKey: "s",
        wrapperRoot: ROOT,
        wrapperPath: WRAPPER,
        commandHash: computeCommandHash(ARGV),
        leaseId: "lease-1",
      });
      await store.update(good.leaseId, {
        rootPid: W,
        rootStartTime: "5000",
        processGroupId: A,
        bootId: BOOT,
        pidNamespace: NS,
      });
      await writeFile(join(store.dir, "lease-2.json"), '{"schemaVersion":1,"leaseId":"lease-2","rootPid":', {
        mode: 0o600,
      });
      const { leases, problems } = await store.list({ gatewayInstanceId: "gw-A", states: ["open"] });
      expect(problems.map((p) => p.kind)).toEqual(["corrupt"]);
      expect(problems[0]!.quarantinedTo).toContain("quarantine");
      expect(leases.map((l) => l.leaseId)).toEqual(["lease-1"]);
      // the corrupt file was meant to be lease-2, whose live wrapper W2 (our uid, its markers) is NOT
      // proven ours by anything that was readable: nothing may touch it, though lease-1's root is gone
      // and its remnant search runs over every process of our uid
      const sim = new SimFacts();
      sim.add(
        wrapper({
          name: "W2",
          pid: P + 60,
          startTime: "5100",
          env: { OPENCLAW_ACPX_LEASE_ID: "lease-2", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-A" },
        }),
      );
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
    {
      name: "shell-quoted stored command, same live argv, no wrapper: verified",
      proc: { argv: live },
      record: { pid: W, command: quoted },
      signals: ["SIGTERM W"],
      evidence: ["lease-env", "match"],
    },
    {
      name: "shell-quoted stored command, different live argv: left alone",
      proc: { argv: [...live.slice(0, 3), "agent:a", "b"] },
      record: { pid: W, command: quoted },
      signals: [],
      evidence: ["command", "mismatch"],
    },
    {
      name: "wrapper recorded and under wrapperRoot: verified",
      proc: { argv: live },
      record: { pid: W, command: quoted, wrapperPath: wrapperV2 },
      wrapperRoot: ROOT,
      signals: ["SIGTERM W"],
      evidence: ["wrapper-root", "match"],
    },
    {
      name: "wrapper recorded but no wrapperRoot to check: left alone",
      proc: { argv: live },
      record: { pid: W, command: quoted, wrapperPath: wrapperV2 },
      signals: [],
      evidence: ["wrapper-root", "unknown"],
    },
    {
      name: "wrapper recorded, live root is another gateway's wrapper: left alone",
      proc: { argv: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"] },
      record: {
        pid: W,
        command: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"],
        wrapperPath: "/opt/gw-a/acpx/wrapper.mjs",
      },
      wrapperRoot: ROOT,
      signals: [],
      evidence: ["wrapper-root", "mismatch"],
    },
    {
      name: "stored pid metadata alone (untokenisable command, argv unreadable): left alone",
      proc: { argv: null },
      record: { pid: W, command: "node $(cat x)" },
      signals: [],
      evidence: ["command", "unknown"],
    },
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
    {
      name: "dead root: left alone",
      proc: { pid: P + 77 },
      record: { pid: W, command: quoted },
      signals: [],
      evidence: ["root-alive", "mismatch"],
    },
  ];
  for (const row of legacyRows) {
    it(row.name, async () => {
      const sim = new SimFacts();
      sim.add(wrapper({ env: {}, ...row.proc }));
      const sig = new RecordingSignaller(sim);
      const { tree, evidence } = await verifyLegacyRecord(
        { sessionKey: "old", ...row.record },
        sim,
        row.wrapperRoot ? { wrapperRoot: row.wrapperRoot } : {},
      );
      expect(evidence.length).toBeGreaterThan(0);
      if (row.evidence) {
        const [check, result] = row.evidence;
        expect(
          evidence.some((e) => e.check === check && e.result === result),
          JSON.stringify(evidence),
        ).toBe(true);
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
  const names: Record<number, string> = {
    [process.ppid]: "parent",
    [process.pid]: "self",
    [S]: "S",
    [C]: "C",
    [K]: "K",
    [N]: "N",
    [W]: "W",
  };

  it("guard-refused members never seed the new-children search; only the legit members are signalled", async () => {
    const sim = new SimFacts();
    sim.add({
      name: "parent",
      pid: process.ppid,
      ppid: 1,
      pgid: process.ppid,
      sid: process.ppid,
      uid: MY,
      state: "S",
      startTime: "1",
    });
    sim.add({ name: "S", pid: S, ppid: process.ppid, pgid: S, sid: S, uid: MY, state: "S", startTime: "20" });
    sim.add({ name: "C", pid: C, ppid: process.pid, pgid: C, sid: C, uid: MY, state: "S", startTime: "30" });
    sim.add({ name: "K", pid: K, ppid: W, pgid: W, sid: W, uid: MY, state: "S", startTime: "5001" });
    sim.add(
      wrapper({
        ppid: 1,
        onTerm: "ignore",
        onTermSpawn: { name: "N", pid: N, ppid: W, pgid: W, sid: W, uid: MY, state: "S", startTime: "5010" },
      }),
    );
    const snap = await sim.snapshot();
    const info = (pid: number) => snap.processes.get(pid)!;
    const target = { root: info(W), members: [info(K), info(process.pid), info(process.ppid), info(W)] };
    const sig = new RecordingSignaller(sim);
    const report = await killOwnedTree(target, { facts: sim, signaller: sig, graceMs: 100, pollMs: 5, confirmMs: 100 });
    expect(sig.log).toEqual(["SIGTERM K", "SIGTERM W", "SIGTERM N", "SIGKILL W"]);
    expect(sig.attempts.map((a) => names[a.pid])).toEqual(["K", "W", "N", "W"]);
    const outcome = Object.fromEntries(report.results.map((r) => [names[r.pid] ?? String(r.pid), r.outcome]));
    expect(outcome).toEqual({
      K: "exited-after-term",
      self: "refused-by-guard",
      parent: "refused-by-guard",
      W: "killed",
      N: "exited-after-term",
    });
    for (const pid of [S, C, process.pid, process.ppid]) expect(sim.table.has(pid), names[pid]).toBe(true);
  });

  it("a newcomer that is this process's ancestor or refused by the guards is neither signalled nor walked through", async () => {
    // W's snapshot child is (by the table) our parent: the chain W → parent → self → C must stop at W
    const sim = new SimFacts();
    sim.add(wrapper({ ppid: 1, onTerm: "ignore" }));
    sim.add({
      name: "parent",
      pid: process.ppid,
      ppid: W,
      pgid: process.ppid,
      sid: process.ppid,
      uid: MY,
      state: "S",
      startTime: "1",
    });
    sim.add({ name: "S", pid: S, ppid: process.ppid, pgid: S, sid: S, uid: MY, state: "S", startTime: "20" });
    sim.add({ name: "C", pid: C, ppid: process.pid, pgid: C, sid: C, uid: MY, state: "S", startTime: "30" });
    const root = (await sim.snapshot()).processes.get(W)!;
    const sig = new RecordingSignaller(sim);
    await killOwnedTree(
      { root, members: [root] },
      { facts: sim, signaller: sig, graceMs: 60, pollMs: 5, confirmMs: 60 },
    );
    expect(sig.attempts.map((a) => `${a.sig} ${names[a.pid]}`)).toEqual(["SIGTERM W", "SIGKILL W"]);
    for (const pid of [S, C, process.pid, process.ppid]) expect(sim.table.has(pid), names[pid]).toBe(true);
  });
});
