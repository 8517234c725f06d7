/**
 * One round of a lease cgroup's drain (cgroup-drain.ts): hold the cgroup
 * still, judge every member by the one attribution rule
 * (cgroup-attribution.ts), move each member that is not the lease's out,
 * and hand back the lease's own, each named by pid AND start time.
 *
 * Why nothing foreign can be killed, whatever the agent does meanwhile: the
 * drain signals only the members a round returned, through the
 * identity-checked signaller (the start time the round read is the one the
 * signal is checked against, pidfd on Linux), never the cgroup as a unit:
 * no cgroup.kill is written here. A process moved into the cgroup after the
 * listing was not judged, so it is not signalled; a pid reused meanwhile has
 * another start time, so it is not signalled either. The cgroup is frozen
 * while it is judged (containment/members.ts says why), so its own members
 * can neither fork nor move anything while the round looks; a process that
 * arrives frozen waits for the next round. This process is moved out before
 * any freeze: a cgroup holding the gateway is never frozen.
 */
import {
  foreignLeaf,
  freeze,
  homesOf,
  listMembers,
  membersOf,
  moveOut,
  openLeaseCgroup,
  thaw,
  type Cgroup2Mount,
  type EnterOutcome,
  type LeaseCgroup,
  type ListedMember,
} from "../../containment/index.js";
import { ancestorsOfThisProcess } from "../../facts/guards.js";
import { sameProcess } from "../../facts/identity.js";
import { isAlive } from "../../facts/liveness.js";
import { readStatSync } from "../../facts/procfs.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { escalate } from "./escalate.js";
import { MARKER_ENV_KEYS } from "../verify/markers.js";
import { START_CLOCK_SLACK_MS, startTimeToEpochMs, type StartClock } from "../verify/start-clock.js";
import type { ProcessLease } from "../leases/types.js";
import {
  attributeMember,
  type AttributionOwner,
  type AttributionReaders,
  type MemberDestination,
  type MemberRefusal,
} from "./cgroup-attribution.js";

/** A member the drain found in the lease's cgroup and did not signal: why, and where it went. */
export interface RefusedMember {
  pid: number;
  startTime: string;
  code: MemberRefusal;
  detail: string;
  /** the cgroup it was moved into; null when it could not be moved (it is still in the lease's cgroup) */
  movedTo: string | null;
  /** why it could not be moved, when movedTo is null */
  notMoved?: string;
}

/** What a round found: the lease's own members (each to be signalled by pid and start time), and why it could not tell, if it could not. */
export interface Round {
  own: ListedMember[];
  unknown: string | null;
}

export interface DrainContext {
  cg: LeaseCgroup;
  mount: Cgroup2Mount | null;
  owner: AttributionOwner | null;
  readers: AttributionReaders;
  /** every member refused so far, by pid:start */
  refused: Map<string, RefusedMember>;
}

/** How long a round waits for the kernel's `frozen 1` before it judges what it has (a task in D state freezes late). */
const FREEZE_WAIT_MS = 1000;

/** The readers the attribution rule gets in a drain: /proc, the facts for markers, this instance's store. */
export async function drainContext(
  cg: LeaseCgroup,
  mount: Cgroup2Mount | null,
  owner: AttributionOwner | null,
  deps: { facts: ProcessFacts; leaseOf?: (leaseId: string) => Promise<ProcessLease | null>; clock: StartClock | null },
): Promise<DrainContext> {
  const readers: AttributionReaders = {
    stat: (pid) => readStatSync(pid),
    markers: async (pid, startTime) => {
      const d = await deps.facts.inspect(pid, { envKeys: MARKER_ENV_KEYS }).catch(() => null);
      return d !== null && d.envReadable !== false && sameProcess(d, { pid, startTime }) ? d.env : null;
    },
    lease: async (id) => (deps.leaseOf ? deps.leaseOf(id) : null),
    startedBeforeLease: (startTime) => startedBefore(owner, startTime, deps.clock),
  };
  return { cg, mount, owner, readers, refused: new Map() };
}

/** Started before the lease: against the root's recorded start (same clock), else `startedAt` through btime. */
function startedBefore(owner: AttributionOwner | null, startTime: string, clock: StartClock | null): boolean | null {
  if (owner === null) return null;
  const root = Number(owner.rootStartTime);
  const ticks = Number(startTime);
  if (owner.rootStartTime !== undefined && Number.isFinite(root) && Number.isFinite(ticks)) return ticks < root;
  const epoch = startTimeToEpochMs(startTime, "procfs", clock);
  return epoch === null ? null : epoch < owner.startedAt - START_CLOCK_SLACK_MS;
}

