/**
 * The lease store: one JSON file per lease under <stateDir>/acpx/leases.
 *
 * Layout (all directories 0700, all files 0600):
 *   leases/<leaseId>.json          live leases: state open | closing
 *   leases/archive/<leaseId>.json  finished leases: state closed | lost
 *   leases/quarantine/<name>.<ts>  corrupt / truncated / malformed files, kept for inspection
 *
 * Why two directories: a gateway lists its OPEN leases at startup and on
 * every close, while finished leases pile up for the retention window
 * (thousands). Keeping them apart makes "open leases for this gateway" a
 * readdir of the few live files instead of a parse of every file ever
 * written. A move to the archive writes the archive copy first, then unlinks
 * the live copy; a crash in between leaves both, and the archive copy wins
 * (terminal states are absorbing), so a lease is never resurrected.
 *
 * Writers: one gateway process owns its leases, and holds the state dir's
 * lock (state-lock.ts) for as long as it writes. Within a process, updates
 * to one lease are serialised; the store never tears a file. Readers open
 * it read-only and change nothing.
 */
import { randomUUID } from "node:crypto";
import { link, unlink } from "node:fs/promises";
import { join } from "node:path";
import { atomicWrite, ensurePrivateDir, fsyncDir, moveDurably, writeTemp } from "./fs-safe.js";
import {
  LEASE_ID_RE,
  LEASE_KINDS,
  LEASE_STATES,
  LeaseTransitionError,
  TERMINAL_STATES,
  isLegalTransition,
  parseLeaseRecord,
  serializeLease,
} from "./lease-record.js";
import { KeyedQueue, Limiter } from "./keyed-queue.js";
import { asRecordWriteError, hostFault } from "./host-faults.js";
import type { LeaseState, ProcessLease } from "./types.js";
import {
  LeaseNotFoundError,
  LeaseStoreReadOnlyError,
  type LeaseCreateInput,
  type LeaseCreateOptions,
  type LeasePatch,
  type LeaseStore,
  type LeaseStoreOptions,
} from "./lease-store-api.js";
import { exists, ignoreEnoent, isDir, load, type StoreFiles } from "./lease-store-read.js";
import { expireLeases, listLeases } from "./lease-store-list.js";

export { LeaseTransitionError };

export { LeaseNotFoundError, LeaseStoreReadOnlyError } from "./lease-store-api.js";
export type {
  LeaseCreateInput,
  LeaseCreateOptions,
  LeaseListFilter,
  LeasePatch,
  LeaseProblem,
  LeaseStore,
  LeaseStoreOptions,
} from "./lease-store-api.js";

/** lease files read or written at once: enough to keep the thread pool (4 threads) busy */
const IO_SLOTS = 8;

export async function openLeaseStore(stateDir: string, opts: LeaseStoreOptions = {}): Promise<LeaseStore> {
  if (typeof stateDir !== "string" || stateDir.length === 0) throw new TypeError("stateDir must be a non-empty string");
  const dir = join(stateDir, "acpx", "leases");
  const archive = join(dir, "archive");
  const quarantine = join(dir, "quarantine");
  const readOnly = opts.readOnly === true;
  // read-only: the folders are checked (never created); a missing one holds no leases
  let present = true;
  for (const d of [stateDir, join(stateDir, "acpx"), dir, archive, quarantine]) {
    if (!(await ensurePrivateDir(d, !readOnly))) present = false;
  }
  const queue = new KeyedQueue();
  const f: StoreFiles = {
    stateDir,
    dir,
    archive,
    quarantine,
    readOnly,
    present,
    durable: opts.durable ?? true,
    concurrency: Math.max(1, opts.concurrency ?? 64),
    report: (p) => {
      try {
        opts.onProblem?.(p);
      } catch {
        // a reporting hook must not break the store
      }
    },
    withLock: (leaseId, fn) => queue.run(leaseId, fn),
    io: new Limiter(IO_SLOTS),
    remembered: new Map(),
  };
  return {
    dir,
    create: (input, opts) => createLease(f, input, opts),
    async get(leaseId) {
      checkId(leaseId);
      return load(f, leaseId);
    },
    async update(leaseId, patch) {
      checkWritable(f, leaseId, "update");
      return found(leaseId, await changeLease(f, leaseId, (cur) => ({ next: applyPatch(cur, patch), op: "update" })));
    },
    async transition(leaseId, to, patch) {
      checkWritable(f, leaseId, "transition");
      checkState(to);
      return found(leaseId, await changeLease(f, leaseId, (cur) => transitionOf(cur, to, patch)));
    },
    async advance(leaseId, step) {
      checkWritable(f, leaseId, "advance");
      if (typeof step !== "function") throw new TypeError("step must be a function");
      return changeLease(f, leaseId, (cur) => {
        const next = step(cur);
        if (next === null) return null;
        checkState(next.to);
        return transitionOf(cur, next.to, next.patch);
      });
    },
    list: (filter) => listLeases(f, filter),
    expire: (retentionMs, now) => expireLeases(f, retentionMs, now),
  };
}

