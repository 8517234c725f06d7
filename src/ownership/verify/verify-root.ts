/**
 * Phase 1 of a verification (verify.ts): the root of each lease, checked on
 * its own. First where the lease was written against where this gateway is
 * (instance, guards, boot, pid namespace), then who the root is (alive, its
 * start time, its details read in the batch), then what it runs (wrapper
 * path, env markers, command hash). Each step either finishes the lease's
 * verdict or lets the next one run.
 */
import { isAbsolute } from "node:path";
import { isAlive } from "../../facts/liveness.js";
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { isOwnProcessGroup, type GuardVerdict } from "../../facts/guards.js";
import { markerVerdict } from "./markers.js";
import type { EvidenceCheck, EvidenceCode, OwnershipEvidence, ProcessLease } from "../leases/types.js";
import { sameProcess } from "../../facts/identity.js";
import type { CommandHashes, DetailsBatch, PathCache } from "./verify-cache.js";
import { evidence, rootRows } from "./evidence.js";
import { finishWith, vanished, type LeaseVerdict, type State } from "./verify-state.js";

const EXECD = "the root exec'd another program since spawn (same start time): the command no longer identifies it";

/** What every root check of one verification shares. */
export interface RootCaches {
  batch: DetailsBatch;
  paths: PathCache;
  hashes: CommandHashes;
  guard: (pid: number) => GuardVerdict;
}

/** The paths a lease's wrapper check compares, resolved before the checks run. */
export function pathsToResolve(lease: ProcessLease, d: ProcessDetails | null | undefined): string[] {
  const out = [lease.wrapperRoot, lease.wrapperPath].filter((p) => typeof p === "string" && isAbsolute(p));
  const arg1 = d?.argv?.[1];
  if (arg1 !== undefined && isAbsolute(arg1)) out.push(arg1);
  if (d?.exePath && !d.exePath.endsWith(" (deleted)")) out.push(d.exePath);
  return out;
}

/** One row of evidence appended to the lease's list. */
const pushTo =
  (s: State) => (check: EvidenceCheck, result: OwnershipEvidence["result"], code: EvidenceCode, detail?: string) =>
    s.evidence.push(evidence(check, result, code, detail));

/** The lease's verdict, finished on `s`: null, for a check that decided it. */
function ended(s: State, verdict: LeaseVerdict, e?: OwnershipEvidence): null {
  finishWith(s, verdict, e);
  return null;
}

/** The root is gone (vanished: the remnant search follows): null, as ended. */
function gone(s: State, e: OwnershipEvidence): null {
  vanished(s, e);
  return null;
}

/**
 * Where the lease was written against where this gateway is: its instance,
 * the guards on its root pid and group, the boot and the pid namespace.
 * null when that already decided the verdict (finished on `s`).
 */
function checkPlace(
  s: State,
  host: ProcessDetails | null,
  targetGuard: (pid: number) => GuardVerdict,
  gatewayInstanceId: string | undefined,
): true | null {
  return checkOwnerAndGuards(s, targetGuard, gatewayInstanceId) && checkBoot(s, host) && checkNamespace(s, host);
}

/** The lease's gateway instance (when the caller names its own), and the guards on its root pid and its group. */
function checkOwnerAndGuards(
  s: State,
  targetGuard: (pid: number) => GuardVerdict,
  gatewayInstanceId: string | undefined,
): true | null {
  const { lease } = s;
  if (gatewayInstanceId !== undefined) {
    if (lease.gatewayInstanceId !== gatewayInstanceId) {
      return ended(
        s,
        "mismatch",
        evidence(
          "instance",
          "mismatch",
          "other-instance",
          `lease belongs to gateway ${lease.gatewayInstanceId}, not ${gatewayInstanceId}`,
        ),
      );
    }
    pushTo(s)("instance", "match", "same-instance");
  }
  const guard = lease.rootPid === 0 ? { allowed: true as const } : targetGuard(lease.rootPid);
  if (!guard.allowed)
    return ended(
      s,
      "mismatch",
      evidence("root-pid", "mismatch", "refused-by-guard", `refused by guard: ${guard.reason}`),
    );
  if (lease.processGroupId !== undefined && isOwnProcessGroup(lease.processGroupId) === true) {
    return ended(
      s,
      "mismatch",
      evidence(
        "process-group",
        "mismatch",
        "own-group",
        `recorded group ${lease.processGroupId} is this process's own group, or led by this process or its parent`,
      ),
    );
  }
  return true;
}

