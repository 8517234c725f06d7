/**
 * Live verification of leases: does the process the lease names still exist,
 * and is it provably the one we spawned? Fail closed: any mismatch → no tree;
 * nothing but "unknown" → no tree.
 *
 * Cost model (why verifyLeases exists): one snapshot and one inspect of this
 * process per batch; one inspect per lease root; and ONE pass of env reads
 * over marker candidates shared by the whole batch. Marker candidates are
 * processes with the uid of some verified root, not already in a collected
 * tree, not zombies, and started no earlier than the oldest verified root
 * (when start times are comparable numbers). Their environment is read once
 * for both marker keys, mapped leaseId → pids, and each one kept only when
 * markerVerdict (markers.ts: lease id AND gateway instance id) says "match". On a busy host under
 * one uid that pass dominates, so 100 separate verifyOwnedTree calls cost
 * ~100 passes while verifyLeases costs one (bench/ownership.bench.mjs).
 * The ps backend cannot read environments, so the pass is skipped there.
 *
 * The same pass looks for remnants (remnants.ts): for a lease whose root is
 * gone (absent or a zombie, same boot), the processes that still carry the
 * lease's markers. Candidates for that are processes of this uid that are not
 * our ancestors and started no earlier than the recorded root; one whose
 * environment cannot be read, or that cannot be inspected at all, and that
 * could be the lease's by everything else known about it (couldCarry), makes
 * the search "inconclusive", never "none-found". A root pid
 * that now names a process with another start time (pid reused) is a
 * mismatch: no remnant search, nothing signalled, whatever the impostor
 * carries (fail closed: any mismatch → nothing).
 *
 * pid-namespace: the facts backends report the OBSERVER's namespace
 * (/proc/self/ns/pid), so the check asks "does this gateway still see the
 * pid namespace it saw at spawn?". When it does not, the lease's pid numbers
 * do not name the same processes here: mismatch, before any pid is looked up.
 */
import { realpath } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { isAlive, isKernelThread } from "../facts/liveness.js";
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../facts/types.js";
import { ancestorsOfSelf, collectTree } from "./collect.js";
import { computeCommandHash } from "./command-hash.js";
import { isUnder, mapLimit } from "./fs-safe.js";
import { checkSignalTarget, isOwnProcessGroup } from "./guards.js";
import { parseLeaseRecord } from "./lease-record.js";
import type { ReapTarget } from "./reap.js";
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
import { MARKER_ENV_KEYS, markerVerdict } from "./markers.js";
import { LEASE_ENV_KEY, type AcpxProcessLease, type OwnedProcessTree, type OwnershipEvidence } from "./types.js";
import { sameProcess } from "../facts/identity.js";

export type LeaseVerdict = "owned" | "gone" | "mismatch" | "unknown";

export interface LeaseVerification {
  lease: AcpxProcessLease;
  /**
   * owned: a tree was verified. gone: the root is not alive (absent, zombie,
   * or the host rebooted since the lease was written): the controller may
   * mark the lease lost. mismatch: something alive answers to the pid but is
   * not ours: never signal. unknown: facts unavailable or insufficient.
   */
  verdict: LeaseVerdict;
  evidence: OwnershipEvidence[];
  tree: OwnedProcessTree | null;
  /**
   * Only with verdict "gone" because the root is absent or a zombie on the
   * same boot: the processes still proven to be this lease's by their env
   * markers and the other remnant checks (remnants.ts), with their
   * descendants, leaves first, the oldest carrier last as `root`. null
   * otherwise (a reused root pid, "mismatch", never has remnants), and always
   * null on the ps and none backends. Never set together with `tree`.
   */
  remnants: ReapTarget | null;
  /**
   * How the remnant search for a gone root ended, so callers never have to
   * read evidence text: "found" (remnants set), "none-found" (every
   * candidate was judged and none carries this lease: nothing of it is
   * alive), "inconclusive" (the search could not run, or some carrier could
   * not be judged, or a candidate's environment could not be read or it
   * could not be inspected), "not-run" (the root is not gone). A host
   * rebooted since the lease was written answers "none-found" without a
   * search: nothing started on an earlier boot can be alive.
   */
  remnantSearch: "found" | "none-found" | "inconclusive" | "not-run";
  /**
   * How many processes the remnant search could not clear: carriers of this
   * lease id it refused, and candidates whose environment could not be read
   * or that could not be inspected. 0 when nothing was searched. A remnant
   * reap that completed still leaves the lease closing while this is not 0
   * (settle.ts).
   */
  remnantsUncleared: number;
  /**
   * true when the verdict is "unknown" because the facts could not answer at
   * all: the process list could not be read, or the backend verifies nothing
   * ("none"). The one case a closing lease goes back to open (settle.ts);
   * every other unknown (no root pid yet, a root that could not be
   * inspected, coarse identity, …) keeps it closing.
   */
  factsUnavailable: boolean;
}

