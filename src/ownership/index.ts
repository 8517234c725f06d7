// Public surface of src/ownership, re-exported from the package root.
//
// Nothing here imports from a layer above, and inside, a folder imports only the folders before it:
// both orders are test/helpers/layer-order.mjs's (LAYERS, OWNERSHIP_LAYERS), which the architecture test checks.
// - leases/instance-id.ts loadOrCreateGatewayInstanceId: <stateDir>/gateway-instance-id, link()-exclusive create
// - leases/lease-reader.ts openLeaseReader: the store's two reads, for callers outside the lifecycle (the package root's only view of leases)
// - leases/lease-store.ts one 0600 JSON file per lease under <stateDir>/acpx/leases (live) and …/archive (closed/lost); its reads in lease-store-read.ts, list and expire in lease-store-list.ts
// - leases/command-hash.ts sha256(JSON(argv)) and a POSIX tokenizer for legacy shell strings
// - leases/keyed-queue.ts the one per-key lock
// - verify/verify.ts explainLease / verifyOwnedTree / verifyLeases: evidence list, fail closed, one snapshot per batch; each root checked on its own in verify-root.ts
// - verify/collect.ts the tree of a root from one snapshot (parent links, recorded group, env-marker pids)
// - verify/legacy.ts records without a lease: live root + wrapper-root or command match, else left alone
// - verify/remnants.ts what is left when a lease's root is gone (never when its pid was reused): env-marker carriers proven ours, judged in verify's one env pass
// - verify/markers.ts markerVerdict: the one env-marker rule (lease id AND gateway instance id)
// - verify/start-clock.ts ProcessInfo.startTime → epoch ms (Linux ticks via btime + CLK_TCK)
// - terminate/escalate.ts escalate: the one kill order (TERM → grace → KILL), on any target that says how it is signalled and seen to end
// - terminate/tree-kill.ts killOwnedTree: leaves first, identity-checked, per pid through escalate, per-pid outcomes
// - terminate/kill-verification.ts killLeaseVerification: the owned tree, else the remnants of a gone root, else nothing
// - terminate/cgroup-drain.ts a lease's cgroup emptied and removed; what the drain found is an input of settle.ts
// - lifecycle/settle.ts settlementFor: the one table for the lease state after a verification (and maybe a kill, and its cgroup's drain)
// - lifecycle/lifecycle.ts settleLease (and applySettlement, never exported): the ONE place a lease moves (verify → closing → kill → verify → drain → settle)
// - lifecycle/reconcile.ts reconcileLeases: the batch form (one snapshot; every lease closing, then the kills together)
// - lifecycle/lease-cgroup.ts a cgroup bound to a lease around its spawn: create + record, drop
// - lifecycle/root-identity.ts recordRootIdentity: the live root's identity into its lease after the spawn, fail closed
// - host/state-lock.ts acquireStateDirLock: one gateway (writer) per state dir
export type {
  GatewayInstanceId,
  ProcessLease,
  AcpxProcessLease,
  LeaseKind,
  LeaseSettledAs,
  LeaseState,
  OwnershipEvidence,
  EvidenceCheck,
  EvidenceCode,
  OwnedProcessTree,
} from "./leases/types.js";
export {
  LEASE_ENV_KEY,
  INSTANCE_ENV_KEY,
  LEASE_SCHEMA_VERSION,
  DEFAULT_GRACE_MS,
  DEFAULT_RETENTION_MS,
} from "./leases/types.js";
export { foreignInstanceOf, markerVerdict, MARKER_ENV_KEYS } from "./verify/markers.js";
export type { MarkerVerdict } from "./verify/markers.js";
export {
  loadOrCreateGatewayInstanceId,
  readGatewayInstanceId,
  GatewayInstanceIdError,
  INSTANCE_ID_FILE,
} from "./leases/instance-id.js";
export { InsecurePathError } from "./leases/fs-safe.js";
export { computeCommandHash, tokenizeShellCommand } from "./leases/command-hash.js";
export {
  isLegalTransition,
  parseLeaseRecord,
  settledLine,
  LeaseTransitionError,
  LEASE_ID_RE,
  SETTLED_AS_MEANING,
} from "./leases/lease-record.js";
export type { ParsedLease } from "./leases/lease-record.js";
export { openLeaseStore, LeaseNotFoundError, LeaseStoreReadOnlyError } from "./leases/lease-store.js";
export { openLeaseReader, type LeaseReader } from "./leases/lease-reader.js";
export type {
  LeaseStore,
  LeaseProblem,
  LeasePatch,
  LeaseCreateInput,
  LeaseCreateOptions,
  LeaseListFilter,
  LeaseStoreOptions,
} from "./leases/lease-store.js";
export { collectTree, selfAndAncestorsIn } from "./verify/collect.js";
export type { CollectOptions } from "./verify/collect.js";
export { explainLease, verifyOwnedTree, verifyLeases } from "./verify/verify.js";
export type { LeaseVerdict, LeaseVerification, VerifyOptions } from "./verify/verify.js";
export { escalate, type Escalation, type EscalationOutcome } from "./terminate/escalate.js";
export { killOwnedTree, survivorsOf, killCompleted, killStoppedPid } from "./terminate/tree-kill.js";
export { killLeaseVerification } from "./terminate/kill-verification.js";
export type { LeaseKillResult, LeaseKillOptions } from "./terminate/kill-verification.js";
export { settlementFor, settlementAfterKill, NOTHING_STARTED } from "./lifecycle/settle.js";
export type {
  Settlement,
  SettlementCode,
  SettlementTarget,
  SettleVerification,
  SettleContext,
} from "./lifecycle/settle.js";
export { recordRootIdentity } from "./lifecycle/root-identity.js";
export type { SpawnedRoot, RecordedRoot } from "./lifecycle/root-identity.js";
export { startTimeToEpochMs, readStartClock, START_CLOCK_SLACK_MS } from "./verify/start-clock.js";
export type { StartClock } from "./verify/start-clock.js";
export type { TreeKillOutcome, TreeKillReport, TreeKillOptions } from "./terminate/tree-kill.js";
export { summarizeKill, type TreeKillMember, type TreeKillSummary } from "./terminate/kill-summary.js";
export type { KillTarget } from "./verify/verify-state.js";
export { verifyLegacyRecord } from "./verify/legacy.js";
export type { LegacySessionRecord } from "./verify/legacy.js";
export type { RemnantRefusal } from "./verify/verify-state.js";
export { settleLease, settleUnstarted } from "./lifecycle/lifecycle.js";
export type {
  LifecycleDeps,
  LeaseAction,
  LeaseOutcome,
  LeaseOutcomeCode,
  SettleLeaseOptions,
  PendingSettlement,
  ReleaseResult,
} from "./lifecycle/lifecycle.js";
export { outcomeRow, type OutcomeRow } from "./lifecycle/lease-outcome.js";
export { reconcileLeases } from "./lifecycle/reconcile.js";
export { reconcileInWorker, ReconcileAwayError, worthAWorker, WORKER_MIN_LEASES } from "./lifecycle/reconcile-away.js";
export type { AwayReport, AwaySpec } from "./lifecycle/reconcile-away.js";
export type { ReconcileOptions, LeaseReconcileReport } from "./lifecycle/reconcile.js";
export { pendingSettlements } from "./lifecycle/pending-settlements.js";
export {
  LeaseRecordWriteError,
  HostResourceError,
  CwdUnusableError,
  checkCwd,
  descriptorShortage,
  hostFaultNote,
  hostResourceError,
  processLimitError,
  isRecordWriteBlocked,
} from "./leases/host-faults.js";
export type { HostResource } from "./leases/host-faults.js";
export { acquireStateDirLock, stateDirLockHolder, StateDirLockedError, STATE_LOCK_FILE } from "./host/state-lock.js";
export type { StateDirLock } from "./host/state-lock.js";
export { KeyedQueue } from "./leases/keyed-queue.js";
