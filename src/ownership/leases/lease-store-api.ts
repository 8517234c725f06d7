/**
 * The lease store's public shapes: what callers hand it, what it answers,
 * its errors. The store itself is lease-store.ts.
 */
import type { LeaseKind, LeaseState, ProcessLease } from "./types.js";

export interface LeaseProblem {
  file: string;
  kind: "corrupt" | "symlink" | "foreign-owner" | "bad-schema" | "unreadable";
  detail: string;
  quarantinedTo?: string;
}

export type LeasePatch = Partial<Omit<ProcessLease, "leaseId" | "gatewayInstanceId" | "state">>;

export interface LeaseCreateInput {
  /** which side writes the lease (every new record carries it) */
  kind: LeaseKind;
  gatewayInstanceId: string;
  sessionKey: string;
  wrapperRoot: string;
  wrapperPath: string;
  commandHash: string;
  leaseId?: string;
  /** a supervisor run's holder (supervisor-holders.ts) */
  holder?: string;
  /** a durable session's window (ProcessLease.durable) */
  durable?: { reattachWithinMs: number };
}

export interface LeaseCreateOptions {
  /**
   * "now" (the default): the new record is durable once create resolves.
   * "deferred": it is in place, visible to every reader (a gateway restarted
   * after a crash of this one included), but neither the file nor its
   * directory entry is synced; the caller's next update of the lease, which
   * syncs both, makes it durable, and nothing may be started for the lease
   * before that. For a create followed at once by an update (the lease's
   * cgroup binding, lease-cgroup.ts): two journal commits fewer before the
   * spawn. A host crash in between can leave the record absent or empty
   * (quarantined as corrupt by the next reader): nothing was started for it.
   * Ignored by a store that is not durable.
   */
  sync?: "now" | "deferred";
}

export interface LeaseListFilter {
  gatewayInstanceId?: string;
  states?: readonly LeaseState[];
}

export interface LeaseStore {
  /** <stateDir>/acpx/leases */
  readonly dir: string;
  /** Writes a new lease, state "open", rootPid 0, startedAt/updatedAt now. Exclusive: an existing id is an error. */
  create(input: LeaseCreateInput, opts?: LeaseCreateOptions): Promise<ProcessLease>;
  /** null when absent, or when the file was refused/quarantined (reported through onProblem) */
  get(leaseId: string): Promise<ProcessLease | null>;
  /** Merges a patch (never leaseId, gatewayInstanceId or state), sets updatedAt. Throws LeaseNotFoundError. */
  update(leaseId: string, patch: LeasePatch): Promise<ProcessLease>;
  /** Validated state change (see isLegalTransition); throws LeaseTransitionError on an illegal one. */
  transition(leaseId: string, to: LeaseState, patch?: LeasePatch): Promise<ProcessLease>;
  /**
   * A state change decided on the record as it is now: under the lease's
   * lock, one read, `step` names the next state (with a patch) or null for
   * none, and the change is validated and written as transition's. The lease
   * as stored afterwards; null when there is no such lease.
   */
  advance(leaseId: string, step: (cur: ProcessLease) => LeaseStep | null): Promise<ProcessLease | null>;
  /** Every readable lease matching the filter, sorted by startedAt; bad files come back as problems. */
  list(filter?: LeaseListFilter): Promise<{ leases: ProcessLease[]; problems: LeaseProblem[] }>;
  /** Removes closed/lost leases whose updatedAt (else startedAt) is older than now - retentionMs. */
  expire(retentionMs: number, now?: number): Promise<{ removed: string[]; problems: LeaseProblem[] }>;
}

/** One state change advance() makes. */
export interface LeaseStep {
  to: LeaseState;
  patch?: LeasePatch;
}

export interface LeaseStoreOptions {
  /** fsync files and directories (default true). false is for benchmarks and throwaway state only. */
  durable?: boolean;
  /** called for every problem met outside list()/expire() (get/update/transition) */
  onProblem?: (p: LeaseProblem) => void;
  /** files read in parallel by list()/expire() (default 64) */
  concurrency?: number;
  /**
   * Read-only (a reader beside a live gateway): nothing is
   * created, moved, chmod'ed or quarantined; a corrupt file is reported as a
   * problem and left where it is; a state dir without leases lists none.
   * Every write throws LeaseStoreReadOnlyError.
   */
  readOnly?: boolean;
}

export class LeaseStoreReadOnlyError extends Error {
  override name = "LeaseStoreReadOnlyError";
  constructor(op: string) {
    super(`lease store opened read-only: ${op} refused`);
  }
}

export class LeaseNotFoundError extends Error {
  override name = "LeaseNotFoundError";
  constructor(readonly leaseId: string) {
    super(`lease ${leaseId} does not exist`);
  }
}