/**
 * A write refused by the host becomes a LeaseRecordWriteError naming the
 * state dir (host-faults.ts); the file is as it was. A lease folder removed
 * under a running gateway is made again when the state dir itself is back
 * (the operator's to re-create), and the write is tried once more.
 */
async function guarded<T>(f: StoreFiles, path: string, op: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (hostFault(e) === "missing" && (await isDir(f.stateDir))) {
      try {
        for (const d of [join(f.stateDir, "acpx"), f.dir, f.archive, f.quarantine]) await ensurePrivateDir(d, true);
        return await fn();
      } catch (again) {
        throw asRecordWriteError(again, f.stateDir, path, op);
      }
    }
    throw asRecordWriteError(e, f.stateDir, path, op);
  }
}

function remember(f: StoreFiles, l: ProcessLease): ProcessLease {
  if (TERMINAL_STATES.has(l.state)) f.remembered.delete(l.leaseId);
  else f.remembered.set(l.leaseId, l);
  return l;
}

async function write(f: StoreFiles, lease: ProcessLease, previous: LeaseState | null, op: string): Promise<void> {
  return guarded(f, join(TERMINAL_STATES.has(lease.state) ? f.archive : f.dir, `${lease.leaseId}.json`), op, () =>
    f.io.run(() => writeNow(f, lease, previous)),
  );
}

async function writeNow(f: StoreFiles, lease: ProcessLease, previous: LeaseState | null): Promise<void> {
  const data = serializeLease(lease);
  const file = `${lease.leaseId}.json`;
  if (TERMINAL_STATES.has(lease.state)) {
    // a move to the archive (see the layout note): the live copy goes only once the archive copy is in place
    if (previous !== null && !TERMINAL_STATES.has(previous)) await moveDurably(f.archive, f.dir, file, data, f.durable);
    else await atomicWrite(f.archive, file, data, f.durable);
  } else {
    await atomicWrite(f.dir, file, data, f.durable);
  }
}

function checkId(leaseId: unknown): asserts leaseId is string {
  if (typeof leaseId !== "string" || !LEASE_ID_RE.test(leaseId)) {
    throw new TypeError(`leaseId must match ${LEASE_ID_RE}, got ${JSON.stringify(leaseId)}`);
  }
}

function applyPatch(lease: ProcessLease, patch: LeasePatch | undefined): ProcessLease {
  if (patch !== undefined && (typeof patch !== "object" || patch === null))
    throw new TypeError("patch must be an object");
  for (const k of ["leaseId", "gatewayInstanceId", "state"]) {
    if (patch && Object.prototype.hasOwnProperty.call(patch, k)) throw new TypeError(`patch must not change ${k}`);
  }
  const merged: Record<string, unknown> = { ...lease };
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v === undefined) delete merged[k];
    else merged[k] = v;
  }
  merged.updatedAt = Date.now();
  const parsed = parseLeaseRecord(merged, false);
  if (!parsed.ok) throw new TypeError(`patch makes an invalid lease: ${parsed.reason}`);
  return parsed.lease;
}

