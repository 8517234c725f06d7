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
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { collectTree, treeContext, type TreeContext } from "./collect.js";
import { isOwnProcessGroup, signalTargetGuard } from "../../facts/guards.js";
import { parseLeaseRecord } from "../leases/lease-record.js";
import { MARKER_ENV_KEYS } from "./markers.js";
import type {
  EvidenceCheck,
  EvidenceCode,
  OwnedProcessTree,
  OwnershipEvidence,
  ProcessLease,
} from "../leases/types.js";
import { CommandHashes, DetailsBatch, PathCache } from "./verify-cache.js";
import { scanEnvironments } from "./verify-env.js";
import { Turns } from "../../facts/turns.js";
import { evidence, rootRows } from "./evidence.js";
import { done, finish, finishWith, type LeaseVerification, type State, type VerifyOptions } from "./verify-state.js";
import { checkRoot, pathsToResolve, type RootCaches } from "./verify-root.js";

export type { LeaseVerdict, LeaseVerification, VerifyOptions } from "./verify-state.js";

/**
 * Checks whose match identifies the root beyond its pid (used for the
 * sufficiency rule). "process-group" counts only when the recorded group is
 * not the root's own pid (see decide).
 */
const CORROBORATING: ReadonlySet<EvidenceCheck> = new Set<EvidenceCheck>([
  "wrapper-path",
  "command-hash",
  "process-group",
  "lease-env",
]);

export async function explainLease(
  lease: ProcessLease,
  facts: ProcessFacts,
  opts?: VerifyOptions,
): Promise<LeaseVerification> {
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
      return done(raw, "unknown", [
        evidence("lease-record", "unknown", "invalid-record", `not a valid lease: ${parsed.reason}`),
      ]);
    }
    return { lease: parsed.lease, evidence: [], verdict: null, root: null, details: null };
  });
  const pending = () => states.filter((s) => s.verdict === null);
  if (pending().length === 0) return states.map(finish);
  const read = await readRoots(pending(), facts, opts, turns);
  if (read === null) return states.map(finish);
  const { snapshot, host, caches } = read;

  // phase 1: the root of each lease, checked on its own (verify-root.ts)
  for (const s of pending()) {
    checkRoot(s, facts, snapshot, host, caches, opts?.gatewayInstanceId);
    if (turns.due()) await turns.yield();
  }

  // phase 2: one env pass: markers of every lease whose root checked out so
  // far, and remnants of every lease whose root is gone
  const tree = treeContext(snapshot);
  const alive = pending().filter((s) => s.root !== null);
  const seekers = states.filter((s) => s.remnantSearch === true);
  const markers = await scanEnvironments({
    alive,
    seekers,
    facts,
    snapshot,
    host,
    batch: caches.batch,
    tree,
    turns,
    startClock: opts?.startClock,
  });

  // phase 3: process group, sufficiency, tree
  for (const s of alive) {
    decide(s, snapshot, markers.get(s.lease.leaseId) ?? [], facts, tree);
    if (turns.due()) await turns.yield();
  }
  for (const s of pending())
    finishWith(
      s,
      "unknown",
      evidence("sufficiency", "unknown", "verification-incomplete", "verification did not complete"),
    );
  return states.map(finish);
}

/**
 * The snapshot and every pending root's details, read at the same time: the
 * root pids come from the leases, so neither read waits for the other. Then
 * the paths the wrapper checks compare. null when nothing can be verified
 * (a backend with no identity, an unreadable process list): every pending
 * lease is then finished "unknown".
 */
async function readRoots(
  pending: readonly State[],
  facts: ProcessFacts,
  opts: VerifyOptions | undefined,
  turns: Turns,
): Promise<{ snapshot: ProcessSnapshot; host: ProcessDetails | null; caches: RootCaches } | null> {
  const unavailable = (s: State, e: OwnershipEvidence) => {
    s.factsUnavailable = true;
    finishWith(s, "unknown", e);
  };
  if (facts.identityStrength === "none") {
    for (const s of pending) unavailable(s, rootRows.backendVerifiesNothing(facts.backend));
    return null;
  }
  const batch = new DetailsBatch(facts, MARKER_ENV_KEYS);
  const paths = new PathCache();
  const guard = signalTargetGuard();
  const roots = (await turns.map(pending, (s) => s.lease.rootPid)).filter((pid) => pid > 0 && guard(pid).allowed);
  const leasePaths = (await turns.map(pending, (s) => pathsToResolve(s.lease, undefined))).flat();
  let snapshot: ProcessSnapshot;
  try {
    // the leases' own paths are resolved meanwhile; the roots' argv and exe paths, known after the batch, are mostly the same ones
    [snapshot] = await Promise.all([
      opts?.snapshot ?? facts.snapshot(),
      batch.fetch([process.pid, ...roots]),
      paths.load(leasePaths),
    ]);
  } catch (e) {
    for (const s of pending) unavailable(s, rootRows.processListUnavailable(e));
    return null;
  }
  const host = batch.get(process.pid) ?? null;
  const caches: RootCaches = { batch, paths, hashes: new CommandHashes(), guard };
  await caches.paths.load(
    (await turns.map(pending, (s) => pathsToResolve(s.lease, batch.get(s.lease.rootPid)))).flat(),
  );
  return { snapshot, host, caches };
}

