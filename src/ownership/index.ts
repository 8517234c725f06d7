// Public surface of src/ownership, re-exported from the package root.
//
// Data flow: facts → ownership → acpx / supervisor. Nothing here imports from above.
// - instance-id.ts   loadOrCreateGatewayInstanceId: <stateDir>/gateway-instance-id, link()-exclusive create
// - lease-reader.ts  openLeaseReader: the store's two reads, for callers outside the lifecycle (the package root's only view of leases)
// - lease-store.ts   one 0600 JSON file per lease under <stateDir>/acpx/leases (live) and …/archive (closed/lost)
// - command-hash.ts  sha256(JSON(argv)) and a POSIX tokenizer for legacy shell strings
// - verify.ts        explainLease / verifyOwnedTree / verifyLeases: evidence list, fail closed, one snapshot per batch
// - collect.ts       the tree of a root from one snapshot (parent links, recorded group, env-marker pids)
// - escalate.ts      escalate: the one kill order (TERM → grace → KILL), on any target that says how it is signalled and seen to end
// - tree-kill.ts     killOwnedTree: leaves first, identity-checked, per pid through escalate, per-pid outcomes
// - legacy.ts        records without a lease: live root + wrapper-root or command match, else left alone
// - remnants.ts      what is left when a lease's root is gone (never when its pid was reused): env-marker carriers proven ours, judged in verify's one env pass
// - markers.ts       markerVerdict: the one env-marker rule (lease id AND gateway instance id)
// - start-clock.ts   ProcessInfo.startTime → epoch ms (Linux ticks via btime + CLK_TCK)
// - kill-verification.ts  killLeaseVerification: the owned tree, else the remnants of a gone root, else nothing
// - settle.ts        settlementFor: the one table for the lease state after a verification (and maybe a kill, and its cgroup's drain)
// - lifecycle.ts     settleLease (and applySettlement, never exported): the ONE place a lease moves (verify → closing → kill → verify → drain → settle)
// - reconcile.ts     reconcileLeases: the batch form (one snapshot; every lease closing, then the kills together)
// - cgroup-drain.ts  a lease's cgroup emptied and removed; what the drain found is an input of settle.ts
// - lease-cgroup.ts  a cgroup bound to a lease around its spawn: create + record, drop
// - state-lock.ts    acquireStateDirLock: one gateway (writer) per state dir
// - keyed-queue.ts   the one per-key lock
// - root-identity.ts recordRootIdentity: the live root's identity into its lease after the spawn, fail closed
export type { GatewayInstanceId, ProcessLease, AcpxProcessLease, LeaseKind, LeaseSettledAs, LeaseState, OwnershipEvidence, EvidenceCheck, EvidenceCode, OwnedProcessTree } from "./types.js";
export { LEASE_ENV_KEY, INSTANCE_ENV_KEY, LEASE_SCHEMA_VERSION, DEFAULT_GRACE_MS, DEFAULT_RETENTION_MS } from "./types.js";
export { foreignInstanceOf, markerVerdict, MARKER_ENV_KEYS } from "./markers.js";
export type { MarkerVerdict } from "./markers.js";
export { loadOrCreateGatewayInstanceId, readGatewayInstanceId, GatewayInstanceIdError, INSTANCE_ID_FILE } from "./instance-id.js";
export { InsecurePathError } from "./fs-safe.js";
export { computeCommandHash, tokenizeShellCommand } from "./command-hash.js";
export { isLegalTransition, parseLeaseRecord, settledLine, LeaseTransitionError, LEASE_ID_RE, SETTLED_AS_MEANING } from "./lease-record.js";
export type { ParsedLease } from "./lease-record.js";
export { openLeaseStore, LeaseNotFoundError, LeaseStoreReadOnlyError } from "./lease-store.js";
export { openLeaseReader, type LeaseReader } from "./lease-reader.js";
export type { LeaseStore, LeaseProblem, LeasePatch, LeaseCreateInput, LeaseCreateOptions, LeaseListFilter, LeaseStoreOptions } from "./lease-store.js";
export { collectTree, selfAndAncestorsIn } from "./collect.js";
export type { CollectOptions } from "./collect.js";
export { explainLease, verifyOwnedTree, verifyLeases } from "./verify.js";
export type { LeaseVerdict, LeaseVerification, VerifyOptions } from "./verify.js";
export { escalate, type Escalation, type EscalationOutcome } from "./escalate.js";
export { killOwnedTree, survivorsOf, killCompleted, killStoppedPid } from "./tree-kill.js";
export { killLeaseVerification } from "./kill-verification.js";
export type { LeaseKillResult, LeaseKillOptions } from "./kill-verification.js";
export { settlementFor, settlementAfterKill, NOTHING_STARTED } from "./settle.js";
export type { Settlement, SettlementCode, SettlementTarget, SettleVerification, SettleContext } from "./settle.js";
export { recordRootIdentity } from "./root-identity.js";
export type { SpawnedRoot, RecordedRoot } from "./root-identity.js";
export { startTimeToEpochMs, readStartClock, START_CLOCK_SLACK_MS } from "./start-clock.js";
export type { StartClock } from "./start-clock.js";
export type { TreeKillOutcome, KillTarget, TreeKillReport, TreeKillOptions } from "./tree-kill.js";
export { verifyLegacyRecord } from "./legacy.js";
export type { LegacySessionRecord } from "./legacy.js";
export type { RemnantRefusal } from "./remnants.js";
export { settleLease, settleUnstarted } from "./lifecycle.js";
export type { LifecycleDeps, LeaseAction, LeaseOutcome, LeaseOutcomeCode, SettleLeaseOptions, PendingSettlement, ReleaseResult } from "./lifecycle.js";
export { reconcileLeases } from "./reconcile.js";
export type { ReconcileOptions, LeaseReconcileReport } from "./reconcile.js";
export { pendingSettlements } from "./pending-settlements.js";
export { LeaseRecordWriteError, HostResourceError, CwdUnusableError, checkCwd, descriptorShortage, hostFaultNote, hostResourceError, processLimitError, isRecordWriteBlocked } from "./host-faults.js";
export type { HostResource } from "./host-faults.js";
export { acquireStateDirLock, stateDirLockHolder, StateDirLockedError, STATE_LOCK_FILE } from "./state-lock.js";
export type { StateDirLock } from "./state-lock.js";
export { KeyedQueue } from "./keyed-queue.js";
