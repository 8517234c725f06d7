/**
 * The env pass of a verification (verify.ts): ONE batch of environment reads
 * over the processes that could carry a marker, shared by every lease being
 * verified. It finds the escapees of live roots (processes outside the
 * parent links that carry a lease's id and gateway instance id) and the
 * remnants of gone roots (remnants.ts). Candidates are processes with the uid
 * of some verified root, not already in a collected tree, not zombies, and
 * started no earlier than the oldest verified root (when start times are
 * comparable); for remnants, processes of this uid that are not our
 * ancestors and started no earlier than the recorded root.
 */
import { statSync } from "node:fs";
import { isAlive, isKernelThread } from "../../facts/liveness.js";
import { sameProcess } from "../../facts/identity.js";
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { collectTree, type TreeContext } from "./collect.js";
import { markerVerdict } from "./markers.js";
import {
  buildRemnantTarget,
  couldCarry,
  judgeCarrier,
  remnantEvidence,
  remnantSearchBlocked,
  remnantStartBound,
  RemnantTally,
  type RemnantContext,
} from "./remnants.js";
import { readStartClock, type StartClock } from "./start-clock.js";
import { LEASE_ENV_KEY } from "../leases/types.js";
import type { DetailsBatch } from "./verify-cache.js";
import type { State } from "./verify-state.js";
import type { Turns } from "../../facts/turns.js";
import { isOwnHelper } from "./own-helpers.js";

/** how long an unreadable or mid-exec candidate is given before its second read */
const EXEC_SETTLE_MS = 20;

/**
 * One pass of env reads shared by every lease in the batch: returns the
 * marker pids of the alive leases, and fills in `remnants` (plus evidence)
 * of every seeker (a lease whose root is gone).
 */
export interface EnvPass {
  /** leases whose root checked out so far: their markers are looked for */
  alive: State[];
  /** leases whose root is gone: their remnants are looked for */
  seekers: State[];
  facts: ProcessFacts;
  snapshot: ProcessSnapshot;
  host: ProcessDetails | null;
  batch: DetailsBatch;
  tree: TreeContext;
  /** the verification's slices of the event loop (facts/turns.ts) */
  turns: Turns;
  startClock: StartClock | null | undefined;
}

type Seeking = Map<string, { s: State; tally: RemnantTally }>;

export async function scanEnvironments(pass: EnvPass): Promise<Map<string, number[]>> {
  const { alive, seekers, facts, snapshot, host, batch, tree, turns } = pass;
  const out = new Map<string, number[]>();

  // remnant seekers: who can be searched at all, and from which start time on
  const ctx: RemnantContext = {
    facts,
    myUid: typeof process.getuid === "function" ? process.getuid() : null,
    hostBootId: host?.bootId,
    hostPidNamespace: host?.pidNamespace,
    ancestors: tree.ancestors,
    clock: null,
  };
  const tallies = seeking(seekers, ctx);
  if (tallies.size > 0)
    ctx.clock = pass.startClock !== undefined ? pass.startClock : await readStartClock().catch(() => null);

  const markersWanted = alive.length > 0 && facts.backend !== "ps";
  if (!markersWanted && tallies.size === 0) return out;

  const starts = alive.map((s) => Number(s.root!.startTime));
  const comparable = starts.every((n) => Number.isFinite(n));
  const candidates = await envCandidates(pass, tallies, ctx, markersWanted, comparable ? Math.min(...starts) : null);
  const details = await readTwice(candidates, batch, tallies.size > 0);
  const judge: Judge = {
    tallies,
    ctx,
    markersWanted,
    byId: new Map(alive.map((s) => [s.lease.leaseId, s])),
    comparable,
    out,
  };
  for (const [i, p] of candidates.entries()) {
    if (turns.due()) await turns.yield();
    judgeCandidate(p, details[i], judge);
  }
  for (const { s, tally } of tallies.values()) {
    const target = buildRemnantTarget(snapshot, tally);
    s.evidence.push(...remnantEvidence(tally, target, null));
    s.remnants = target;
    // only a refusal that could not judge the process keeps the search open (remnants.ts UNCLEARED):
    // a readable environment with other markers, another uid or an earlier start proves it is not ours
    s.remnantsUncleared = tally.uncleared();
    s.remnantRefusals = Object.fromEntries(tally.refused);
    s.remnantOutcome = target !== null ? "found" : s.remnantsUncleared > 0 ? "inconclusive" : "none-found";
  }
  return out;
}

/** The seekers whose remnants can be searched for, each with its tally; the others get their evidence and an inconclusive search now. */
function seeking(seekers: readonly State[], ctx: RemnantContext): Seeking {
  const tallies: Seeking = new Map();
  for (const s of seekers) {
    const blocked = remnantSearchBlocked(s.lease, ctx);
    if (blocked !== null) {
      s.evidence.push(...remnantEvidence(null, null, blocked));
      s.remnants = null;
      s.remnantOutcome = "inconclusive";
    } else tallies.set(s.lease.leaseId, { s, tally: new RemnantTally() });
  }
  return tallies;
}