/**
 * The recorded process group is "as recorded" when the root is in it, or its
 * leader is a child of the root (the adapter group a wrapper creates). When
 * the leader is gone but members remain (the adapter exited, a grandchild
 * stayed), the group counts only if one member is tied to the lease by parent
 * links or by its env marker; otherwise it is unknown and not collected.
 */
function groupEvidence(
  s: State,
  snapshot: ProcessSnapshot,
  root: ProcessInfo,
  markerPids: readonly number[],
  tree: TreeContext,
): OwnershipEvidence {
  const ev = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) =>
    evidence("process-group", result, code, detail);
  const pgid = s.lease.processGroupId;
  if (pgid === undefined) return ev("unknown", "not-recorded", "no group recorded");
  // fail closed: a group that cannot be told apart from ours is never collected
  if (isOwnProcessGroup(pgid) !== false)
    return ev(
      "unknown",
      "own-group-unknown",
      "this process's own group is unknown, so the recorded group cannot be told apart from it",
    );
  if (root.pgid === pgid) {
    return pgid === root.pid
      ? ev("match", "root-leads-group", "the root leads the recorded group (implied by its pid: not counted beyond it)")
      : ev("match", "root-in-group", "root is in the recorded group");
  }
  // the root led its own group when the lease was written: a leader that is a
  // session leader (a detached wrapper) can never leave its group
  if (pgid === root.pid)
    return ev("mismatch", "root-left-group", `root led group ${pgid} when leased, now it is in ${root.pgid}`);
  const leader = snapshot.processes.get(pgid);
  if (leader && leader.pgid === pgid) {
    if (leader.ppid === root.pid) return ev("match", "leader-child-of-root", "the group leader is a child of the root");
    return ev("mismatch", "leader-not-child", `group ${pgid} is led by a process that is not a child of the root`);
  }
  const members = snapshot.groupMembers(pgid);
  if (members.length === 0) return ev("unknown", "group-gone", `group ${pgid} no longer exists`);
  const tied = new Set<number>(markerPids);
  for (const p of collectTree(snapshot, root, { context: tree })) tied.add(p.pid);
  if (members.some((m) => tied.has(m.pid)))
    return ev("match", "member-tied", "a member of the recorded group is tied to the lease");
  return ev("unknown", "members-untied", `group ${pgid} has members not tied to the root; not collected`);
}

function decide(
  s: State,
  snapshot: ProcessSnapshot,
  markerPids: readonly number[],
  facts: ProcessFacts,
  tree: TreeContext,
): void {
  const root = s.root!;
  const group = groupEvidence(s, snapshot, root, markerPids, tree);
  s.evidence.push(group);
  if (group.result === "mismatch") return finishWith(s, "mismatch");
  s.evidence.push(
    markerPids.length > 0
      ? evidence(
          "env-marker",
          "match",
          "escapees-found",
          `${markerPids.length} process(es) outside the parent links carry this lease id and gateway instance id`,
        )
      : facts.backend === "ps"
        ? evidence("env-marker", "unknown", "not-readable", "environments not readable on the ps backend")
        : evidence("env-marker", "unknown", "none-found", "no escapee carries this lease id and gateway instance id"),
  );
  const matched = (c: EvidenceCheck) => s.evidence.some((e) => e.check === c && e.result === "match");
  // a recorded group equal to the root's pid is implied by the pid: any
  // impostor leading its own group matches it, so it proves nothing more
  const counts = (e: OwnershipEvidence) => CORROBORATING.has(e.check) && e.code !== "root-leads-group";
  const corroborating = (except: EvidenceCheck) =>
    s.evidence.some((e) => e.result === "match" && counts(e) && e.check !== except);
  const coarse = facts.identityStrength !== "exact";
  let enough: boolean;
  if (matched("start-time")) enough = !coarse || corroborating("start-time");
  else enough = matched("lease-env") && corroborating("lease-env");
  if (!enough) {
    return finishWith(
      s,
      "unknown",
      matched("start-time")
        ? evidence(
            "sufficiency",
            "unknown",
            "coarse-identity-alone",
            "start time matches but identity is coarse (1 s resolution) and nothing else matched",
          )
        : evidence(
            "sufficiency",
            "unknown",
            "not-enough-checks",
            "no start time match and no lease id + one more positive check",
          ),
    );
  }
  const members = collectTree(
    snapshot,
    root,
    group.result === "match"
      ? { pgid: s.lease.processGroupId!, markerPids, context: tree }
      : { markerPids, context: tree },
  );
  s.verdict = "owned";
  s.tree = { lease: s.lease, root, members, evidence: s.evidence };
  if (group.result === "match") s.tree.group = s.lease.processGroupId!;
}
