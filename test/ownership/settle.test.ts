/**
 * The one settlement rule (settle.ts), row by row, over verifications the
 * simulator produces through the production path (explainLease), plus the
 * remnant search's refusal to call unreadable evidence "nothing left".
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { InspectOptions, ProcessDetails } from "../../src/facts/types.js";
import { applySettlement } from "../../src/ownership/lifecycle/lifecycle.js";
import {
  explainLease,
  NOTHING_STARTED,
  openLeaseStore,
  killLeaseVerification,
  settleLease,
  settlementFor,
  type TreeKillReport,
  type SettleVerification,
} from "../../src/ownership/index.js";
import { adapter, E, family, lease, MY, RecordingSignaller, SimFacts, unrelated, W, wrapper, X } from "./sim.js";

const REAP = { graceMs: 50, pollMs: 5, confirmMs: 50 };
/** Inspect throws for the pids in `broken` (the facts layer failed on them). */
class BrokenSim extends SimFacts {
  readonly broken = new Set<number>();
  override async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
    if (this.broken.has(pid)) throw new Error(`EIO reading /proc/${pid} (simulated)`);
    return super.inspect(pid, opts);
  }
}

/** a same-uid process, started after the lease's root, outside its tree */
const stranger = (over: Parameters<typeof unrelated>[0] = {}) =>
  unrelated({ name: "E", pid: E, ppid: 1, pgid: E, sid: E, uid: MY, startTime: "5010", env: {}, ...over });

describe("N2: a remnant candidate that cannot be read is never 'nothing left'", () => {
  it("gone root + a same-uid process with an unreadable environment: inconclusive (env-unreadable), settlement closing, nothing signalled", async () => {
    const sim = new SimFacts();
    sim.add(stranger({ envReadable: false }));
    const v = await explainLease(lease(), sim);
    expect(v.verdict).toBe("gone");
    expect(v.remnantSearch).toBe("inconclusive");
    expect(v.remnantsUncleared).toBe(1);
    expect(v.evidence.find((e) => e.check === "remnant-env")).toMatchObject({ result: "unknown", code: "none-proven" });
    expect(v.remnantRefusals).toEqual({ "env-unreadable": 1 });
    expect(settlementFor(v, null)).toMatchObject({ to: "closing", code: "remnant-search-inconclusive" });
    const sig = new RecordingSignaller(sim);
    expect((await killLeaseVerification(v, { facts: sim, signaller: sig, ...REAP })).target).toBeNull();
    expect(sig.attempts).toEqual([]);
  });

  it("gone root + a same-uid process whose inspect threw: inconclusive (could not be inspected), settlement closing", async () => {
    const sim = new BrokenSim();
    sim.add(stranger());
    sim.broken.add(E);
    const v = await explainLease(lease(), sim);
    expect(v.verdict).toBe("gone");
    expect(v.remnantSearch).toBe("inconclusive");
    expect(v.evidence.find((e) => e.check === "remnant-env")).toMatchObject({ result: "unknown", code: "none-proven" });
    expect(v.remnantRefusals).toEqual({ "inspect-failed": 1 });
    expect(settlementFor(v, null)).toMatchObject({ to: "closing", code: "remnant-search-inconclusive" });
  });

  it("an unreadable process that provably cannot be the lease's (started before the root, another uid) does not block 'none-found'", async () => {
    const sim = new SimFacts();
    sim
      .add(stranger({ startTime: "4000", envReadable: false }))
      .add(stranger({ pid: X, name: "X", uid: MY + 1, envReadable: false }));
    const v = await explainLease(lease(), sim);
    expect(v.remnantSearch).toBe("none-found");
    expect(v.remnantsUncleared).toBe(0);
    expect(settlementFor(v, null)).toMatchObject({
      to: "lost",
      code: "ended-on-its-own",
      settledAs: "ended-on-its-own",
    });
  });

  it("remnants found and reaped while another candidate could not be read: the completed reap does not close the lease", async () => {
    const sim = new SimFacts();
    sim
      .add(wrapper({ state: "Z" }))
      .add(adapter({ ppid: 1 }))
      .add(stranger({ envReadable: false }));
    const v = await explainLease(lease(), sim);
    expect(v.remnantSearch).toBe("found");
    expect(v.remnantsUncleared).toBe(1);
    const r = await killLeaseVerification(v, { facts: sim, signaller: new RecordingSignaller(sim), ...REAP });
    expect(r.target).toBe("remnants");
    expect(settlementFor(v, r.report)).toMatchObject({ to: "closing", code: "kill-left-uncleared" });
  });
});

