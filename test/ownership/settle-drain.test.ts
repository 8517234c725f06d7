/**
 * The cgroup drain as an input of the one settlement table (settle.ts rows
 * D, U and R): what the drain of a lease's own cgroup found settles the
 * lease only through the table, never by an override after it; a spawn that
 * never started settles by its drain alone; and a dry run answers from the
 * same rows, so it never plans to reap what the real run leaves alone.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  createLeaseCgroup,
  detectContainment,
  enterCgroup,
  killCgroup,
  refOf,
  removeCgroup,
  removeInstanceFolder,
} from "../../src/containment/index.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { createSignaller } from "../../src/facts/signal.js";
import {
  explainLease,
  openLeaseStore,
  reconcileLeases,
  settlementFor,
  type TreeKillReport,
  type TreeKillOutcome,
} from "../../src/ownership/index.js";
import {
  NOTHING_STARTED,
  settlementForDryRun,
  settlementUnstarted,
  type DrainInput,
} from "../../src/ownership/lifecycle/settle.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import { family, lease, SimFacts, W } from "./sim.js";

const done = (outcome: TreeKillOutcome): Pick<TreeKillReport, "results"> => ({
  results: [{ pid: W, startTime: "5000", outcome }],
});
const drain = (state: DrainInput["state"], members = 0): DrainInput => ({
  state,
  members,
  evidence: {
    check: "cgroup",
    result: state === "unknown" ? "unknown" : "match",
    code: state === "unknown" ? "populated-unknown" : "emptied-and-removed",
    detail: `/cg: ${state}`,
  },
});

describe("rows D: the drain of the lease's own cgroup", () => {
  it("D1/D2: populated 0 settles closed when something ended (a reap, a prior reap, an observed exit, members the drain ended), else lost", async () => {
    const gone = await explainLease(lease(), new SimFacts());
    const sim = new SimFacts();
    family(sim);
    const owned = await explainLease(lease(), sim);
    expect(settlementFor(owned, done("killed"), { drain: drain("empty") })).toEqual({
      to: "closed",
      code: "cgroup-emptied",
      settledAs: "killed",
      why: "/cg: empty",
    });
    expect(settlementFor(gone, null, { prior: done("killed"), drain: drain("empty") })).toMatchObject({
      to: "closed",
      code: "cgroup-emptied",
      settledAs: "killed",
    });
    expect(settlementFor(gone, null, { rootExitObserved: true, drain: drain("empty") })).toMatchObject({
      to: "closed",
      code: "cgroup-emptied",
      settledAs: "exit-observed",
    });
    expect(settlementFor(gone, null, { drain: drain("empty", 2) })).toMatchObject({
      to: "closed",
      code: "cgroup-emptied",
      settledAs: "killed",
    });
    expect(settlementFor(gone, null, { drain: drain("empty") })).toEqual({
      to: "lost",
      code: "cgroup-found-empty",
      settledAs: "ended-on-its-own",
      why: "nothing of it was alive; /cg: empty",
    });
    // the kernel's populated 0 outweighs a search that could not clear everything, or facts that were down
    const down = new SimFacts();
    down.snapshotFails = true;
    const unknown = await explainLease(lease({ state: "closing" }), down);
    expect(settlementFor(unknown, null)).toMatchObject({ to: "open", code: "facts-unavailable" });
    expect(settlementFor(unknown, null, { drain: drain("empty") })).toMatchObject({
      to: "lost",
      code: "cgroup-found-empty",
      settledAs: "ended-on-its-own",
    });
  });

  it("D3: still populated, or emptied but its folder not removed yet, keeps the lease closing, whatever the row above said", async () => {
    const gone = await explainLease(lease(), new SimFacts());
    for (const state of ["survivors", "left"] as const) {
      const s = settlementFor(gone, null, { rootExitObserved: true, drain: drain(state) });
      expect(s).toMatchObject({ to: "closing", code: state === "left" ? "cgroup-left" : "cgroup-populated" });
      expect(s.settledAs).toBeUndefined();
      // the drain's detail, then the row above's reason
      expect(s.why).toBe(`/cg: ${state}; ${settlementFor(gone, null, { rootExitObserved: true }).why}`);
    }
  });

  it("D4: a drain that cannot tell decides nothing; rows 0 and 8 are never changed by a drain", async () => {
    const gone = await explainLease(lease(), new SimFacts());
    expect(settlementFor(gone, null, { drain: drain("unknown") })).toEqual(settlementFor(gone, null));
    const foreign = await explainLease(lease(), new SimFacts(), { gatewayInstanceId: "gw-OTHER" });
    expect(settlementFor(foreign, null, { drain: drain("empty", 3) })).toMatchObject({
      to: "unchanged",
      code: "other-instance",
    });
    expect(
      settlementFor(await explainLease(lease({ state: "closed" }), new SimFacts()), null, {
        drain: drain("survivors"),
      }),
    ).toMatchObject({ to: "unchanged", code: "already-settled" });
  });
});

describe("rows U: a spawn that never produced a process", () => {
  it("U1 closing while its cgroup cannot be emptied and removed; U2 closed after ending what was born in it; U3 lost otherwise", () => {
    for (const state of ["survivors", "unknown", "left"] as const)
      expect(settlementUnstarted(drain(state, 1))).toMatchObject({
        to: "closing",
        code: "unstarted-cgroup-not-emptied",
      });
    expect(settlementUnstarted(drain("empty", 1))).toEqual({
      to: "closed",
      code: "unstarted-cgroup-emptied",
      settledAs: "killed",
      why: "the spawn failed; /cg: empty",
    });
    expect(settlementUnstarted(drain("empty"))).toBe(NOTHING_STARTED);
    expect(settlementUnstarted(null)).toBe(NOTHING_STARTED);
  });
});

describe("rows R: a dry run answers from the same table", () => {
  it("R1: another instance's lease is not planned for, whatever its cgroup holds; R2 would kill; R3 otherwise the row above", async () => {
    const foreign = await explainLease(lease(), new SimFacts(), { gatewayInstanceId: "gw-OTHER" });
    expect(settlementForDryRun(foreign, { target: null, pids: [7], contained: 1 })).toMatchObject({
      to: "unchanged",
      code: "other-instance",
      kills: false,
    });
    const gone = await explainLease(lease(), new SimFacts());
    expect(settlementForDryRun(gone, { target: null, pids: [7, 8], contained: 2 })).toEqual({
      to: "closed",
      code: "would-kill",
      settledAs: "killed",
      why: "would kill 2 process(es) (7 8), 2 of them in the lease's cgroup; closed if none may still run after it",
      kills: true,
    });
    expect(settlementForDryRun(gone, { target: null, pids: [], contained: 0 })).toEqual({
      ...settlementFor(gone, null),
      kills: false,
    });
  });
});

// ------------------------------------------------------------ on a real cgroup

const probe = await probeCgroup2();
const SKIP = probe.writable ? null : probe.why;
const NOTE = containmentSkipNote(probe);
const support = await detectContainment();
const OTHER = `other-instance-${process.pid}`;
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
  if (support.available) await removeInstanceFolder(support, OTHER);
});

describe("a dry run and the real run agree on another instance's contained lease", () => {
  it.skipIf(SKIP)(`neither plans nor touches the live process in its cgroup${NOTE}`, async () => {
    if (!support.available) throw new Error(support.why);
    const dir = await mkdtemp(join(tmpdir(), "proclease-settle-drain-"));
    dirs.push(dir);
    const store = await openLeaseStore(dir, { durable: false });
    const l = await store.create({
      kind: "acpx",
      gatewayInstanceId: OTHER,
      sessionKey: "agent:other",
      wrapperRoot: "",
      wrapperPath: "",
      commandHash: "0".repeat(64),
    });
    const made = await createLeaseCgroup(support, l.leaseId, OTHER);
    if (!made.ok) throw new Error(made.why);
    await store.update(l.leaseId, { cgroup: refOf(made.cgroup) });
    const c = spawn("sleep", ["60"], { stdio: "ignore" });
    children.push(c);
    await new Promise((r) => c.once("spawn", r));
    expect(enterCgroup(made.cgroup.path, c.pid!)).toEqual({ outcome: "moved" });
    const facts = getProcessFacts();
    const deps = {
      store,
      facts,
      signaller: createSignaller(facts),
      graceMs: 100,
      gatewayInstanceId: `mine-${process.pid}`,
    };
    try {
      const dry = (await reconcileLeases(deps, { leaseIds: [l.leaseId], dryRun: true })).entries[0]!;
      const real = (await reconcileLeases(deps, { leaseIds: [l.leaseId] })).entries[0]!;
      expect({ action: dry.action, code: dry.code, stateAfter: dry.stateAfter, wouldKill: dry.wouldKill }).toEqual({
        action: "left-alone",
        code: "other-instance",
        stateAfter: "open",
        wouldKill: undefined,
      });
      expect({ action: real.action, code: real.code, stateAfter: real.stateAfter }).toEqual({
        action: "left-alone",
        code: "other-instance",
        stateAfter: "open",
      });
      expect(c.exitCode === null && c.signalCode === null).toBe(true);
    } finally {
      await killCgroup(made.cgroup);
      await removeCgroup(made.cgroup);
    }
  });
});