async function createLease(f: StoreFiles, input: LeaseCreateInput, opts?: LeaseCreateOptions): Promise<ProcessLease> {
  if (f.readOnly) throw new LeaseStoreReadOnlyError("create");
  if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
  const leaseId = input.leaseId ?? randomUUID();
  checkId(leaseId);
  const now = Date.now();
  const { kind, gatewayInstanceId, sessionKey, wrapperRoot, wrapperPath, commandHash } = input;
  if (!LEASE_KINDS.includes(kind))
    throw new TypeError(`input.kind must be ${LEASE_KINDS.join(" or ")}, got ${JSON.stringify(kind)}`);
  const record = {
    leaseId,
    kind,
    gatewayInstanceId,
    sessionKey,
    wrapperRoot,
    wrapperPath,
    rootPid: 0,
    commandHash,
    startedAt: now,
    state: "open",
    updatedAt: now,
  };
  const parsed = parseLeaseRecord(
    {
      ...record,
      ...(input.holder !== undefined ? { holder: input.holder } : {}),
      ...(input.durable !== undefined ? { durable: input.durable } : {}),
    },
    false,
  );
  if (!parsed.ok) throw new TypeError(`invalid lease input: ${parsed.reason}`);
  if (opts?.sync !== undefined && opts.sync !== "now" && opts.sync !== "deferred")
    throw new TypeError(`opts.sync must be "now" or "deferred", got ${JSON.stringify(opts.sync)}`);
  // deferred: in place, synced by the caller's next update (LeaseCreateOptions says when that is enough)
  const sync = f.durable && opts?.sync !== "deferred";
  return f.withLock(leaseId, () =>
    guarded(f, join(f.dir, `${leaseId}.json`), "create", async () => {
      const file = `${leaseId}.json`;
      if (await exists(join(f.archive, file))) throw new Error(`lease ${leaseId} already exists`);
      // link() is the exclusive create: it never replaces an existing lease
      const tmp = await writeTemp(f.dir, file, serializeLease(parsed.lease), sync);
      try {
        await link(tmp, join(f.dir, file));
      } catch (e) {
        if (hostFault(e) === "exists") throw new Error(`lease ${leaseId} already exists`);
        throw e;
      } finally {
        await unlink(tmp).catch(ignoreEnoent);
      }
      if (sync) await fsyncDir(f.dir);
      return remember(f, parsed.lease);
    }),
  );
}

function checkWritable(f: StoreFiles, leaseId: unknown, op: string): asserts leaseId is string {
  if (f.readOnly) throw new LeaseStoreReadOnlyError(op);
  checkId(leaseId);
}

/**
 * update, transition and advance: under the lease's lock, the current record
 * and the change `next` makes of it (null: none), written and remembered.
 * Null when there is no such lease.
 */
async function changeLease(
  f: StoreFiles,
  leaseId: string,
  next: (cur: ProcessLease) => { next: ProcessLease; op: string } | null,
): Promise<ProcessLease | null> {
  return f.withLock(leaseId, async () => {
    const cur = await load(f, leaseId);
    if (!cur) return null;
    const change = next(cur);
    if (change === null) return cur;
    await write(f, change.next, cur.state, change.op);
    return remember(f, change.next);
  });
}

/** update and transition change a lease that exists: LeaseNotFoundError otherwise. */
function found(leaseId: string, lease: ProcessLease | null): ProcessLease {
  if (lease === null) throw new LeaseNotFoundError(leaseId);
  return lease;
}

function checkState(to: unknown): asserts to is LeaseState {
  if (typeof to !== "string" || !(LEASE_STATES as readonly string[]).includes(to)) {
    throw new TypeError(`to must be ${LEASE_STATES.join(" | ")}, got ${JSON.stringify(to)}`);
  }
}

/** The record `cur` becomes in state `to` (patched), or LeaseTransitionError when isLegalTransition refuses it. */
function transitionOf(
  cur: ProcessLease,
  to: LeaseState,
  patch: LeasePatch | undefined,
): { next: ProcessLease; op: string } {
  if (!isLegalTransition(cur.state, to)) throw new LeaseTransitionError(cur.leaseId, cur.state, to);
  return { next: { ...applyPatch(cur, patch), state: to }, op: `transition ${cur.state} → ${to}` };
}
