/**
 * Live verification of leases: does the process the lease names still exist,
 * and is it provably the one we spawned? Fail closed: any mismatch → no tree;
 * nothing but "unknown" → no tree.
 *
 * Cost model (why verifyLeases exists): one snapshot, read while one batch
 * (facts.inspectMany) reads this process and every lease's root; then ONE
 * batch of env reads over marker candidates shared by all the leases
 * (verify-env.ts). Marker candidates are
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
import { isAbsolute } from "node:path";
import { isAlive } from "../../facts/liveness.js";
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { collectTree, treeContext, type TreeContext } from "./collect.js";
import { isOwnProcessGroup, signalTargetGuard, type GuardVerdict } from "../../facts/guards.js";
import { parseLeaseRecord } from "../leases/lease-record.js";
import { MARKER_ENV_KEYS, markerVerdict } from "./markers.js";
import type { EvidenceCheck, EvidenceCode, OwnedProcessTree, OwnershipEvidence, ProcessLease } from "../leases/types.js";
import { sameProcess } from "../../facts/identity.js";
import { CommandHashes, DetailsBatch, PathCache } from "./verify-cache.js";
import { scanEnvironments } from "./verify-env.js";
import { Turns } from "../../facts/turns.js";
import { evidence, rootRows } from "./evidence.js";
import { done, finish, finishWith, vanished, type LeaseVerdict, type LeaseVerification, type State, type VerifyOptions } from "./verify-state.js";

export type { LeaseVerdict, LeaseVerification, VerifyOptions } from "./verify-state.js";

/**
 * Checks whose match identifies the root beyond its pid (used for the
 * sufficiency rule). "process-group" counts only when the recorded group is
 * not the root's own pid (see decide).
 */
const CORROBORATING: ReadonlySet<EvidenceCheck> = new Set<EvidenceCheck>(["wrapper-path", "command-hash", "process-group", "lease-env"]);
const EXECD = "the root exec'd another program since spawn (same start time): the command no longer identifies it";

export async function explainLease(lease: ProcessLease, facts: ProcessFacts, opts?: VerifyOptions): Promise<LeaseVerification> {
  const [v] = await verifyLeases([lease], facts, opts);
  return v!;
}

export async function verifyOwnedTree(
  lease: ProcessLease,
  facts: ProcessFacts,
  opts?: { snapshot?: ProcessSnapshot; gatewayInstanceId?: string },
): Promise<OwnedProcessTree | null> {
  return (await explainLease(lease, facts, opts)).tree;
}