const done = (outcome: TreeKillReport["results"][number]["outcome"]): TreeKillReport => ({
  results: [{ pid: W, startTime: "5000", outcome }],
  termSent: 1,
  killSent: 0,
  durationMs: 1,
});

describe("settlementFor: the table", () => {
  it("1/4: a reap that completed closes; one with a member that may still run keeps closing", async () => {
    const sim = new SimFacts();
    family(sim);
    const v = await explainLease(lease(), sim);
    expect(v.verdict).toBe("owned");
    expect(settlementFor(v, done("exited-after-term"))).toMatchObject({
      to: "closed",
      code: "killed",
      settledAs: "killed",
    });
    expect(settlementFor(v, done("identity-mismatch"))).toMatchObject({
      to: "closed",
      code: "killed",
      settledAs: "killed",
    });
    for (const o of ["survived", "permission-denied", "unknown"] as const) {
      const s = settlementFor(v, done(o));
      expect(s).toMatchObject({ to: "closing", code: "kill-survivors" });
      expect(s.settledAs).toBeUndefined();
      // the words name the pid that may still run
      expect(s.why).toContain(String(W));
    }
    // 5: a verified tree alive and not killed is not settled
    expect(settlementFor(v, null)).toMatchObject({ to: "closing", code: "tree-alive" });
  });

  it("6: gone with nothing left is lost; closed after a COMPLETED prior reap or (no prior reap) an observed root exit; a prior reap with survivors keeps closing", async () => {
    const v = await explainLease(lease(), new SimFacts());
    expect([v.verdict, v.remnantSearch]).toEqual(["gone", "none-found"]);
    expect(settlementFor(v, null)).toMatchObject({
      to: "lost",
      code: "ended-on-its-own",
      settledAs: "ended-on-its-own",
    });
    expect(settlementFor(v, null, { prior: done("killed") })).toMatchObject({
      to: "closed",
      code: "killed-earlier",
      settledAs: "killed",
    });
    expect(settlementFor(v, null, { rootExitObserved: true })).toMatchObject({
      to: "closed",
      code: "exit-observed",
      settledAs: "exit-observed",
    });
    // fail closed: a member the prior kill could not signal is not proven gone
    for (const o of ["permission-denied", "survived", "unknown"] as const) {
      const s = settlementFor(v, null, { prior: done(o) });
      expect(s).toMatchObject({ to: "closing", code: "earlier-kill-survivors" });
      expect(s.why).toContain(String(W));
      // an observed root exit does not outweigh a prior kill's survivor
      expect(settlementFor(v, null, { prior: done(o), rootExitObserved: true })).toMatchObject({
        to: "closing",
        code: "earlier-kill-survivors",
      });
    }
  });

  it("6: a host rebooted since the lease: nothing of it can be alive (none-found without a search)", async () => {
    const sim = new SimFacts();
    family(sim);
    sim.bootId = "boot-other";
    const v = await explainLease(lease(), sim);
    expect([v.verdict, v.remnantSearch]).toEqual(["gone", "none-found"]);
    expect(v.evidence).toContainEqual(
      expect.objectContaining({ check: "boot-id", result: "mismatch", code: "rebooted" }),
    );
    expect(settlementFor(v, null)).toMatchObject({
      to: "lost",
      code: "ended-on-its-own",
      settledAs: "ended-on-its-own",
    });
  });

  it("7: gone with remnants not reaped, or a blocked search (ps), stays closing", async () => {
    const sim = new SimFacts();
    sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1 }));
    const v = await explainLease(lease(), sim);
    expect(v.remnantSearch).toBe("found");
    expect(settlementFor(v, null)).toMatchObject({ to: "closing", code: "remnants-alive" });
    const ps = await explainLease(lease(), new SimFacts("ps", "coarse"));
    expect([ps.verdict, ps.remnantSearch]).toEqual(["gone", "inconclusive"]);
    expect(ps.evidence).toContainEqual(expect.objectContaining({ check: "remnant-env", code: "search-blocked" }));
    expect(settlementFor(ps, null)).toMatchObject({ to: "closing", code: "remnant-search-inconclusive" });
  });

  it("8/9: a mismatch is lost (the prior rule of row 6); another instance's lease is not ours to settle", async () => {
    const sim = new SimFacts();
    sim.add(unrelated({ name: "W'", pid: W, startTime: "7000" }));
    const v = await explainLease(lease(), sim);
    expect(v.verdict).toBe("mismatch");
    // the start time says the pid was reused: not ours, nothing signalled
    expect(v.evidence).toContainEqual(
      expect.objectContaining({ check: "start-time", result: "mismatch", code: "pid-reused" }),
    );
    expect(settlementFor(v, null)).toMatchObject({ to: "lost", code: "not-ours", settledAs: "not-ours" });
    expect(settlementFor(v, null, { prior: done("killed") })).toMatchObject({ to: "closed", code: "killed-earlier" });
    expect(settlementFor(v, null, { prior: done("survived") })).toMatchObject({
      to: "closing",
      code: "earlier-kill-survivors",
    });
    expect(settlementFor(v, null, { rootExitObserved: true })).toMatchObject({ to: "closed", code: "exit-observed" });
    const foreign = await explainLease(lease(), sim, { gatewayInstanceId: "gw-OTHER" });
    expect(foreign.evidence).toContainEqual(
      expect.objectContaining({ check: "instance", result: "mismatch", code: "other-instance" }),
    );
    expect(settlementFor(foreign, null)).toMatchObject({ to: "unchanged", code: "other-instance" });
  });

  it("10/11: unknown goes back to open only when the facts were unavailable; every other unknown stays closing and says why", async () => {
    const down = new SimFacts();
    down.snapshotFails = true;
    const a = await explainLease(lease({ state: "closing" }), down);
    expect([a.verdict, a.factsUnavailable]).toEqual(["unknown", true]);
    // decided by the process list that could not be read
    expect(a.evidence.at(-1)).toMatchObject({
      check: "process-list",
      result: "unknown",
      code: "process-list-unavailable",
    });
    expect(settlementFor(a, null)).toMatchObject({ to: "open", code: "facts-unavailable" });
    const none = await explainLease(lease(), new SimFacts("none", "none"));
    expect([none.verdict, none.factsUnavailable, settlementFor(none, null).to, settlementFor(none, null).code]).toEqual(
      ["unknown", true, "open", "facts-unavailable"],
    );
    expect(none.evidence.at(-1)).toMatchObject({ check: "facts-backend", code: "backend-verifies-nothing" });

    // a lease with no pid (its writer died before the wrapper reported) is a gone root: searched by
    // markers, and with nothing carrying them it is lost, never stuck closing
    const pending = await explainLease(lease({ rootPid: 0, rootStartTime: undefined }), new SimFacts());
    expect([pending.verdict, pending.remnantSearch]).toEqual(["gone", "none-found"]);
    expect(pending.evidence).toContainEqual(
      expect.objectContaining({ check: "root-pid", result: "mismatch", code: "no-pid-recorded" }),
    );
    expect(settlementFor(pending, null)).toMatchObject({
      to: "lost",
      code: "ended-on-its-own",
      settledAs: "ended-on-its-own",
    });

    const broken = new BrokenSim();
    family(broken);
    broken.broken.add(W);
    const b = await explainLease(lease(), broken);
    expect([b.verdict, b.factsUnavailable]).toEqual(["unknown", false]);
    // the deciding unknown (verify pushes it last) is the inspect that failed, not the process list
    expect(b.evidence.at(-1)).toMatchObject({ check: "inspect", result: "unknown", code: "inspect-failed" });
    expect(settlementFor(b, null)).toMatchObject({ to: "closing", code: "unknown-evidence" });
  });

  it("0: a lease already closed or lost is left unchanged", () => {
    const v: SettleVerification = {
      lease: lease({ state: "lost" }),
      verdict: "gone",
      evidence: [],
      remnantSearch: "none-found",
      remnantsUncleared: 0,
      factsUnavailable: false,
    };
    expect(settlementFor(v, done("killed"))).toMatchObject({ to: "unchanged", code: "already-settled" });
  });
});