export interface VerifyOptions {
  /** reuse a snapshot the caller already took */
  snapshot?: ProcessSnapshot;
  /** when given, a lease of another gateway instance is a mismatch */
  gatewayInstanceId?: string;
  /**
   * The boot clock used to compare a remnant's start with the lease's
   * `startedAt`; default: read from /proc/stat (only when a remnant search
   * runs). null = not computable (tests use it to exercise that path).
   */
  startClock?: StartClock | null;
}

/**
 * Checks whose match identifies the root beyond its pid (used for the
 * sufficiency rule). "process-group" counts only when the recorded group is
 * not the root's own pid (see decide).
 */
const CORROBORATING = new Set(["wrapper-path", "command-hash", "process-group", "lease-env"]);
const MARKER_CONCURRENCY = 16;
/** how long an unreadable or mid-exec candidate is given before its second read */
const EXEC_SETTLE_MS = 20;
const EXECD = "the root exec'd another program since spawn (same start time): the command no longer identifies it";

export async function explainLease(lease: AcpxProcessLease, facts: ProcessFacts, opts?: VerifyOptions): Promise<LeaseVerification> {
  const [v] = await verifyLeases([lease], facts, opts);
  return v!;
}

export async function verifyOwnedTree(
  lease: AcpxProcessLease,
  facts: ProcessFacts,
  opts?: { snapshot?: ProcessSnapshot; gatewayInstanceId?: string },
): Promise<OwnedProcessTree | null> {
  return (await explainLease(lease, facts, opts)).tree;
}

/** Verifies many leases against ONE snapshot and one shared env-marker pass. Never throws for bad leases or facts. */
export async function verifyLeases(
  leases: readonly AcpxProcessLease[],
  facts: ProcessFacts,
  opts?: VerifyOptions,
): Promise<LeaseVerification[]> {
  const states: State[] = leases.map((raw) => {
    const parsed = parseLeaseRecord(raw, false);
    if (!parsed.ok) {
      return done(raw, "unknown", [{ check: "lease-record", result: "unknown", detail: `not a valid lease: ${parsed.reason}` }]);
    }
    return { lease: parsed.lease, evidence: [], verdict: null, root: null, details: null };
  });
  const unavailable = (s: State) => {
    s.factsUnavailable = true;
  };
  const pending = () => states.filter((s) => s.verdict === null);
  if (pending().length === 0) return states.map(finish);

  if (facts.identityStrength === "none") {
    for (const s of pending()) {
      unavailable(s);
      finishWith(s, "unknown", { check: "facts-backend", result: "unknown", detail: `backend "${facts.backend}" cannot verify anything` });
    }
    return states.map(finish);
  }
  let snapshot: ProcessSnapshot;
  try {
    snapshot = opts?.snapshot ?? (await facts.snapshot());
  } catch (e) {
    for (const s of pending()) {
      unavailable(s);
      finishWith(s, "unknown", { check: "process-list", result: "unknown", detail: `process list unavailable: ${errMsg(e)}` });
    }
    return states.map(finish);
  }
  const host = (await inspectSafe(facts, process.pid, [])) ?? null;
  const paths = new PathCache();

  // phase 1: the root of each lease, checked on its own
  await mapLimit(pending(), MARKER_CONCURRENCY, (s) => checkRoot(s, facts, snapshot, host, paths, opts?.gatewayInstanceId));

  // phase 2: one env pass: markers of every lease whose root checked out so
  // far, and remnants of every lease whose root is gone
  const alive = pending().filter((s) => s.root !== null);
  const seekers = states.filter((s) => s.remnantSearch === true);
  const markers = await scanEnvironments(alive, seekers, facts, snapshot, host, opts);

  // phase 3: process group, sufficiency, tree
  for (const s of alive) decide(s, snapshot, markers.get(s.lease.leaseId) ?? [], facts);
  for (const s of pending()) finishWith(s, "unknown", { check: "sufficiency", result: "unknown", detail: "verification did not complete" });
  return states.map(finish);
}