/**
 * One round (see the header). `keepFrozen`: the cgroup stays frozen for the
 * caller's KILL (which a frozen process still dies of); the caller thaws it.
 */
export async function judgeRound(ctx: DrainContext, keepFrozen: boolean): Promise<Round> {
  await bringThisProcessOut(ctx);
  const frozen = await freeze(ctx.cg, FREEZE_WAIT_MS, ctx.mount);
  try {
    const listed = await listMembers(ctx.cg);
    if (listed.state === "gone") return { own: [], unknown: null };
    if (listed.state === "unknown") return { own: [], unknown: listed.why };
    const input = {
      owner: ctx.owner,
      members: new Set(listed.members.map((m) => m.pid)),
      readers: ctx.readers,
      ancestors: ancestorsOfThisProcess(),
    };
    const own: ListedMember[] = [];
    for (const [i, m] of listed.members.entries()) {
      // its reads of /proc are synchronous: the loop gets a turn between slices
      if (i > 0 && i % 128 === 0) await new Promise((r) => setImmediate(r));
      const a = await attributeMember(m, input);
      if (a.own) own.push(m);
      else await moveRefused(ctx, m, a.code, a.detail, a.to);
    }
    return { own, unknown: null };
  } finally {
    if (!keepFrozen && frozen !== "unsupported" && frozen !== "holds-us") await thaw(ctx.cg);
  }
}

/** The gateway found inside (a root agent wrote its pid there): moved back before anything is frozen. */
async function bringThisProcessOut(ctx: DrainContext): Promise<void> {
  const self = readStatSync("self");
  if (self === null) return;
  const listed = await listMembers(ctx.cg);
  if (listed.state !== "ok" || !listed.members.some((m) => m.pid === process.pid)) return;
  await moveRefused(
    ctx,
    { pid: process.pid, startTime: self.startTime },
    "this-process",
    "this process (the gateway)",
    {
      kind: "home",
    },
  );
}

/** A refused member moved where the rule says (the first place that takes it), and recorded. */
async function moveRefused(
  ctx: DrainContext,
  m: ListedMember,
  code: MemberRefusal,
  detail: string,
  to: MemberDestination,
): Promise<void> {
  const tried: string[] = [];
  let movedTo: string | null = null;
  for (const place of await placesFor(ctx.cg, to)) {
    if (place.path === null) {
      tried.push(place.why);
      continue;
    }
    let r: EnterOutcome = await moveOut(m, place.path);
    // another drain removed the empty _foreign leaf between its mkdir and this move: made again, once
    if (r.outcome === "no-cgroup" && place.foreign) {
      const again = await foreignLeaf(ctx.cg.path);
      if (again.path !== null) r = await moveOut(m, again.path);
    }
    if (r.outcome === "gone") return;
    if (r.outcome === "moved") {
      movedTo = place.path;
      break;
    }
    tried.push(`${place.path}: ${r.outcome}${r.detail ? ` (${r.detail})` : ""}`);
  }
  ctx.refused.set(`${m.pid}:${m.startTime}`, {
    pid: m.pid,
    startTime: m.startTime,
    code,
    detail,
    movedTo,
    ...(movedTo === null ? { notMoved: tried.join("; ") || "nowhere to move it" } : {}),
  });
}

type Place = { path: string; foreign?: boolean; why?: never } | { path: null; why: string };

/** Where a refused member may go, in order; `_foreign` last, for the gateway too (out of the lease cgroup, whatever else fails). */
async function placesFor(cg: LeaseCgroup, to: MemberDestination): Promise<Place[]> {
  const out: Place[] = [];
  if (to.kind === "home") for (const path of homesOf(cg.path)) out.push({ path });
  if (to.kind === "lease") {
    const o = await openLeaseCgroup(to.cgroup);
    out.push(
      o.state === "open"
        ? { path: o.cgroup.path }
        : { path: null, why: `lease ${to.leaseId}'s cgroup ${to.cgroup.path} is ${o.state}` },
    );
  }
  const leaf = await foreignLeaf(cg.path);
  out.push(leaf.path !== null ? { path: leaf.path, foreign: true } : leaf);
  return out;
}

