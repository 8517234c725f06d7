/**
 * The controller settles every lease by ownership's one rule (settlementFor):
 * - a failed ensure is settled by its LAST verification: a first reap that
 *   completed never closes the lease when the look after the wrapper's exit
 *   could not clear every candidate (one could not be inspected);
 * - a close whose verification is unknown for another reason than an
 *   unavailable process list (here: the root could not be inspected) keeps
 *   the lease closing, says why, lets go of the session, and the maintenance
 *   timer settles it once the facts answer;
 * - a close whose first look is unknown (a fault window) pulls the lifeline:
 *   the wrapper reports the adapter's exit, and the lease settles closed, not
 *   lost (it ended under our eyes, at our request), contained or not.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxEnsureError } from "../../src/acpx/report/errors.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import { createSignaller } from "../../src/facts/signal.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "./controller-helpers.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

const controllers = disposeAfterEach();

/**
 * Real facts with two switches: `blind` pids cannot be inspected (inspect
 * throws, as for a process the facts layer failed on), and `ghost` stays in
 * every snapshot even after it exited (a root the list still shows).
 */
function trickyFacts(): {
  facts: ProcessFacts;
  blind: Set<number>;
  blindWhileAlive: Set<number>;
  ghost: ProcessInfo | null;
  blindReads: number;
} {
  const real = getProcessFacts();
  // blindReads: how often a blinded pid was asked for (each verification that looked at it)
  const t = {
    blind: new Set<number>(),
    blindWhileAlive: new Set<number>(),
    ghost: null as ProcessInfo | null,
    blindReads: 0,
    facts: undefined as unknown as ProcessFacts,
  };
  t.facts = {
    backend: real.backend,
    identityStrength: real.identityStrength,
    async snapshot() {
      const snap = await real.snapshot();
      const g = t.ghost;
      if (g === null || snap.processes.has(g.pid)) return snap;
      return buildSnapshot(snap.takenAt, [...snap.processes.values(), g]);
    },
    inspect: (pid, o) => {
      // blindWhileAlive: the pid cannot be inspected while it runs (a fault window over the first look); once it is gone, the facts answer
      if (!t.blind.has(pid) && !(t.blindWhileAlive.has(pid) && alive(pid))) return real.inspect(pid, o);
      t.blindReads++;
      return Promise.reject(new Error(`inspect of ${pid} failed (test)`));
    },
    inspectMany: (pids, o) => inspectEach(t.facts.inspect, pids, o, 8),
  };
  return t;
}

const ENV_FACTS = getProcessFacts();
// the remnant search (and so both rows) needs environments: procfs or native
const SKIP = ENV_FACTS.backend === "ps" || ENV_FACTS.backend === "none";
const SKIP_NOTE = SKIP ? ` [skipped: the ${ENV_FACTS.backend} backend cannot read environments]` : "";
if (SKIP) console.log(`controller-settlement.test:${SKIP_NOTE}`);