interface State {
  lease: AcpxProcessLease;
  evidence: OwnershipEvidence[];
  verdict: LeaseVerdict | null;
  root: ProcessInfo | null;
  details: ProcessDetails | null;
  tree?: OwnedProcessTree | null;
  /** the root is gone (absent or a zombie, same boot): look for remnants */
  remnantSearch?: boolean;
  remnants?: ReapTarget | null;
  remnantOutcome?: LeaseVerification["remnantSearch"];
  remnantsUncleared?: number;
  factsUnavailable?: boolean;
}

function done(lease: AcpxProcessLease, verdict: LeaseVerdict, evidence: OwnershipEvidence[]): State {
  return { lease, evidence, verdict, root: null, details: null, tree: null };
}
function finishWith(s: State, verdict: LeaseVerdict, ev?: OwnershipEvidence): void {
  if (ev) s.evidence.push(ev);
  s.verdict = verdict;
  s.tree = null;
}
/** finishWith "gone", and the lease's remnants are searched for in the env pass. Only a gone root has remnants. */
function vanished(s: State, ev: OwnershipEvidence): void {
  finishWith(s, "gone", ev);
  s.remnantSearch = true;
}
function finish(s: State): LeaseVerification {
  const remnants = s.tree ? null : (s.remnants ?? null);
  return {
    lease: s.lease,
    verdict: s.verdict ?? "unknown",
    evidence: s.evidence,
    tree: s.tree ?? null,
    remnants,
    remnantSearch: s.remnantOutcome ?? "not-run",
    remnantsUncleared: s.remnantsUncleared ?? 0,
    factsUnavailable: s.factsUnavailable === true,
  };
}