/** A reboot since the lease was written means the recorded process cannot be alive. */
function checkBoot(s: State, host: ProcessDetails | null): true | null {
  const { lease } = s;
  const push = pushTo(s);
  const hostBoot = host?.bootId;
  if (lease.bootId === undefined || hostBoot === undefined)
    push(
      "boot-id",
      "unknown",
      lease.bootId === undefined ? "not-recorded" : "not-readable",
      lease.bootId === undefined ? "not recorded" : "not readable",
    );
  else if (lease.bootId !== hostBoot) {
    // nothing started on an earlier boot is alive: there is nothing to search for
    s.remnantOutcome = "none-found";
    return ended(s, "gone", evidence("boot-id", "mismatch", "rebooted", "host rebooted since the lease was written"));
  } else push("boot-id", "match", "same-boot");
  return true;
}

/** The observer's pid namespace (verify.ts's header): another one means the pid numbers name other processes here. */
function checkNamespace(s: State, host: ProcessDetails | null): true | null {
  const { lease } = s;
  const push = pushTo(s);
  const hostNs = host?.pidNamespace;
  if (lease.pidNamespace === undefined || hostNs === undefined) {
    push(
      "pid-namespace",
      "unknown",
      lease.pidNamespace === undefined ? "not-recorded" : "not-readable",
      lease.pidNamespace === undefined ? "not recorded" : "this gateway's pid namespace is not readable",
    );
  } else if (lease.pidNamespace !== hostNs) {
    return ended(
      s,
      "mismatch",
      evidence(
        "pid-namespace",
        "mismatch",
        "other-namespace",
        `this gateway now sees pid namespace ${hostNs}, the lease was written while it saw ${lease.pidNamespace}: its pids name other processes here`,
      ),
    );
  } else push("pid-namespace", "match", "same-namespace", "this gateway still sees the pid namespace it saw at spawn");
  return true;
}

/** Phase 1 for one lease: on success its root and details are set on `s`; otherwise its verdict is. */
export function checkRoot(
  s: State,
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  host: ProcessDetails | null,
  caches: RootCaches,
  gatewayInstanceId: string | undefined,
): void {
  if (!checkPlace(s, host, caches.guard, gatewayInstanceId)) return;
  const found = checkRootIdentity(s, facts, snapshot, caches.batch);
  if (found === null) return;
  checkRootProgram(s, facts, found.d, caches);
  if (s.evidence.some((e) => e.result === "mismatch")) return finishWith(s, "mismatch");
  s.root = found.root;
  s.details = found.d;
}

/**
 * Whether the root is the process the lease recorded: alive in the snapshot,
 * the same start time, and still the same process when the batch read its
 * details. null when that decided the verdict (finished on `s`).
 */
function checkRootIdentity(
  s: State,
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  batch: DetailsBatch,
): { root: ProcessInfo; d: ProcessDetails } | null {
  const { lease } = s;
  const push = pushTo(s);
  // A lease with no pid: its writer died between the lease write and the
  // wrapper's report (a live writer's pending spawn is never verified: leases
  // in flight are skipped, and one gateway holds the state dir).
  // Its root is as gone as a dead one; what it started is found by markers.
  if (lease.rootPid === 0)
    return gone(
      s,
      evidence(
        "root-pid",
        "mismatch",
        "no-pid-recorded",
        "no root pid recorded: the spawn never reported one and its gateway is gone; searching by markers",
      ),
    );
  const root = snapshot.processes.get(lease.rootPid);
  if (!root) return gone(s, rootRows.absent(lease.rootPid));
  if (!isAlive(root)) return gone(s, rootRows.zombie(lease.rootPid));
  push("root-alive", "match", "alive");

  if (lease.rootStartTime === undefined) push("start-time", "unknown", "not-recorded", "not recorded");
  else if (!sameProcess(root, { pid: lease.rootPid, startTime: lease.rootStartTime })) {
    // Coarse identity (ps: epoch seconds) cannot tell a reused pid from a
    // lease recorded in another unit (clock ticks by native or procfs): a
    // difference proves nothing, so it is unknown and nothing is settled on it.
    if (facts.identityStrength !== "exact") {
      return ended(
        s,
        "unknown",
        evidence(
          "start-time",
          "unknown",
          "coarse-cannot-compare",
          `pid ${lease.rootPid} reads ${root.startTime} on the ${facts.backend} backend, the lease says ${lease.rootStartTime}: coarse identity cannot compare them (another unit, or a reused pid)`,
        ),
      );
    }
    // pid reused: not ours, and not a reason to look for anything else either
    return ended(
      s,
      "mismatch",
      evidence(
        "start-time",
        "mismatch",
        "pid-reused",
        `pid ${lease.rootPid} started at ${root.startTime}, lease says ${lease.rootStartTime} (pid reused)`,
      ),
    );
  } else push("start-time", "match", "same-start");

  const d = batch.get(lease.rootPid);
  if (d === undefined) return ended(s, "unknown", rootRows.inspectFailed());
  if (d === null) return gone(s, rootRows.exitedDuringVerification(lease.rootPid));
  if (!sameProcess(d, root)) return ended(s, "mismatch", rootRows.reusedDuringVerification());
  if (!isAlive(d))
    return gone(s, evidence("root-alive", "mismatch", "became-zombie", `pid ${lease.rootPid} became a zombie`));
  return { root, d };
}

