/**
 * Ownership records (docs/ownership.md). The lease field names are OpenClaw's
 * (`acp-lifecycle-refactor`), kept as named; the identity of the live root
 * recorded at spawn time is added after them.
 */
import type { ProcessInfo } from "../../facts/types.js";

/** A random id, minted once per state directory; an ownership discriminator, not a secret. */
export type GatewayInstanceId = string;

export type LeaseState = "open" | "closing" | "closed" | "lost";

/** What a lease's processes are: an ACPX session (a wrapper around an ACP adapter) or a process-supervisor run. */
export type LeaseKind = "acpx" | "supervisor";

/**
 * How a lease ended, recorded with its final state: killed and exit-observed
 * with closed, the others with lost. settle.ts decides which; lease-record.ts
 * SETTLED_AS_MEANING says each in words. A record settled before this field
 * existed has none.
 */
export type LeaseSettledAs =
  "killed" | "exit-observed" | "ended-by-wrapper" | "ended-on-its-own" | "not-ours" | "never-started" | "left-unjudged";

/**
 * What a lease names, whichever side wrote it (`kind`). The field names are
 * OpenClaw's `AcpxProcessLease`, kept as named; the public name stays as an
 * alias of this one.
 */
export interface ProcessLease {
  leaseId: string;
  /** which side wrote the lease and settles it */
  kind: LeaseKind;
  gatewayInstanceId: GatewayInstanceId;
  sessionKey: string;
  wrapperRoot: string;
  wrapperPath: string;
  /** 0 while the spawn is pending */
  rootPid: number;
  /**
   * The process group the lease's processes run in: either the root's own
   * group (wrapper spawned detached, pgid == rootPid) or the adapter group the
   * wrapper created and reported (its leader is a child of the root).
   * Verification accepts both layouts; see verify.ts.
   */
  processGroupId?: number;
  /** computeCommandHash(argv of the root exactly as spawned); never a shell string */
  commandHash: string;
  startedAt: number;
  state: LeaseState;
  // additions: identity of the live root, recorded at spawn time
  /** the root's ProcessInfo.startTime, from the same facts backend that will verify it */
  rootStartTime?: string;
  bootId?: string;
  /**
   * The pid namespace the recording gateway SAW (the backends read the
   * observer's /proc/self/ns/pid), not the root's own: verification asks
   * "does this gateway still see the same namespace as at spawn?".
   */
  pidNamespace?: string;
  updatedAt?: number;
  /**
   * The lease's own cgroup v2 (docs/containment.md), when the host allows
   * one: every process of the lease runs in it whatever its environment,
   * parent or session. `id` is the directory's inode (= cgroup.id), so a
   * re-created directory of the same name never passes for it.
   */
  cgroup?: { path: string; id: string };
  /**
   * A supervisor run's holder: the supervisor process that runs it
   * (supervisor-holders.ts). While that process holds its holder lock, no
   * other process's reconcile touches the run.
   */
  holder?: string;
  /** how it ended; set with the state closed or lost (LeaseSettledAs) */
  settledAs?: LeaseSettledAs;
  /**
   * A durable session (docs/lifecycle-controller.md "Durable sessions"):
   * when its gateway goes away, its wrapper keeps the tree for
   * `reattachWithinMs` waiting for a re-adoption, then ends it. A reconcile
   * leaves such a tree alone while it verifies and runs.
   */
  durable?: { reattachWithinMs: number };
}

/** The contract's name for a lease (CONTRACT §2). */
export type AcpxProcessLease = ProcessLease;

/**
 * The checks a verification makes (docs/ownership.md has the table): those
 * of a lease, of its remnant search and its cgroup, and the two of a legacy
 * record (`command`, `wrapper-root`).
 */