async function checkRoot(
  s: State,
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  host: ProcessDetails | null,
  paths: PathCache,
  gatewayInstanceId: string | undefined,
): Promise<void> {
  const { lease, evidence: ev } = s;
  const push = (check: string, result: OwnershipEvidence["result"], detail?: string) =>
    ev.push(detail === undefined ? { check, result } : { check, result, detail });

  if (gatewayInstanceId !== undefined) {
    push("instance", lease.gatewayInstanceId === gatewayInstanceId ? "match" : "mismatch",
      lease.gatewayInstanceId === gatewayInstanceId ? undefined : `lease belongs to gateway ${lease.gatewayInstanceId}, not ${gatewayInstanceId}`);
    if (lease.gatewayInstanceId !== gatewayInstanceId) return finishWith(s, "mismatch");
  }
  const guard = lease.rootPid === 0 ? { allowed: true as const } : checkSignalTarget(lease.rootPid);
  if (!guard.allowed) return finishWith(s, "mismatch", { check: "root-pid", result: "mismatch", detail: `refused by guard: ${guard.reason}` });
  if (lease.processGroupId !== undefined && isOwnProcessGroup(lease.processGroupId) === true) {
    return finishWith(s, "mismatch", { check: "process-group", result: "mismatch", detail: `recorded group ${lease.processGroupId} is this process's own group, or led by this process or its parent` });
  }

  // a reboot since the lease was written means the recorded process cannot be alive
  const hostBoot = host?.bootId;
  if (lease.bootId === undefined || hostBoot === undefined) push("boot-id", "unknown", lease.bootId === undefined ? "not recorded" : "not readable");
  else if (lease.bootId !== hostBoot) {
    finishWith(s, "gone", { check: "boot-id", result: "mismatch", detail: "host rebooted since the lease was written" });
    // nothing started on an earlier boot is alive: there is nothing to search for
    s.remnantOutcome = "none-found";
    return;
  }
  else push("boot-id", "match");

  // the observer's namespace (see the header): another one means the pid numbers name other processes here
  const hostNs = host?.pidNamespace;
  if (lease.pidNamespace === undefined || hostNs === undefined) push("pid-namespace", "unknown", lease.pidNamespace === undefined ? "not recorded" : "this gateway's pid namespace is not readable");
  else if (lease.pidNamespace !== hostNs) {
    return finishWith(s, "mismatch", { check: "pid-namespace", result: "mismatch", detail: `this gateway now sees pid namespace ${hostNs}, the lease was written while it saw ${lease.pidNamespace}: its pids name other processes here` });
  } else push("pid-namespace", "match", "this gateway still sees the pid namespace it saw at spawn");

  // A lease with no pid: its writer died between the lease write and the
  // wrapper's report (a live writer's pending spawn is never verified: the
  // controller skips leases in flight, and one gateway holds the state dir).
  // Its root is as gone as a dead one; what it started is found by markers.
  if (lease.rootPid === 0) return vanished(s, { check: "root-pid", result: "mismatch", detail: "no root pid recorded: the spawn never reported one and its gateway is gone; searching by markers" });
  const root = snapshot.processes.get(lease.rootPid);
  if (!root) return vanished(s, { check: "root-alive", result: "mismatch", detail: `pid ${lease.rootPid} is not in the process table` });
  if (!isAlive(root)) return vanished(s, { check: "root-alive", result: "mismatch", detail: `pid ${lease.rootPid} is a zombie` });
  push("root-alive", "match");

  if (lease.rootStartTime === undefined) push("start-time", "unknown", "not recorded");
  else if (!sameProcess(root, { pid: lease.rootPid, startTime: lease.rootStartTime })) {
    // Coarse identity (ps: epoch seconds) cannot tell a reused pid from a
    // lease recorded in another unit (clock ticks by native or procfs): a
    // difference proves nothing, so it is unknown and nothing is settled on it.
    if (facts.identityStrength !== "exact") {
      return finishWith(s, "unknown", { check: "start-time", result: "unknown", detail: `pid ${lease.rootPid} reads ${root.startTime} on the ${facts.backend} backend, the lease says ${lease.rootStartTime}: coarse identity cannot compare them (another unit, or a reused pid)` });
    }
    // pid reused: not ours, and not a reason to look for anything else either
    return finishWith(s, "mismatch", { check: "start-time", result: "mismatch", detail: `pid ${lease.rootPid} started at ${root.startTime}, lease says ${lease.rootStartTime} (pid reused)` });
  } else push("start-time", "match");

  const d = await inspectSafe(facts, lease.rootPid, MARKER_ENV_KEYS);
  if (d === undefined) return finishWith(s, "unknown", { check: "inspect", result: "unknown", detail: "the root could not be inspected" });
  if (d === null) return vanished(s, { check: "root-alive", result: "mismatch", detail: `pid ${lease.rootPid} exited during verification` });
  if (!sameProcess(d, root)) {
    return finishWith(s, "mismatch", { check: "start-time", result: "mismatch", detail: "pid reused during verification" });
  }
  if (!isAlive(d)) return vanished(s, { check: "root-alive", result: "mismatch", detail: `pid ${lease.rootPid} became a zombie` });

  // Under exact identity, a start time that matched on the same boot and in
  // the same pid namespace IS the process we spawned: a command or executable
  // that differs now only says it exec'd another program since (`sh -c "exec
  // …"`, `bash -c "sleep 30"`, every PTY run's /bin/sh -c). That proves
  // nothing either way, so it is "unknown", never "mismatch". With coarse
  // identity (1 s) the start time alone proves nothing: a difference stays one.
  const same = facts.identityStrength === "exact" && ["start-time", "boot-id", "pid-namespace"].every((c) => ev.some((e) => e.check === c && e.result === "match"));
  const execd = (e: OwnershipEvidence): OwnershipEvidence =>
    same && e.result === "mismatch" ? { check: e.check, result: "unknown", detail: `${EXECD} (${e.detail ?? "differs"})` } : e;

  const wrapperEv = await wrapperPathEvidence(lease, d, paths);
  // a wrapperPath outside its wrapperRoot is the record's own fault, not an exec
  ev.push(wrapperEv.detail?.startsWith("neither") ? execd(wrapperEv) : wrapperEv);

  // the one marker rule (markers.ts): lease id AND gateway instance id
  const markers = markerVerdict(d, lease);
  if (markers === "match") push("lease-env", "match", "the root carries this lease id and gateway instance id");
  else if (markers === "mismatch") push("lease-env", "mismatch", "the root's environment does not carry this lease id and this gateway instance id");
  else push("lease-env", "unknown", "environment not readable");

  if (d.argv === null || d.argv.length === 0) push("command-hash", "unknown", "argv not readable");
  else if (lease.commandHash === "") push("command-hash", "unknown", "not recorded");
  else if (computeCommandHash(d.argv) === lease.commandHash) push("command-hash", "match");
  else ev.push(execd({ check: "command-hash", result: "mismatch", detail: "the argv's hash differs from the lease's" }));

  if (ev.some((e) => e.result === "mismatch")) return finishWith(s, "mismatch");
  s.root = root;
  s.details = d;
}