/** Verifies many leases against ONE snapshot and one shared env-marker pass. Never throws for bad leases or facts. */
export async function verifyLeases(
  leases: readonly ProcessLease[],
  facts: ProcessFacts,
  opts?: VerifyOptions,
): Promise<LeaseVerification[]> {
  // every pass over the leases gives the event loop its turns: a thousand of them are milliseconds of work
  const turns = new Turns();
  const states = await turns.map(leases, (raw): State => {
    const parsed = parseLeaseRecord(raw, false);
    if (!parsed.ok) {
      return done(raw, "unknown", [evidence("lease-record", "unknown", "invalid-record", `not a valid lease: ${parsed.reason}`)]);
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
      finishWith(s, "unknown", rootRows.backendVerifiesNothing(facts.backend));
    }
    return states.map(finish);
  }
  // The snapshot and every root's details are read at the same time: the
  // root pids come from the leases, so neither read waits for the other.
  const batch = new DetailsBatch(facts, MARKER_ENV_KEYS);
  const paths = new PathCache();
  const guard = signalTargetGuard();
  const roots = (await turns.map(pending(), (s) => s.lease.rootPid)).filter((pid) => pid > 0 && guard(pid).allowed);
  const leasePaths = (await turns.map(pending(), (s) => pathsToResolve(s.lease, undefined))).flat();
  let snapshot: ProcessSnapshot;
  try {
    // the leases' own paths are resolved meanwhile; the roots' argv and exe paths, known after the batch, are mostly the same ones
    [snapshot] = await Promise.all([opts?.snapshot ?? facts.snapshot(), batch.fetch([process.pid, ...roots]), paths.load(leasePaths)]);
  } catch (e) {
    for (const s of pending()) {
      unavailable(s);
      finishWith(s, "unknown", rootRows.processListUnavailable(e));
    }
    return states.map(finish);
  }
  const host = batch.get(process.pid) ?? null;
  const caches: RootCaches = { batch, paths, hashes: new CommandHashes(), guard };
  await caches.paths.load((await turns.map(pending(), (s) => pathsToResolve(s.lease, batch.get(s.lease.rootPid)))).flat());

  // phase 1: the root of each lease, checked on its own
  for (const s of pending()) {
    checkRoot(s, facts, snapshot, host, caches, opts?.gatewayInstanceId);
    if (turns.due()) await turns.yield();
  }

  // phase 2: one env pass: markers of every lease whose root checked out so
  // far, and remnants of every lease whose root is gone
  const tree = treeContext(snapshot);
  const alive = pending().filter((s) => s.root !== null);
  const seekers = states.filter((s) => s.remnantSearch === true);
  const markers = await scanEnvironments({ alive, seekers, facts, snapshot, host, batch, tree, turns, startClock: opts?.startClock });

  // phase 3: process group, sufficiency, tree
  for (const s of alive) {
    decide(s, snapshot, markers.get(s.lease.leaseId) ?? [], facts, tree);
    if (turns.due()) await turns.yield();
  }
  for (const s of pending()) finishWith(s, "unknown", evidence("sufficiency", "unknown", "verification-incomplete", "verification did not complete"));
  return states.map(finish);
}

/** The paths a lease's wrapper check compares, resolved before the checks run. */
function pathsToResolve(lease: ProcessLease, d: ProcessDetails | null | undefined): string[] {
  const out = [lease.wrapperRoot, lease.wrapperPath].filter((p) => typeof p === "string" && isAbsolute(p));
  const arg1 = d?.argv?.[1];
  if (arg1 !== undefined && isAbsolute(arg1)) out.push(arg1);
  if (d?.exePath && !d.exePath.endsWith(" (deleted)")) out.push(d.exePath);
  return out;
}

/** What every root check of one verification shares. */
interface RootCaches {
  batch: DetailsBatch;
  paths: PathCache;
  hashes: CommandHashes;
  guard: (pid: number) => GuardVerdict;
}

/**
 * Where the lease was written against where this gateway is: its instance,
 * the guards on its root pid and group, the boot and the pid namespace.
 * false when that already decided the verdict (finished on `s`).
 */
function checkPlace(s: State, host: ProcessDetails | null, targetGuard: (pid: number) => GuardVerdict, gatewayInstanceId: string | undefined): boolean {
  const { lease } = s;
  const push = (check: EvidenceCheck, result: OwnershipEvidence["result"], code: EvidenceCode, detail?: string) => s.evidence.push(evidence(check, result, code, detail));
  const decided = (verdict: LeaseVerdict, e?: OwnershipEvidence): false => {
    finishWith(s, verdict, e);
    return false;
  };
  if (gatewayInstanceId !== undefined) {
    if (lease.gatewayInstanceId !== gatewayInstanceId) {
      return decided("mismatch", evidence("instance", "mismatch", "other-instance", `lease belongs to gateway ${lease.gatewayInstanceId}, not ${gatewayInstanceId}`));
    }
    push("instance", "match", "same-instance");
  }
  const guard = lease.rootPid === 0 ? { allowed: true as const } : targetGuard(lease.rootPid);
  if (!guard.allowed) return decided("mismatch", evidence("root-pid", "mismatch", "refused-by-guard", `refused by guard: ${guard.reason}`));
  if (lease.processGroupId !== undefined && isOwnProcessGroup(lease.processGroupId) === true) {
    return decided("mismatch", evidence("process-group", "mismatch", "own-group", `recorded group ${lease.processGroupId} is this process's own group, or led by this process or its parent`));
  }

  // a reboot since the lease was written means the recorded process cannot be alive
  const hostBoot = host?.bootId;
  if (lease.bootId === undefined || hostBoot === undefined) push("boot-id", "unknown", lease.bootId === undefined ? "not-recorded" : "not-readable", lease.bootId === undefined ? "not recorded" : "not readable");
  else if (lease.bootId !== hostBoot) {
    // nothing started on an earlier boot is alive: there is nothing to search for
    s.remnantOutcome = "none-found";
    return decided("gone", evidence("boot-id", "mismatch", "rebooted", "host rebooted since the lease was written"));
  }
  else push("boot-id", "match", "same-boot");

  // the observer's namespace (see the header): another one means the pid numbers name other processes here
  const hostNs = host?.pidNamespace;
  if (lease.pidNamespace === undefined || hostNs === undefined) {
    push("pid-namespace", "unknown", lease.pidNamespace === undefined ? "not-recorded" : "not-readable", lease.pidNamespace === undefined ? "not recorded" : "this gateway's pid namespace is not readable");
  }
  else if (lease.pidNamespace !== hostNs) {
    return decided("mismatch", evidence("pid-namespace", "mismatch", "other-namespace", `this gateway now sees pid namespace ${hostNs}, the lease was written while it saw ${lease.pidNamespace}: its pids name other processes here`));
  } else push("pid-namespace", "match", "same-namespace", "this gateway still sees the pid namespace it saw at spawn");
  return true;
}

function checkRoot(
  s: State,
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  host: ProcessDetails | null,
  { batch, paths, hashes, guard: targetGuard }: RootCaches,
  gatewayInstanceId: string | undefined,
): void {
  const { lease, evidence: ev } = s;
  const push = (check: EvidenceCheck, result: OwnershipEvidence["result"], code: EvidenceCode, detail?: string) => ev.push(evidence(check, result, code, detail));

  if (!checkPlace(s, host, targetGuard, gatewayInstanceId)) return;

  // A lease with no pid: its writer died between the lease write and the
  // wrapper's report (a live writer's pending spawn is never verified: leases
  // in flight are skipped, and one gateway holds the state dir).
  // Its root is as gone as a dead one; what it started is found by markers.
  if (lease.rootPid === 0) return vanished(s, evidence("root-pid", "mismatch", "no-pid-recorded", "no root pid recorded: the spawn never reported one and its gateway is gone; searching by markers"));
  const root = snapshot.processes.get(lease.rootPid);
  if (!root) return vanished(s, rootRows.absent(lease.rootPid));
  if (!isAlive(root)) return vanished(s, rootRows.zombie(lease.rootPid));
  push("root-alive", "match", "alive");

  if (lease.rootStartTime === undefined) push("start-time", "unknown", "not-recorded", "not recorded");
  else if (!sameProcess(root, { pid: lease.rootPid, startTime: lease.rootStartTime })) {
    // Coarse identity (ps: epoch seconds) cannot tell a reused pid from a
    // lease recorded in another unit (clock ticks by native or procfs): a
    // difference proves nothing, so it is unknown and nothing is settled on it.
    if (facts.identityStrength !== "exact") {
      return finishWith(s, "unknown", evidence("start-time", "unknown", "coarse-cannot-compare", `pid ${lease.rootPid} reads ${root.startTime} on the ${facts.backend} backend, the lease says ${lease.rootStartTime}: coarse identity cannot compare them (another unit, or a reused pid)`));
    }
    // pid reused: not ours, and not a reason to look for anything else either
    return finishWith(s, "mismatch", evidence("start-time", "mismatch", "pid-reused", `pid ${lease.rootPid} started at ${root.startTime}, lease says ${lease.rootStartTime} (pid reused)`));
  } else push("start-time", "match", "same-start");

  const d = batch.get(lease.rootPid);
  if (d === undefined) return finishWith(s, "unknown", rootRows.inspectFailed());
  if (d === null) return vanished(s, rootRows.exitedDuringVerification(lease.rootPid));
  if (!sameProcess(d, root)) return finishWith(s, "mismatch", rootRows.reusedDuringVerification());
  if (!isAlive(d)) return vanished(s, evidence("root-alive", "mismatch", "became-zombie", `pid ${lease.rootPid} became a zombie`));

  // Under exact identity, a start time that matched on the same boot and in
  // the same pid namespace IS the process we spawned: a command or executable
  // that differs now only says it exec'd another program since (`sh -c "exec
  // …"`, `bash -c "sleep 30"`, every PTY run's /bin/sh -c). That proves
  // nothing either way, so it is "unknown", never "mismatch". With coarse
  // identity (1 s) the start time alone proves nothing: a difference stays one.
  const same = facts.identityStrength === "exact" && ["start-time", "boot-id", "pid-namespace"].every((c) => ev.some((e) => e.check === c && e.result === "match"));
  const execd = (e: OwnershipEvidence): OwnershipEvidence =>
    same && e.result === "mismatch" ? evidence(e.check, "unknown", "exec-since-spawn", `${EXECD} (${e.detail ?? "differs"})`) : e;

  const wrapperEv = wrapperPathEvidence(lease, d, paths);
  // a wrapperPath outside its wrapperRoot is the record's own fault, not an exec
  ev.push(wrapperEv.code === "not-the-wrapper" ? execd(wrapperEv) : wrapperEv);

  // the one marker rule (markers.ts): lease id AND gateway instance id
  const markers = markerVerdict(d, lease);
  if (markers === "match") push("lease-env", "match", "markers-match", "the root carries this lease id and gateway instance id");
  else if (markers === "mismatch") push("lease-env", "mismatch", "markers-differ", "the root's environment does not carry this lease id and this gateway instance id");
  else push("lease-env", "unknown", "not-readable", "environment not readable");

  if (d.argv === null || d.argv.length === 0) push("command-hash", "unknown", "not-readable", "argv not readable");
  else if (lease.commandHash === "") push("command-hash", "unknown", "not-recorded", "not recorded");
  else if (hashes.of(d.argv) === lease.commandHash) push("command-hash", "match", "same-command");
  else ev.push(execd(evidence("command-hash", "mismatch", "command-differs", "the argv's hash differs from the lease's")));

  if (ev.some((e) => e.result === "mismatch")) return finishWith(s, "mismatch");
  s.root = root;
  s.details = d;
}

function wrapperPathEvidence(lease: ProcessLease, d: ProcessDetails, paths: PathCache): OwnershipEvidence {
  const ev = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) => evidence("wrapper-path", result, code, detail);
  if (!isAbsolute(lease.wrapperRoot) || !isAbsolute(lease.wrapperPath)) return ev("unknown", "no-wrapper-recorded", "lease has no absolute wrapperRoot/wrapperPath");
  const root = paths.get(lease.wrapperRoot);
  const wrapper = paths.get(lease.wrapperPath);
  if (!paths.under(wrapper, root)) return ev("mismatch", "wrapper-outside-root", "the lease's wrapperPath is not under its wrapperRoot");
  const arg1 = d.argv?.[1];
  if (arg1 !== undefined && isAbsolute(arg1) && paths.get(arg1) === wrapper) return ev("match", "argv1-is-wrapper", "argv[1] is the leased wrapper");
  const exe = d.exePath;
  const deleted = exe !== null && exe.endsWith(" (deleted)");
  if (exe !== null && !deleted && paths.under(paths.get(exe), root)) return ev("match", "exe-under-root", "executable is under wrapperRoot");
  if (d.argv === null && exe === null) return ev("unknown", "not-readable", "argv and exe not readable");
  return ev("mismatch", "not-the-wrapper", deleted ? "neither argv[1] nor the (deleted) executable is the leased wrapper" : "neither argv[1] nor the executable is the leased wrapper");
}