describe("the controller settles by the one rule", () => {
  it.skipIf(SKIP)(
    `failed ensure: the first reap completed, the last look could not clear a candidate → closing; the startup reap settles it${SKIP_NOTE}`,
    async () => {
      const t = trickyFacts();
      const stateDir = tempStateDir("settle-spawn");
      // records every identity-checked signal, so the test can tell "the first reap ran" from "no reap at all"
      const real = createSignaller(t.facts);
      const sent: { pid: number; sig: string; outcome: string }[] = [];
      const signaller: ProcessSignaller = {
        raceFree: real.raceFree,
        async signal(pid, startTime, sig) {
          const outcome = await real.signal(pid, startTime, sig);
          sent.push({ pid, sig, outcome });
          return outcome;
        },
      };
      // uncontained: these rows drive the settlement rule with failing facts; the lease cgroup would overrule them (containment.test.ts)
      const ctl = await createAcpxLifecycleController({
        stateDir,
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        handshakeTimeoutMs: 1500,
        facts: t.facts,
        signaller,
        containment: "off",
      });
      controllers.push(ctl);
      const pending = ctl
        .ensureSession({
          sessionKey: "k-spawn",
          agentId: "main",
          command: agentArgv({ kind: "plain", extra: ["--never-answer"] }),
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      // once the wrapper's identity is recorded, a process of our uid starts that the facts cannot inspect
      const store = await openLeaseStore(stateDir);
      expect(
        await waitFor(async () => (await store.list()).leases.some((l) => l.rootStartTime !== undefined), 10_000),
      ).not.toBe(-1);
      const odd = trackChild(spawn("sleep", ["30"], { stdio: "ignore" }));
      t.blind.add(odd.pid!);

      const err = await pending;
      expect(err).toBeInstanceOf(AcpxEnsureError);
      const e = err as AcpxEnsureError;
      trackLease(e.leaseId!);
      expect(e.failure).toBe("handshake-timeout");
      // the first pass verified the live wrapper's tree and reaped it: its root got an identity-checked SIGTERM
      const rootPid = (await store.get(e.leaseId!))!.rootPid;
      expect(sent).toContainEqual({ pid: rootPid, sig: "SIGTERM", outcome: "signalled" });
      // the process the facts could not inspect was never signalled
      expect(sent.map((x) => x.pid)).not.toContain(odd.pid);
      // everything of the lease is gone, but the last look could not prove it: never settled on unknown
      expect(leaseCarriers(e.leaseId!)).toEqual([]);
      expect(e.leaseState).toBe("closing");
      expect((await store.get(e.leaseId!))?.state).toBe("closing");

      odd.kill("SIGKILL");
      await new Promise((r) => odd.once("exit", r));
      t.blind.clear();
      const rep = await ctl.reapStartupOrphans();
      const entry = rep.entries.find((x) => x.leaseId === e.leaseId);
      expect(entry).toMatchObject({
        verdict: "gone",
        action: "marked-lost",
        stateAfter: "lost",
        code: "ended-on-its-own",
        settledAs: "ended-on-its-own",
      });
    },
  );

  it.skipIf(SKIP)(
    `close with a root that cannot be inspected: closing with that cause, the session let go, the maintenance timer settles it${SKIP_NOTE}`,
    async () => {
      const t = trickyFacts();
      const stateDir = tempStateDir("settle-close");
      // uncontained, as above
      const ctl = await createAcpxLifecycleController({
        stateDir,
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 150,
        facts: t.facts,
        containment: "off",
      });
      controllers.push(ctl);
      const h = await ctl.ensureSession({
        sessionKey: "k-close",
        agentId: "main",
        command: agentArgv({ kind: "setsid" }),
      });
      trackLease(h.leaseId);
      const root = (await getProcessFacts().snapshot()).processes.get(h.rootPid);
      expect(root).toBeDefined();
      t.ghost = root!;
      t.blind.add(h.rootPid);

      const r = await ctl.closeSession({ handle: h, reason: "root uninspectable" });
      expect(r).toMatchObject({ outcome: "retry-pending", leaseState: "closing", verdict: "unknown" });
      expect(r.kill).toBeUndefined();
      // decided by the real cause (the root could not be inspected), not an unavailable process list
      expect(r.code).toBe("unknown-evidence");
      expect(r.evidence.at(-1)).toMatchObject({ check: "inspect", result: "unknown", code: "inspect-failed" });
      expect(r.evidence.some((e) => e.code === "process-list-unavailable")).toBe(false);
      const store = await openLeaseStore(stateDir);
      expect((await store.get(h.leaseId))?.state).toBe("closing");
      // the lifeline was ended: the wrapper cleaned its own tree and exited (which settles nothing by itself)
      expect(await waitFor(() => !alive(h.rootPid) && leaseCarriers(h.leaseId).length === 0, 10_000)).not.toBe(-1);
      // while the facts still cannot tell, the timer keeps it closing, never open or settled: counted in
      // maintenance passes that looked at the root (two more blinded reads), so it cannot pass on a timer that never ran
      const reads = t.blindReads;
      expect(await waitFor(() => t.blindReads >= reads + 2, 10_000)).not.toBe(-1);
      expect((await store.get(h.leaseId))?.state).toBe("closing");

      // the facts answer again: the maintenance timer (not another close) settles the lease
      t.ghost = null;
      t.blind.clear();
      expect(await waitFor(async () => (await store.get(h.leaseId))?.state === "lost", 10_000)).not.toBe(-1);
      // the session was let go: a new ensure on the key starts afresh instead of refusing
      const h2 = await ctl.ensureSession({ sessionKey: "k-close", agentId: "main", command: agentArgv({}) });
      trackLease(h2.leaseId);
      expect(h2.leaseId).not.toBe(h.leaseId);
      expect((await ctl.closeSession({ handle: h2 })).outcome).toBe("closed");
    },
  );

  for (const containment of ["off", "auto"] as const) {
    it.skipIf(SKIP)(
      `close whose first look is unknown (containment ${containment}): the lifeline is pulled, the wrapper reports the adapter's exit, and the lease settles closed${SKIP_NOTE}`,
      async () => {
        const t = trickyFacts();
        const stateDir = tempStateDir(`settle-once-${containment}`);
        const ctl = await createAcpxLifecycleController({
          stateDir,
          graceMs: GRACE_MS,
          maintenanceIntervalMs: 0,
          facts: t.facts,
          containment,
        });
        controllers.push(ctl);
        const h = await ctl.ensureSession({
          sessionKey: `k-once-${containment}`,
          agentId: "main",
          command: agentArgv({ kind: "setsid" }),
        });
        trackLease(h.leaseId);
        const reads = t.blindReads;
        t.blindWhileAlive.add(h.rootPid);

        const r = await ctl.closeSession({ handle: h, reason: "a passing fault" });
        // the first look really was blind, and nothing was signalled on it
        expect(t.blindReads).toBeGreaterThan(reads);
        expect(r.detail).toMatch(/told to clean up/);
        expect(r).toMatchObject({ outcome: "closed", leaseState: "closed" });
        expect(["exit-observed", "killed"]).toContain(r.settledAs);
        expect((await openLeaseStore(stateDir).then((s) => s.get(h.leaseId)))?.state).toBe("closed");
        expect(leaseCarriers(h.leaseId)).toEqual([]);
      },
    );
  }
});