/** The lease's own members of `own` still alive (same pid and start time, not a zombie); the loop gets a turn between slices of reads. */
export async function stillAlive(own: readonly ListedMember[]): Promise<ListedMember[]> {
  const out: ListedMember[] = [];
  for (const [i, m] of own.entries()) {
    if (i > 0 && i % 256 === 0) await new Promise((r) => setImmediate(r));
    const st = readStatSync(m.pid);
    if (st !== null && sameProcess(st, m) && isAlive(st)) out.push(m);
  }
  return out;
}

/** The refused members still inside the lease's cgroup (their move failed), alive. */
export async function leftInside(ctx: DrainContext): Promise<RefusedMember[]> {
  const stuck = [...ctx.refused.values()].filter((r) => r.movedTo === null);
  const alive = new Set((await stillAlive(stuck)).map((m) => `${m.pid}:${m.startTime}`));
  return stuck.filter((r) => alive.has(`${r.pid}:${r.startTime}`));
}

/** How long the KILL phase goes on judging and killing before it says what is left (a task in D state dies late). */
const KILL_WAIT_MS = 5000;

/**
 * Ends the lease's own members in the one kill order (escalate): TERM to
 * what a round finds its own, the grace (judging again only once those are
 * gone, to see what their TERM handlers forked), then rounds of KILL, each
 * judged on a frozen cgroup, until a round finds nothing of its own alive or
 * the wait is over. Returns how many of its own it found alive.
 */
export async function endOwnMembers(
  ctx: DrainContext,
  graceMs: number,
  signaller: ProcessSignaller,
): Promise<{ ended: number; unknown: string | null }> {
  const seen = new Set<string>();
  // the round's own members still alive, each counted once as ended by the drain
  const alive = async (round: Round): Promise<ListedMember[]> => {
    const live = await stillAlive(round.own);
    for (const m of live) seen.add(`${m.pid}:${m.startTime}`);
    return live;
  };
  const first = await judgeRound(ctx, false);
  if (first.unknown !== null) return { ended: 0, unknown: first.unknown };
  let own = await alive(first);
  await escalate(
    {
      term: async (sig) => {
        if (own.length === 0) return false;
        await sendEach(own, sig, signaller);
        return true;
      },
      ended: async (ms) => {
        const deadline = Date.now() + ms;
        for (let step = 2; ; step = Math.min(step * 2, 25)) {
          if ((await stillListed(ctx, own)).length === 0) {
            own = await alive(await judgeRound(ctx, false));
            if (own.length === 0) return true;
          }
          if (Date.now() >= deadline) return false;
          await sleep(step);
        }
      },
      force: async (sig) => {
        const deadline = Date.now() + KILL_WAIT_MS;
        for (;;) {
          const r = await judgeRound(ctx, true);
          try {
            own = await alive(r);
            if (own.length > 0) await sendEach(own, sig, signaller);
          } finally {
            await thaw(ctx.cg);
          }
          if (own.length === 0 || Date.now() >= deadline) return;
          await waitGone(ctx, own, Math.min(500, deadline - Date.now()));
        }
      },
    },
    graceMs,
  );
  return { ended: seen.size, unknown: null };
}

/** One signal to each member, by pid and the start time its round read (the identity-checked signaller). */
async function sendEach(own: readonly ListedMember[], sig: NodeJS.Signals, signaller: ProcessSignaller): Promise<void> {
  for (const m of own) await signaller.signal(m.pid, m.startTime, sig).catch(() => "unknown");
}

async function waitGone(ctx: DrainContext, own: readonly ListedMember[], ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (let step = 2; (await stillListed(ctx, own)).length > 0 && Date.now() < deadline; step = Math.min(step * 2, 25))
    await sleep(step);
}

/**
 * The members of `own` the cgroup still lists: one read of cgroup.procs per
 * cgroup rather than one per process, for the waits to poll (an exited
 * process leaves cgroup.procs at once). Only waits read it: every signal is
 * still sent by pid and the start time a round read.
 */
async function stillListed(ctx: DrainContext, own: readonly ListedMember[]): Promise<readonly ListedMember[]> {
  const m = await membersOf(ctx.cg);
  if (m.state === "gone") return [];
  if (m.state !== "ok") return stillAlive(own);
  const listed = new Set(m.pids);
  return own.filter((o) => listed.has(o.pid));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