async function wrapperPathEvidence(lease: AcpxProcessLease, d: ProcessDetails, paths: PathCache): Promise<OwnershipEvidence> {
  const check = "wrapper-path";
  if (!isAbsolute(lease.wrapperRoot) || !isAbsolute(lease.wrapperPath)) {
    return { check, result: "unknown", detail: "lease has no absolute wrapperRoot/wrapperPath" };
  }
  const root = await paths.real(lease.wrapperRoot);
  const wrapper = await paths.real(lease.wrapperPath);
  if (!isUnder(wrapper, root)) return { check, result: "mismatch", detail: "the lease's wrapperPath is not under its wrapperRoot" };
  const arg1 = d.argv?.[1];
  if (arg1 !== undefined && isAbsolute(arg1) && (await paths.real(arg1)) === wrapper) {
    return { check, result: "match", detail: "argv[1] is the leased wrapper" };
  }
  const exe = d.exePath;
  const deleted = exe !== null && exe.endsWith(" (deleted)");
  if (exe !== null && !deleted && isUnder(await paths.real(exe), root)) return { check, result: "match", detail: "executable is under wrapperRoot" };
  if (d.argv === null && exe === null) return { check, result: "unknown", detail: "argv and exe not readable" };
  return { check, result: "mismatch", detail: deleted ? "neither argv[1] nor the (deleted) executable is the leased wrapper" : "neither argv[1] nor the executable is the leased wrapper" };
}

/**
 * The recorded process group is "as recorded" when the root is in it, or its
 * leader is a child of the root (the adapter group a wrapper creates). When
 * the leader is gone but members remain (the adapter exited, a grandchild
 * stayed), the group counts only if one member is tied to the lease by parent
 * links or by its env marker; otherwise it is unknown and not collected.
 */
function groupEvidence(s: State, snapshot: ProcessSnapshot, root: ProcessInfo, markerPids: readonly number[]): OwnershipEvidence {
  const check = "process-group";
  const pgid = s.lease.processGroupId;
  if (pgid === undefined) return { check, result: "unknown", detail: "no group recorded" };
  // fail closed: a group that cannot be told apart from ours is never collected
  if (isOwnProcessGroup(pgid) !== false) return { check, result: "unknown", detail: "this process's own group is unknown, so the recorded group cannot be told apart from it" };
  if (root.pgid === pgid) {
    return pgid === root.pid
      ? { check, result: "match", detail: "the root leads the recorded group (implied by its pid: not counted beyond it)" }
      : { check, result: "match", detail: "root is in the recorded group" };
  }
  // the root led its own group when the lease was written: a leader that is a
  // session leader (a detached wrapper) can never leave its group
  if (pgid === root.pid) return { check, result: "mismatch", detail: `root led group ${pgid} when leased, now it is in ${root.pgid}` };
  const leader = snapshot.processes.get(pgid);
  if (leader && leader.pgid === pgid) {
    if (leader.ppid === root.pid) return { check, result: "match", detail: "the group leader is a child of the root" };
    return { check, result: "mismatch", detail: `group ${pgid} is led by a process that is not a child of the root` };
  }
  const members = snapshot.groupMembers(pgid);
  if (members.length === 0) return { check, result: "unknown", detail: `group ${pgid} no longer exists` };
  const tied = new Set<number>(markerPids);
  for (const p of collectTree(snapshot, root)) tied.add(p.pid);
  if (members.some((m) => tied.has(m.pid))) return { check, result: "match", detail: "a member of the recorded group is tied to the lease" };
  return { check, result: "unknown", detail: `group ${pgid} has members not tied to the root; not collected` };
}