describe("applySettlement moves the lease only through legal transitions", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  it("open → closing → closed|lost; closing → open; same state and terminal leases untouched", async () => {
    const dir = await mkdtemp(join(tmpdir(), "own-settle-"));
    dirs.push(dir);
    const store = await openLeaseStore(dir, { durable: false });
    const mk = async () =>
      (
        await store.create({
          kind: "acpx",
          gatewayInstanceId: "gw-A",
          sessionKey: "s",
          wrapperRoot: "/x",
          wrapperPath: "/x/w",
          commandHash: "h",
        })
      ).leaseId;
    const a = await mk();
    expect((await applySettlement(store, a, { to: "open", code: "facts-unavailable", why: "t" }))?.state).toBe("open");
    expect((await applySettlement(store, a, { to: "closing", code: "unknown-evidence", why: "t" }))?.state).toBe(
      "closing",
    );
    expect((await applySettlement(store, a, { to: "open", code: "facts-unavailable", why: "t" }))?.state).toBe("open");
    expect(
      (await applySettlement(store, a, { to: "closed", code: "killed", settledAs: "killed", why: "t" }))?.state,
    ).toBe("closed");
    expect((await applySettlement(store, a, { to: "open", code: "facts-unavailable", why: "t" }))?.state).toBe(
      "closed",
    );
    // how it ended is written with the final state, and a settled lease keeps it
    expect((await store.get(a))?.settledAs).toBe("killed");
    const b = await mk();
    expect(await applySettlement(store, b, NOTHING_STARTED)).toMatchObject({
      state: "lost",
      settledAs: "never-started",
    });
    expect(
      (await applySettlement(store, b, { to: "closed", code: "killed", settledAs: "killed", why: "t" }))?.state,
    ).toBe("lost");
    const c = await mk();
    expect((await applySettlement(store, c, { to: "unchanged", code: "already-settled", why: "t" }))?.state).toBe(
      "open",
    );
    expect((await store.get(c))?.settledAs).toBeUndefined();
    expect(
      await applySettlement(store, "no-such-lease", { to: "closed", code: "killed", settledAs: "killed", why: "t" }),
    ).toBeNull();
  });

  it("a lease settled after its verification (a close that won the race) is left as it stands: nothing signalled, its state kept", async () => {
    const dir = await mkdtemp(join(tmpdir(), "own-settle-"));
    dirs.push(dir);
    const store = await openLeaseStore(dir, { durable: false });
    const l = lease();
    await store.create({
      leaseId: l.leaseId,
      kind: l.kind,
      gatewayInstanceId: l.gatewayInstanceId,
      sessionKey: l.sessionKey,
      wrapperRoot: l.wrapperRoot,
      wrapperPath: l.wrapperPath,
      commandHash: l.commandHash,
    });
    const { leaseId: _id, gatewayInstanceId: _gw, state: _state, kind: _kind, ...fields } = l;
    const listed = await store.update(l.leaseId, fields);
    const sim = new SimFacts();
    family(sim);
    const signaller = new RecordingSignaller(sim);
    const deps = { store, facts: sim, signaller, graceMs: 50, gatewayInstanceId: "gw-A" };
    // the batch verified the lease as listed (open, its tree alive and ours) ...
    const v = await explainLease(listed, sim, { gatewayInstanceId: "gw-A" });
    expect(v.verdict).toBe("owned");
    // ... then another settle closed it before this one moved it to closing
    await applySettlement(store, l.leaseId, {
      to: "closed",
      code: "killed",
      settledAs: "killed",
      why: "the other close",
    });
    const o = await settleLease(deps, listed, { verification: v });
    expect({ code: o.code, action: o.action, stateBefore: o.stateBefore, stateAfter: o.stateAfter }).toEqual({
      code: "already-settled",
      action: "left-alone",
      stateBefore: "closed",
      stateAfter: "closed",
    });
    expect(signaller.attempts).toEqual([]);
    expect(await store.get(l.leaseId)).toMatchObject({ state: "closed", settledAs: "killed" });
  });
});