/** What the verified root runs, against the lease: the wrapper path, the env markers, the command hash. */
function checkRootProgram(s: State, facts: ProcessFacts, d: ProcessDetails, { paths, hashes }: RootCaches): void {
  const { lease, evidence: ev } = s;
  const push = pushTo(s);
  // Under exact identity, a start time that matched on the same boot and in
  // the same pid namespace IS the process we spawned: a command or executable
  // that differs now only says it exec'd another program since (`sh -c "exec
  // …"`, `bash -c "sleep 30"`, every PTY run's /bin/sh -c). That proves
  // nothing either way, so it is "unknown", never "mismatch". With coarse
  // identity (1 s) the start time alone proves nothing: a difference stays one.
  const same =
    facts.identityStrength === "exact" &&
    ["start-time", "boot-id", "pid-namespace"].every((c) => ev.some((e) => e.check === c && e.result === "match"));
  const execd = (e: OwnershipEvidence): OwnershipEvidence =>
    same && e.result === "mismatch"
      ? evidence(e.check, "unknown", "exec-since-spawn", `${EXECD} (${e.detail ?? "differs"})`)
      : e;

  const wrapperEv = wrapperPathEvidence(lease, d, paths);
  // a wrapperPath outside its wrapperRoot is the record's own fault, not an exec
  ev.push(wrapperEv.code === "not-the-wrapper" ? execd(wrapperEv) : wrapperEv);

  // the one marker rule (markers.ts): lease id AND gateway instance id
  const markers = markerVerdict(d, lease);
  if (markers === "match")
    push("lease-env", "match", "markers-match", "the root carries this lease id and gateway instance id");
  else if (markers === "mismatch")
    push(
      "lease-env",
      "mismatch",
      "markers-differ",
      "the root's environment does not carry this lease id and this gateway instance id",
    );
  else push("lease-env", "unknown", "not-readable", "environment not readable");

  if (d.argv === null || d.argv.length === 0) push("command-hash", "unknown", "not-readable", "argv not readable");
  else if (lease.commandHash === "") push("command-hash", "unknown", "not-recorded", "not recorded");
  else if (hashes.of(d.argv) === lease.commandHash) push("command-hash", "match", "same-command");
  else
    ev.push(execd(evidence("command-hash", "mismatch", "command-differs", "the argv's hash differs from the lease's")));
}

function wrapperPathEvidence(lease: ProcessLease, d: ProcessDetails, paths: PathCache): OwnershipEvidence {
  const ev = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) =>
    evidence("wrapper-path", result, code, detail);
  if (!isAbsolute(lease.wrapperRoot) || !isAbsolute(lease.wrapperPath))
    return ev("unknown", "no-wrapper-recorded", "lease has no absolute wrapperRoot/wrapperPath");
  const root = paths.get(lease.wrapperRoot);
  const wrapper = paths.get(lease.wrapperPath);
  if (!paths.under(wrapper, root))
    return ev("mismatch", "wrapper-outside-root", "the lease's wrapperPath is not under its wrapperRoot");
  const arg1 = d.argv?.[1];
  if (arg1 !== undefined && isAbsolute(arg1) && paths.get(arg1) === wrapper)
    return ev("match", "argv1-is-wrapper", "argv[1] is the leased wrapper");
  const exe = d.exePath;
  const deleted = exe !== null && exe.endsWith(" (deleted)");
  if (exe !== null && !deleted && paths.under(paths.get(exe), root))
    return ev("match", "exe-under-root", "executable is under wrapperRoot");
  if (d.argv === null && exe === null) return ev("unknown", "not-readable", "argv and exe not readable");
  return ev(
    "mismatch",
    "not-the-wrapper",
    deleted
      ? "neither argv[1] nor the (deleted) executable is the leased wrapper"
      : "neither argv[1] nor the executable is the leased wrapper",
  );
}