function decide(s: State, snapshot: ProcessSnapshot, markerPids: readonly number[], facts: ProcessFacts): void {
  const root = s.root!;
  const group = groupEvidence(s, snapshot, root, markerPids);
  s.evidence.push(group);
  if (group.result === "mismatch") return finishWith(s, "mismatch");
  s.evidence.push(
    markerPids.length > 0
      ? { check: "env-marker", result: "match", detail: `${markerPids.length} process(es) outside the parent links carry this lease id and gateway instance id` }
      : { check: "env-marker", result: "unknown", detail: facts.backend === "ps" ? "environments not readable on the ps backend" : "no escapee carries this lease id and gateway instance id" },
  );
  const matched = (c: string) => s.evidence.some((e) => e.check === c && e.result === "match");
  // a recorded group equal to the root's pid is implied by the pid: any
  // impostor leading its own group matches it, so it proves nothing more
  const groupImplied = s.lease.processGroupId === root.pid;
  const counts = (e: OwnershipEvidence) => CORROBORATING.has(e.check) && !(e.check === "process-group" && groupImplied);
  const corroborating = (except: string) => s.evidence.some((e) => e.result === "match" && counts(e) && e.check !== except);
  const coarse = facts.identityStrength !== "exact";
  let enough: boolean;
  if (matched("start-time")) enough = !coarse || corroborating("start-time");
  else enough = matched("lease-env") && corroborating("lease-env");
  if (!enough) {
    const why = matched("start-time")
      ? "start time matches but identity is coarse (1 s resolution) and nothing else matched"
      : "no start time match and no lease id + one more positive check";
    return finishWith(s, "unknown", { check: "sufficiency", result: "unknown", detail: why });
  }
  const members = collectTree(snapshot, root, group.result === "match" ? { pgid: s.lease.processGroupId!, markerPids } : { markerPids });
  s.verdict = "owned";
  s.tree = { lease: s.lease, root, members, evidence: s.evidence };
  if (group.result === "match") s.tree.group = s.lease.processGroupId!;
}

/**
 * One pass of env reads shared by every lease in the batch: returns the
 * marker pids of the alive leases, and fills in `remnants` (plus evidence)
 * of every seeker (a lease whose root is gone).
 */