/**
 * The recorded process group is "as recorded" when the root is in it, or its
 * leader is a child of the root (the adapter group a wrapper creates). When
 * the leader is gone but members remain (the adapter exited, a grandchild
 * stayed), the group counts only if one member is tied to the lease by parent
 * links or by its env marker; otherwise it is unknown and not collected.
 */
function groupEvidence(s: State, snapshot: ProcessSnapshot, root: ProcessInfo, markerPids: readonly number[], tree: TreeContext): OwnershipEvidence {
  const ev = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) => evidence("process-group", result, code, detail);
  const pgid = s.lease.processGroupId;
  if (pgid === undefined) return ev("unknown", "not-recorded", "no group recorded");
  // fail closed: a group that cannot be told apart from ours is never collected
  if (isOwnProcessGroup(pgid) !== false) return ev("unknown", "own-group-unknown", "this process's own group is unknown, so the recorded group cannot be told apart from it");
  if (root.pgid === pgid) {
    return pgid === root.pid
      ? ev("match", "root-leads-group", "the root leads the recorded group (implied by its pid: not counted beyond it)")
      : ev("match", "root-in-group", "root is in the recorded group");
  }
  // the root led its own group when the lease was written: a leader that is a
  // session leader (a detached wrapper) can never leave its group
  if (pgid === root.pid) return ev("mismatch", "root-left-group", `root led group ${pgid} when leased, now it is in ${root.pgid}`);
  const leader = snapshot.processes.get(pgid);
  if (leader && leader.pgid === pgid) {
    if (leader.ppid === root.pid) return ev("match", "leader-child-of-root", "the group leader is a child of the root");
    return ev("mismatch", "leader-not-child", `group ${pgid} is led by a process that is not a child of the root`);
  }
  const members = snapshot.groupMembers(pgid);
  if (members.length === 0) return ev("unknown", "group-gone", `group ${pgid} no longer exists`);
  const tied = new Set<number>(markerPids);
  for (const p of collectTree(snapshot, root, { context: tree })) tied.add(p.pid);
  if (members.some((m) => tied.has(m.pid))) return ev("match", "member-tied", "a member of the recorded group is tied to the lease");
  return ev("unknown", "members-untied", `group ${pgid} has members not tied to the root; not collected`);
}

