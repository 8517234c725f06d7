import type { RunRecord, RunState, TerminationReason } from "../shared/types.js";

/** Exited records kept for `getRecord` after the fact; older ones are pruned. */
export const DEFAULT_MAX_EXITED_RECORDS = 1000;

const ORDER: Record<RunState, number> = { starting: 0, running: 1, exiting: 2, exited: 3 };

export interface FinalizeInput {
  reason: TerminationReason;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
}

export interface FinalizeResult {
  record: RunRecord;
  /** true only for the call that actually finalized; later calls see the first reason. */
  firstFinalize: boolean;
}

export interface RunRegistry {
  add(record: RunRecord): void;
  get(runId: string): RunRecord | undefined;
  list(): RunRecord[];
  /** Copies of the records of one scope (any state, starting runs included), oldest first. */
  listByScope(scopeKey: string): RunRecord[];
  /**
   * Moves a record forward (never backwards, never out of `exited`). A run
   * asked to stop moves to `exiting` with the reason asked
   * (`terminationReason`); `finalize` sets the reason it ended with.
   */
  setState(
    runId: string,
    state: RunState,
    patch?: Partial<Pick<RunRecord, "pid" | "processGroupId" | "leaseId" | "terminationReason">>,
  ): void;
  /** Records what the supervisor learned about the root's identity after the spawn (any state but exited). */
  noteRootIdentity(runId: string, identity: Pick<RunRecord, "rootStartTime" | "rootIdentityUnavailable">): void;
  touchOutput(runId: string, atMs?: number): void;
  /** Idempotent: the first reason wins; returns null for an unknown run. */
  finalize(runId: string, input: FinalizeInput): FinalizeResult | null;
  delete(runId: string): void;
  /** Drops the oldest exited records beyond the cap; returns how many went. */
  prune(): number;
}

export function createRunRegistry(opts: { maxExitedRecords?: number } = {}): RunRegistry {
  const cap = Math.max(0, opts.maxExitedRecords ?? DEFAULT_MAX_EXITED_RECORDS);
  const records = new Map<string, RunRecord>();
  // Insertion order of exits, so pruning drops the oldest first without sorting.
  const exitedOrder: string[] = [];

  const prune = (): number => {
    let dropped = 0;
    while (exitedOrder.length > cap) {
      const id = exitedOrder.shift()!;
      const rec = records.get(id);
      if (rec?.state === "exited") {
        records.delete(id);
        dropped++;
      }
    }
    return dropped;
  };

  return {
    add(record) {
      if (records.has(record.runId)) throw new Error(`run ${record.runId} is already registered`);
      records.set(record.runId, { ...record });
    },
    get(runId) {
      const r = records.get(runId);
      return r ? { ...r } : undefined;
    },
    list() {
      return [...records.values()].map((r) => ({ ...r }));
    },
    listByScope(scopeKey) {
      const out: RunRecord[] = [];
      for (const r of records.values()) if (r.scopeKey === scopeKey) out.push({ ...r });
      return out;
    },
    setState(runId, state, patch) {
      const r = records.get(runId);
      if (!r || r.state === "exited" || ORDER[state] < ORDER[r.state]) return;
      if (state === "exited") return; // only finalize may exit a record
      r.state = state;
      if (patch) Object.assign(r, patch);
      r.updatedAtMs = Date.now();
    },
    noteRootIdentity(runId, identity) {
      const r = records.get(runId);
      if (!r) return;
      if (identity.rootStartTime !== undefined) r.rootStartTime = identity.rootStartTime;
      if (identity.rootIdentityUnavailable !== undefined) r.rootIdentityUnavailable = identity.rootIdentityUnavailable;
    },
    touchOutput(runId, atMs = Date.now()) {
      const r = records.get(runId);
      if (!r) return;
      r.lastOutputAtMs = atMs;
      r.updatedAtMs = atMs;
    },
    finalize(runId, input) {
      const r = records.get(runId);
      if (!r) return null;
      if (r.state === "exited") return { record: { ...r }, firstFinalize: false };
      r.state = "exited";
      r.terminationReason = input.reason;
      r.exitCode = input.exitCode;
      r.exitSignal = input.exitSignal;
      r.updatedAtMs = Date.now();
      exitedOrder.push(runId);
      const snapshot = { ...r };
      prune();
      return { record: snapshot, firstFinalize: true };
    },
    delete(runId) {
      records.delete(runId);
    },
    prune,
  };
}