/** The processes whose environment is read: outside every collected tree, alive, of a verified root's uid (markers) or ours (remnants). */
async function envCandidates(
  pass: EnvPass,
  tallies: Seeking,
  ctx: RemnantContext,
  markersWanted: boolean,
  oldest: number | null,
): Promise<ProcessInfo[]> {
  const { alive, snapshot, tree, turns } = pass;
  const remnantBound = Math.min(...[...tallies.values()].map(({ s }) => remnantStartBound(s.lease, ctx)));
  const uids = new Set(alive.map((s) => s.root!.uid));
  const inTree = new Set<number>();
  for (const s of alive) {
    for (const p of collectTree(snapshot, s.root!, { context: tree })) inTree.add(p.pid);
    if (turns.due()) await turns.yield();
  }
  const candidates: ProcessInfo[] = [];
  for (const p of snapshot.processes.values()) {
    if (turns.due()) await turns.yield();
    // dead records, zombies, kernel threads and this process's own helpers (its keeper) carry nobody's markers
    if (inTree.has(p.pid) || !isAlive(p) || isKernelThread(p) || !tree.allowed(p.pid) || isOwnHelper(p.pid)) continue;
    // started no earlier than the oldest verified root, when their start times compare (oldest not null)
    const forMarkers = markersWanted && uids.has(p.uid) && (oldest === null || Number(p.startTime) >= oldest);
    const forRemnants =
      tallies.size > 0 && p.uid === ctx.myUid && !ctx.ancestors.has(p.pid) && !(Number(p.startTime) < remnantBound);
    if (forMarkers || forRemnants) candidates.push(p);
  }
  return candidates;
}

/**
 * The candidates' details. A busy host has same-uid processes exiting or
 * exec'ing at the very moment their environment is read; such a read fails
 * without saying anything about our lease. Each failed read gets ONE more
 * try (only when remnants are searched): a process gone or a zombie by then
 * is gone; only one that stays unreadable keeps a search open. An empty argv
 * from a user-space process means it is inside execve (its new memory has no
 * argument or environment area yet, so markers it carries read as absent): a
 * process a TERM trap forks during the teardown is often caught there. Both
 * kinds are read again after a pause long enough for an exec.
 */
async function readTwice(
  candidates: readonly ProcessInfo[],
  batch: DetailsBatch,
  retryUnreadable: boolean,
): Promise<(ProcessDetails | null | undefined)[]> {
  await batch.fetch(candidates.map((p) => p.pid));
  const details = candidates.map((p) => batch.get(p.pid));
  const retry = candidates
    .map((_, i) => i)
    .filter(
      (i) =>
        retryUnreadable &&
        (details[i] === undefined || details[i]?.envReadable === false || details[i]?.argv?.length === 0),
    );
  if (retry.length > 0) {
    await new Promise((r) => setTimeout(r, EXEC_SETTLE_MS));
    await batch.refetch(retry.map((i) => candidates[i]!.pid));
    for (const i of retry) details[i] = batch.get(candidates[i]!.pid);
  }
  return details;
}

/**
 * A process that made itself non-dumpable (prctl PR_SET_DUMPABLE 0, or one
 * running a setuid program): the kernel then gives its /proc files to root
 * while its directory keeps its own uid, and refuses its environment to its
 * own uid. Linux only; false when it cannot be told (then it stays a
 * carrier the search could not clear).
 */
function hidesEnvironment(p: ProcessInfo): boolean {
  if (process.platform !== "linux") return false;
  try {
    const dir = statSync(`/proc/${p.pid}`);
    const stat = statSync(`/proc/${p.pid}/stat`);
    return dir.uid === p.uid && stat.uid !== p.uid && p.uid !== 0;
  } catch {
    return false;
  }
}

interface Judge {
  tallies: Seeking;
  ctx: RemnantContext;
  markersWanted: boolean;
  byId: Map<string, State>;
  /** the verified roots' start times are comparable numbers */
  comparable: boolean;
  /** marker pids by lease id (the scan's result) */
  out: Map<string, number[]>;
}

/** One candidate: gone, unjudgeable (a search it keeps open), a remnant of a gone root, or a marker of a live one. */
function judgeCandidate(p: ProcessInfo, d: ProcessDetails | null | undefined, j: Judge): void {
  // gone since the snapshot, or its pid already names another process: not a carrier of anything
  if (d === null || (d !== undefined && (!sameProcess(d, p) || !isAlive(d) || isKernelThread(d)))) return;
  // Neither argv nor environment readable: the process has no address space
  // (cmdline needs none of the permissions environ does). It holds no
  // environment at all, so it carries nobody's markers: a task between
  // exit and its exit flags, or a kernel-spawned helper before its exec.
  if (d !== undefined && d.envReadable === false && d.argv === null) return;
  if (d === undefined || d.envReadable === false) {
    // Nothing says whose it is: for every gone root it could have come from
    // (our uid, not an ancestor, not started before the lease), the search
    // cannot say "nothing is left" (fail closed: unknown is never "none"),
    // unless the process hides its environment for good (remnants.ts UNCLEARED)
    const hidden = d !== undefined && hidesEnvironment(p);
    for (const { s, tally } of j.tallies.values()) {
      if (!couldCarry(s.lease, p, j.ctx)) continue;
      tally.add(
        p,
        d === undefined
          ? { ok: false, why: "inspect-failed" }
          : hidden
            ? { ok: false, why: "env-hidden" }
            : judgeCarrier(s.lease, p, d, j.ctx),
        d?.argv?.[0],
      );
    }
    return;
  }
  // the lease id only indexes the batch; markerVerdict (in judgeCarrier, and below) decides
  const id = d.env?.[LEASE_ENV_KEY];
  if (typeof id !== "string") return;
  const seeker = j.tallies.get(id);
  if (seeker) return seeker.tally.add(p, judgeCarrier(seeker.s.lease, p, d, j.ctx), d.argv?.[0]);
  if (!j.markersWanted) return;
  const s = j.byId.get(id);
  if (!s || s.root!.uid !== p.uid || markerVerdict(d, s.lease) !== "match") return;
  if (j.comparable && Number(p.startTime) < Number(s.root!.startTime)) return;
  const list = j.out.get(id);
  if (list) list.push(p.pid);
  else j.out.set(id, [p.pid]);
}