function decide(s: State, snapshot: ProcessSnapshot, markerPids: readonly number[], facts: ProcessFacts, tree: TreeContext): void {
  const root = s.root!;
  const group = groupEvidence(s, snapshot, root, markerPids, tree);
  s.evidence.push(group);
  if (group.result === "mismatch") return finishWith(s, "mismatch");
  s.evidence.push(
    markerPids.length > 0
      ? evidence("env-marker", "match", "escapees-found", `${markerPids.length} process(es) outside the parent links carry this lease id and gateway instance id`)
      : facts.backend === "ps"
        ? evidence("env-marker", "unknown", "not-readable", "environments not readable on the ps backend")
        : evidence("env-marker", "unknown", "none-found", "no escapee carries this lease id and gateway instance id"),
  );
  const matched = (c: EvidenceCheck) => s.evidence.some((e) => e.check === c && e.result === "match");
  // a recorded group equal to the root's pid is implied by the pid: any
  // impostor leading its own group matches it, so it proves nothing more
  const counts = (e: OwnershipEvidence) => CORROBORATING.has(e.check) && e.code !== "root-leads-group";
  const corroborating = (except: EvidenceCheck) => s.evidence.some((e) => e.result === "match" && counts(e) && e.check !== except);
  const coarse = facts.identityStrength !== "exact";
  let enough: boolean;
  if (matched("start-time")) enough = !coarse || corroborating("start-time");
  else enough = matched("lease-env") && corroborating("lease-env");
  if (!enough) {
    return finishWith(
      s,
      "unknown",
      matched("start-time")
        ? evidence("sufficiency", "unknown", "coarse-identity-alone", "start time matches but identity is coarse (1 s resolution) and nothing else matched")
        : evidence("sufficiency", "unknown", "not-enough-checks", "no start time match and no lease id + one more positive check"),
    );
  }
  const members = collectTree(snapshot, root, group.result === "match" ? { pgid: s.lease.processGroupId!, markerPids, context: tree } : { markerPids, context: tree });
  s.verdict = "owned";
  s.tree = { lease: s.lease, root, members, evidence: s.evidence };
  if (group.result === "match") s.tree.group = s.lease.processGroupId!;
}