async function scanEnvironments(
  alive: State[],
  seekers: State[],
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  host: ProcessDetails | null,
  opts: VerifyOptions | undefined,
): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  const byId = new Map(alive.map((s) => [s.lease.leaseId, s]));

  // remnant seekers: who can be searched at all, and from which start time on
  const ctx: RemnantContext = {
    facts,
    myUid: typeof process.getuid === "function" ? process.getuid() : null,
    hostBootId: host?.bootId,
    hostPidNamespace: host?.pidNamespace,
    ancestors: ancestorsOfSelf(snapshot),
    clock: null,
  };
  const tallies = new Map<string, { s: State; tally: RemnantTally }>();
  for (const s of seekers) {
    const blocked = remnantSearchBlocked(s.lease, ctx);
    if (blocked !== null) {
      s.evidence.push(...remnantEvidence(null, null, blocked));
      s.remnants = null;
      s.remnantOutcome = "inconclusive";
    } else tallies.set(s.lease.leaseId, { s, tally: new RemnantTally() });
  }
  if (tallies.size > 0) ctx.clock = opts?.startClock !== undefined ? opts.startClock : await readStartClock().catch(() => null);
  const remnantBound = Math.min(...[...tallies.values()].map(({ s }) => remnantStartBound(s.lease, ctx)));

  const markersWanted = alive.length > 0 && facts.backend !== "ps";
  if (!markersWanted && tallies.size === 0) return out;

  const uids = new Set(alive.map((s) => s.root!.uid));
  const inTree = new Set<number>();
  for (const s of alive) for (const p of collectTree(snapshot, s.root!)) inTree.add(p.pid);
  const starts = alive.map((s) => Number(s.root!.startTime));
  const comparable = starts.every((n) => Number.isFinite(n));
  const oldest = comparable ? Math.min(...starts) : -Infinity;
  const candidates: ProcessInfo[] = [];
  for (const p of snapshot.processes.values()) {
    // dead records, zombies and kernel threads carry nobody's markers
    if (inTree.has(p.pid) || !isAlive(p) || isKernelThread(p) || !checkSignalTarget(p.pid).allowed) continue;
    const forMarkers = markersWanted && uids.has(p.uid) && !(comparable && !(Number(p.startTime) >= oldest));
    const forRemnants = tallies.size > 0 && p.uid === ctx.myUid && !ctx.ancestors.has(p.pid) && !(Number(p.startTime) < remnantBound);
    if (forMarkers || forRemnants) candidates.push(p);
  }
  const details = await mapLimit(candidates, MARKER_CONCURRENCY, (p) => inspectSafe(facts, p.pid, MARKER_ENV_KEYS));
  // A busy host has same-uid processes exiting or exec'ing at the very moment
  // their environment is read; such a read fails without saying anything
  // about our lease. Each failed read gets ONE more try: a process gone or a
  // zombie by then is gone; only one that stays unreadable keeps a search open.
  // An empty argv from a user-space process means it is inside execve (its new
  // memory has no argument or environment area yet, so markers it carries read
  // as absent): a process a TERM trap forks during the teardown is often caught
  // there. Both kinds are read again after a pause long enough for an exec.
  const retry = candidates
    .map((_, i) => i)
    .filter((i) => tallies.size > 0 && (details[i] === undefined || details[i]?.envReadable === false || details[i]?.argv?.length === 0));
  if (retry.length > 0) {
    await new Promise((r) => setTimeout(r, EXEC_SETTLE_MS));
    const again = await mapLimit(retry, MARKER_CONCURRENCY, (i) => inspectSafe(facts, candidates[i]!.pid, MARKER_ENV_KEYS));
    retry.forEach((i, k) => {
      details[i] = again[k];
    });
  }
  candidates.forEach((p, i) => {
    const d = details[i];
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
      // cannot say "nothing is left" (fail closed: unknown is never "none").
      for (const { s, tally } of tallies.values()) {
        if (!couldCarry(s.lease, p, ctx)) continue;
        tally.add(p, d === undefined ? { ok: false, why: "inspect-failed" } : judgeCarrier(s.lease, p, d, ctx), d?.argv?.[0]);
      }
      return;
    }
    // the lease id only indexes the batch; markerVerdict (in judgeCarrier, and below) decides
    const id = d.env?.[LEASE_ENV_KEY];
    if (typeof id !== "string") return;
    const seeker = tallies.get(id);
    if (seeker) return seeker.tally.add(p, judgeCarrier(seeker.s.lease, p, d, ctx), d.argv?.[0]);
    if (!markersWanted) return;
    const s = byId.get(id);
    if (!s || s.root!.uid !== p.uid || markerVerdict(d, s.lease) !== "match") return;
    if (comparable && Number(p.startTime) < Number(s.root!.startTime)) return;
    const list = out.get(id);
    if (list) list.push(p.pid);
    else out.set(id, [p.pid]);
  });

  for (const { s, tally } of tallies.values()) {
    const target = buildRemnantTarget(snapshot, tally);
    s.evidence.push(...remnantEvidence(tally, target, null));
    s.remnants = target;
    // only a refusal that could not judge the process keeps the search open (remnants.ts UNCLEARED):
    // a readable environment with other markers, another uid or an earlier start proves it is not ours
    s.remnantsUncleared = tally.uncleared();
    s.remnantOutcome = target !== null ? "found" : s.remnantsUncleared > 0 ? "inconclusive" : "none-found";
  }
  return out;
}

/** undefined = the facts layer failed (unknown); null = no such process. */
async function inspectSafe(facts: ProcessFacts, pid: number, envKeys: readonly string[]): Promise<ProcessDetails | null | undefined> {
  try {
    return await facts.inspect(pid, envKeys.length > 0 ? { envKeys } : undefined);
  } catch {
    return undefined;
  }
}

class PathCache {
  private readonly cache = new Map<string, Promise<string>>();
  /** realpath when the path exists here, else the normalised path (a live argv may name a file we cannot see) */
  real(p: string): Promise<string> {
    let hit = this.cache.get(p);
    if (!hit) {
      hit = realpath(p).catch(() => resolve(p));
      this.cache.set(p, hit);
    }
    return hit;
  }
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
