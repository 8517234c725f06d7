/**
 * The shapes of a verification (verify.ts and its env pass, verify-env.ts):
 * what a caller gets back per lease, and the working state each lease moves
 * through while it is checked.
 */
import type { ProcessDetails, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import type { StartClock } from "./start-clock.js";
import type { ProcessLease, OwnedProcessTree, OwnershipEvidence } from "../leases/types.js";

/** Why the remnant search refused a process that could carry a lease's markers (LeaseVerification.remnantRefusals counts them). */
export type RemnantRefusal =
  | "markers"
  | "env-unreadable"
  | "inspect-failed"
  | "boot-id"
  | "pid-namespace"
  | "uid"
  | "guard"
  | "started-early"
  | "start-unknown"
  | "env-hidden";

/**
 * What the tree kill (terminate/tree-kill.ts) is handed: a verification's
 * owned tree or its remnants. OwnedProcessTree satisfies it; members leaves
 * first, root last.
 */
export interface KillTarget {
  root: ProcessInfo;
  members: readonly ProcessInfo[];
  /**
   * A process group verified as the lease's own (OwnedProcessTree sets it
   * only when "process-group" matched). New members that join it during the
   * teardown are killed too; see tree-kill.ts TreeKillOptions.group.
   */
  group?: number;
}

export type LeaseVerdict = "owned" | "gone" | "mismatch" | "unknown";

export interface LeaseVerification {
  lease: ProcessLease;
  /**
   * owned: a tree was verified. gone: the root is not alive (absent, zombie,
   * or the host rebooted since the lease was written): nothing it names is
   * alive. mismatch: something alive answers to the pid but is
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
  remnants: KillTarget | null;
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
   * kill that completed still leaves the lease closing while this is not 0
   * (settle.ts).
   */
  remnantsUncleared: number;
  /** the processes the remnant search refused, counted by why (those that could not be judged included); empty when nothing was searched */
  remnantRefusals: Readonly<Partial<Record<RemnantRefusal, number>>>;
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

export interface State {
  lease: ProcessLease;
  evidence: OwnershipEvidence[];
  verdict: LeaseVerdict | null;
  root: ProcessInfo | null;
  details: ProcessDetails | null;
  tree?: OwnedProcessTree | null;
  /** the root is gone (absent or a zombie, same boot): look for remnants */
  remnantSearch?: boolean;
  remnants?: KillTarget | null;
  remnantOutcome?: LeaseVerification["remnantSearch"];
  remnantsUncleared?: number;
  remnantRefusals?: Partial<Record<RemnantRefusal, number>>;
  factsUnavailable?: boolean;
}

export function done(lease: ProcessLease, verdict: LeaseVerdict, evidence: OwnershipEvidence[]): State {
  return { lease, evidence, verdict, root: null, details: null, tree: null };
}
export function finishWith(s: State, verdict: LeaseVerdict, ev?: OwnershipEvidence): void {
  if (ev) s.evidence.push(ev);
  s.verdict = verdict;
  s.tree = null;
}
/** finishWith "gone", and the lease's remnants are searched for in the env pass. Only a gone root has remnants. */
export function vanished(s: State, ev: OwnershipEvidence): void {
  finishWith(s, "gone", ev);
  s.remnantSearch = true;
}
export function finish(s: State): LeaseVerification {
  const remnants = s.tree ? null : (s.remnants ?? null);
  return {
    lease: s.lease,
    verdict: s.verdict ?? "unknown",
    evidence: s.evidence,
    tree: s.tree ?? null,
    remnants,
    remnantSearch: s.remnantOutcome ?? "not-run",
    remnantsUncleared: s.remnantsUncleared ?? 0,
    remnantRefusals: s.remnantRefusals ?? {},
    factsUnavailable: s.factsUnavailable === true,
  };
}