export type EvidenceCheck =
  | "lease-record"
  | "legacy-record"
  | "facts-backend"
  | "process-list"
  | "instance"
  | "root-pid"
  | "boot-id"
  | "pid-namespace"
  | "root-alive"
  | "start-time"
  | "inspect"
  | "wrapper-path"
  | "lease-env"
  | "command-hash"
  | "process-group"
  | "env-marker"
  | "sufficiency"
  | "remnant-env"
  | "remnant-start"
  | "re-verification"
  | "cgroup"
  | "command"
  | "wrapper-root";

/** What one check found, for code to read (`detail` says it for people). */
export type EvidenceCode =
  // the record and the facts
  | "invalid-record"
  | "backend-verifies-nothing"
  | "process-list-unavailable"
  | "inspect-failed"
  | "not-recorded"
  | "not-readable"
  // where the lease was written
  | "same-instance"
  | "other-instance"
  | "refused-by-guard"
  | "no-pid-recorded"
  | "same-boot"
  | "rebooted"
  | "same-namespace"
  | "other-namespace"
  // the root
  | "alive"
  | "absent"
  | "zombie"
  | "exited-during-verification"
  | "became-zombie"
  | "same-start"
  | "pid-reused"
  | "coarse-cannot-compare"
  | "no-wrapper-recorded"
  | "wrapper-outside-root"
  | "argv1-is-wrapper"
  | "exe-under-root"
  | "is-the-wrapper"
  | "not-the-wrapper"
  | "exec-since-spawn"
  | "markers-match"
  | "markers-differ"
  | "no-lease-marker"
  | "carries-lease-marker"
  | "same-command"
  | "command-differs"
  | "untokenisable-command"
  // the process group
  | "own-group"
  | "own-group-unknown"
  | "root-leads-group"
  | "root-in-group"
  | "leader-child-of-root"
  | "member-tied"
  | "root-left-group"
  | "leader-not-child"
  | "group-gone"
  | "members-untied"
  // escapees, sufficiency, remnants
  | "escapees-found"
  | "none-found"
  | "verification-incomplete"
  | "coarse-identity-alone"
  | "not-enough-checks"
  | "search-blocked"
  | "carriers-found"
  | "none-proven"
  | "started-after-lease"
  | "re-verification-failed"
  // the lease's cgroup (cgroup-drain.ts)
  | "cgroup-gone"
  | "cgroup-replaced"
  | "not-a-lease-cgroup"
  | "identity-unreadable"
  | "kill-left-survivors"
  | "populated-unknown"
  | "emptied-and-removed"
  | "not-removed"
  | "folder-left"
  | "still-populated"
  | "foreign-left"
  | "members-refused";

export interface OwnershipEvidence {
  check: EvidenceCheck;
  result: "match" | "mismatch" | "unknown";
  /** what the check found (machine-readable) */
  code: EvidenceCode;
  /** the same, for people */
  detail?: string;
}

export interface OwnedProcessTree {
  lease: ProcessLease;
  root: ProcessInfo;
  /** root and every verified descendant / group member, leaves first (kill order) */
  members: readonly ProcessInfo[];
  evidence: readonly OwnershipEvidence[];
  /**
   * The recorded process group, present only when verification proved it the
   * lease's own ("process-group" matched). The tree kill then also picks up new
   * members of that group while it tears the tree down (tree-kill.ts).
   */
  group?: number;
}

/** The markers: environment keys every leased root is spawned with, inherited by everything below it. */
export const LEASE_ENV_KEY = "OPENCLAW_ACPX_LEASE_ID";
export const INSTANCE_ENV_KEY = "OPENCLAW_GATEWAY_INSTANCE_ID";

/** Grace between SIGTERM and SIGKILL everywhere a tree is killed unless a caller passes its own. */
export const DEFAULT_GRACE_MS = 3000;

/** How long closed/lost leases are kept before retention removes them, unless a caller passes its own. */
export const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** Version of the on-disk lease record; bumped on any incompatible change. */
export const LEASE_SCHEMA_VERSION = 1;
