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
import { link, lstat, readdir, rename, unlink, stat } from "node:fs/promises";
import { join } from "node:path";
import { atomicWrite, ensurePrivateDir, fsyncDir, mapLimit, moveDurably, readOwnedFiles, removeDurably, writeTemp, type SafeRead } from "./fs-safe.js";
import { LEASE_ID_RE, LEASE_KINDS, LEASE_STATES, LeaseTransitionError, TERMINAL_STATES, isLegalTransition, parseLeaseRecord, serializeLease } from "./lease-record.js";
import { KeyedQueue, Limiter } from "./keyed-queue.js";
import { asRecordWriteError } from "./host-faults.js";
import type { LeaseState, ProcessLease } from "./types.js";
import { LeaseNotFoundError, LeaseStoreReadOnlyError, type LeaseCreateInput, type LeaseCreateOptions, type LeaseListFilter, type LeasePatch, type LeaseProblem, type LeaseStore, type LeaseStoreOptions } from "./lease-store-api.js";

export { LeaseTransitionError };

export { LeaseNotFoundError, LeaseStoreReadOnlyError } from "./lease-store-api.js";
export type { LeaseCreateInput, LeaseCreateOptions, LeaseListFilter, LeasePatch, LeaseProblem, LeaseStore, LeaseStoreOptions } from "./lease-store-api.js";

const MAX_LEASE_BYTES = 64 * 1024;
/** lease files per read job when a folder is listed: a sixteenth of the jobs, and four jobs still keep the pool's threads busy */
const LIST_BATCH = 16;
/** above this many live leases, list() reads the archive's names once instead of a stat per lease */
const ARCHIVE_LISTING_MIN = 64;
/** lease files read or written at once: enough to keep the thread pool (4 threads) busy */
const IO_SLOTS = 8;
/** temp files older than this are debris from a crashed write */
const STALE_TEMP_MS = 10 * 60 * 1000;

/**
 * One open store: its folders, options, and the state its writes share (the
 * per-lease lock, the I/O limiter, the records remembered for a removed
 * folder). Every function below takes it; openLeaseStore makes it once.
 */
interface StoreFiles {
  readonly stateDir: string;
  /** <stateDir>/acpx/leases: live leases */
  readonly dir: string;
  readonly archive: string;
  readonly quarantine: string;
  readonly readOnly: boolean;
  readonly durable: boolean;
  /** files read in parallel by list()/expire() */
  readonly concurrency: number;
  /** false when a read-only store found a folder missing: it holds no leases */
  readonly present: boolean;
  report(p: LeaseProblem): void;
  /** read-modify-write of one lease is serialised within this process (one writer process per state dir: state-lock.ts) */
  withLock<T>(leaseId: string, fn: () => Promise<T>): Promise<T>;
  /** one lease read or write at a time per IO_SLOTS (keyed-queue.ts Limiter says why) */
  readonly io: Limiter;
  /**
   * The last record this store wrote of each live (open/closing) lease. Read
   * back only when the lease folder itself is gone (the state dir removed
   * under a running gateway): the trees this gateway started can still be
   * verified and ended, and their settlements written once the folder is back.
   */
  readonly remembered: Map<string, ProcessLease>;
}

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
    stateDir, dir, archive, quarantine, readOnly, present,
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

type ReadResult = { lease: ProcessLease | null; problem?: LeaseProblem };
type LeaseListing = { leases: ProcessLease[]; problems: LeaseProblem[] };

/** What one lease file read (readOwnedFiles) holds: the lease, or the problem reported for it (a bad file is quarantined). */
async function judgeLease(f: StoreFiles, path: string, r: SafeRead, expectedId: string | null): Promise<ReadResult> {
  switch (r.kind) {
    case "missing":
      return { lease: null };
    case "symlink":
      return { lease: null, problem: { file: path, kind: "symlink", detail: "lease file is a symlink; refused, left in place" } };
    case "foreign-owner":
      return { lease: null, problem: { file: path, kind: "foreign-owner", detail: `owned by uid ${r.uid}; refused, left in place` } };
    case "unreadable":
      // the host refused the read (no descriptor left, an I/O error): not "no such lease", an error naming the cause
      if (r.code !== undefined && r.code !== "EACCES" && r.code !== "EPERM") throw asRecordWriteError(Object.assign(new Error(r.detail), { code: r.code }), f.stateDir, path, "read");
      return { lease: null, problem: { file: path, kind: "unreadable", detail: r.detail } };
    case "ok":
      break;
  }
  let json: unknown;
  try {
    json = JSON.parse(r.text);
  } catch (e) {
    const detail = r.text.trim().length === 0 ? "empty file" : `invalid JSON (truncated?): ${(e as Error).message}`;
    return { lease: null, problem: await quarantineFile(f, path, r, "corrupt", detail) };
  }
  const parsed = parseLeaseRecord(json, true);
  if (!parsed.ok) {
    if (parsed.futureSchema) {
      // written by a newer proclease: not ours to judge or move
      return { lease: null, problem: { file: path, kind: "bad-schema", detail: `${parsed.reason} (newer schema; left in place)` } };
    }
    return { lease: null, problem: await quarantineFile(f, path, r, "bad-schema", parsed.reason) };
  }
  if (expectedId !== null && parsed.lease.leaseId !== expectedId) {
    return { lease: null, problem: await quarantineFile(f, path, r, "bad-schema", `file name says ${expectedId}, record says ${parsed.lease.leaseId}`) };
  }
  return { lease: parsed.lease };
}

async function quarantineFile(f: StoreFiles, path: string, seen: { ino: number; dev: number }, kind: LeaseProblem["kind"], detail: string): Promise<LeaseProblem> {
  const problem: LeaseProblem = { file: path, kind, detail };
  if (f.readOnly) return problem; // reported, never moved by a reader
  try {
    // only move the very file we judged: a writer may have renamed a good one over it since
    const now = await lstat(path);
    if (now.ino !== seen.ino || now.dev !== seen.dev || !now.isFile()) return problem;
    const base = path.slice(path.lastIndexOf("/") + 1);
    const to = join(f.quarantine, `${base}.${Date.now()}-${Math.random().toString(36).slice(2, 8)}`);
    await rename(path, to);
    if (f.durable) await fsyncDir(f.quarantine);
    problem.quarantinedTo = to;
  } catch (e) {
    problem.detail += ` (quarantine failed: ${(e as Error).message})`;
  }
  return problem;
}

async function load(f: StoreFiles, leaseId: string): Promise<ProcessLease | null> {
  if (!f.present) return null;
  const file = `${leaseId}.json`;
  // both copies in one read job, the archive's first: the archive copy wins (terminal states are absorbing, see the layout note)
  const paths = [join(f.archive, file), join(f.dir, file)] as const;
  const [inArchive, inDir] = await f.io.run(() => readOwnedFiles(paths, MAX_LEASE_BYTES));
  const a = await judgeLease(f, paths[0], inArchive!, leaseId);
  if (a.problem) f.report(a.problem);
  if (a.lease && inDir!.kind === "ok") await finishMoves(f, [leaseId]);
  if (a.lease) return a.lease;
  const l = await judgeLease(f, paths[1], inDir!, leaseId);
  if (l.problem) f.report(l.problem);
  if (l.lease === null && !l.problem && f.remembered.has(leaseId) && !(await isDir(f.dir))) return f.remembered.get(leaseId)!;
  return l.lease;
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
    if ((e as NodeJS.ErrnoException).code === "ENOENT" && (await isDir(f.stateDir))) {
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
  return guarded(f, join(TERMINAL_STATES.has(lease.state) ? f.archive : f.dir, `${lease.leaseId}.json`), op, () => f.io.run(() => writeNow(f, lease, previous)));
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
  if (patch !== undefined && (typeof patch !== "object" || patch === null)) throw new TypeError("patch must be an object");
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

async function listFolder(f: StoreFiles, folder: string, wanted: (l: ProcessLease) => boolean): Promise<LeaseListing> {
  if (!f.present) return { leases: [], problems: [] };
  let all: string[];
  try {
    all = await readdir(folder);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    // removed under a running gateway: nothing to list, said once (the writes name it too)
    return { leases: [], problems: [{ file: folder, kind: "unreadable", detail: `missing: the state dir ${f.stateDir} or its lease folder was removed` }] };
  }
  const names = all.filter((n) => n.endsWith(".json") && !n.startsWith("."));
  const leases: ProcessLease[] = [];
  const problems: LeaseProblem[] = [];
  // a batch of files per read job (readOwnedFiles says why), `concurrency` files in flight in all
  const batches: string[][] = [];
  for (let i = 0; i < names.length; i += LIST_BATCH) batches.push(names.slice(i, i + LIST_BATCH));
  const read = await mapLimit(batches, Math.max(1, Math.ceil(f.concurrency / LIST_BATCH)), async (batch) => {
    const paths = batch.map((n) => join(folder, n));
    const files = await readOwnedFiles(paths, MAX_LEASE_BYTES);
    return Promise.all(files.map((r, i) => judgeLease(f, paths[i]!, r, batch[i]!.slice(0, -5))));
  });
  const results = read.flat();
  for (const r of results) {
    if (r.problem) problems.push(r.problem);
    if (r.lease && wanted(r.lease)) leases.push(r.lease);
  }
  return { leases, problems };
}

async function createLease(f: StoreFiles, input: LeaseCreateInput, opts?: LeaseCreateOptions): Promise<ProcessLease> {
  if (f.readOnly) throw new LeaseStoreReadOnlyError("create");
  if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
  const leaseId = input.leaseId ?? randomUUID();
  checkId(leaseId);
  const now = Date.now();
  const { kind, gatewayInstanceId, sessionKey, wrapperRoot, wrapperPath, commandHash } = input;
  if (!LEASE_KINDS.includes(kind)) throw new TypeError(`input.kind must be ${LEASE_KINDS.join(" or ")}, got ${JSON.stringify(kind)}`);
  const record = { leaseId, kind, gatewayInstanceId, sessionKey, wrapperRoot, wrapperPath, rootPid: 0, commandHash, startedAt: now, state: "open", updatedAt: now };
  const parsed = parseLeaseRecord({ ...record, ...(input.holder !== undefined ? { holder: input.holder } : {}) }, false);
  if (!parsed.ok) throw new TypeError(`invalid lease input: ${parsed.reason}`);
  if (opts?.sync !== undefined && opts.sync !== "now" && opts.sync !== "deferred") throw new TypeError(`opts.sync must be "now" or "deferred", got ${JSON.stringify(opts.sync)}`);
  // deferred: in place, synced by the caller's next update (LeaseCreateOptions says when that is enough)
  const sync = f.durable && opts?.sync !== "deferred";
  return f.withLock(leaseId, () => guarded(f, join(f.dir, `${leaseId}.json`), "create", async () => {
    const file = `${leaseId}.json`;
    if (await exists(join(f.archive, file))) throw new Error(`lease ${leaseId} already exists`);
    // link() is the exclusive create: it never replaces an existing lease
    const tmp = await writeTemp(f.dir, file, serializeLease(parsed.lease), sync);
    try {
      await link(tmp, join(f.dir, file));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") throw new Error(`lease ${leaseId} already exists`);
      throw e;
    } finally {
      await unlink(tmp).catch(ignoreEnoent);
    }
    if (sync) await fsyncDir(f.dir);
    return remember(f, parsed.lease);
  }));
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
async function changeLease(f: StoreFiles, leaseId: string, next: (cur: ProcessLease) => { next: ProcessLease; op: string } | null): Promise<ProcessLease | null> {
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
function transitionOf(cur: ProcessLease, to: LeaseState, patch: LeasePatch | undefined): { next: ProcessLease; op: string } {
  if (!isLegalTransition(cur.state, to)) throw new LeaseTransitionError(cur.leaseId, cur.state, to);
  return { next: { ...applyPatch(cur, patch), state: to }, op: `transition ${cur.state} → ${to}` };
}

async function listLeases(f: StoreFiles, filter: LeaseListFilter | undefined): Promise<LeaseListing> {
  const states = filter?.states;
  const gw = filter?.gatewayInstanceId;
  const wanted = (l: ProcessLease) =>
    (gw === undefined || l.gatewayInstanceId === gw) && (states === undefined || states.includes(l.state));
  const needDone = states === undefined || states.some((s) => TERMINAL_STATES.has(s));
  const problems: LeaseProblem[] = [];
  const byId = new Map<string, ProcessLease>();
  if (needDone) {
    const r = await listFolder(f, f.archive, wanted);
    problems.push(...r.problems);
    for (const l of r.leases) byId.set(l.leaseId, l);
  }
  // the live folder holds open/closing leases; it can also hold a terminal
  // record someone placed there by hand, which is honoured as written
  const live = await listFolder(f, f.dir, wanted);
  problems.push(...live.problems);
  const ids = live.leases.map((l) => l.leaseId);
  // a live copy whose archive copy exists is the debris of an interrupted move
  const superseded = needDone ? new Set(ids.filter((id) => byId.has(id))) : await archivedCopies(f, ids);
  // load ends such a move once it has read the archive copy whole (a corrupt one never costs the live record)
  for (const id of superseded) await load(f, id);
  for (const l of live.leases) {
    if (byId.has(l.leaseId) || superseded.has(l.leaseId)) continue;
    byId.set(l.leaseId, l);
  }
  const leases = [...byId.values()].sort((a, b) => a.startedAt - b.startedAt || (a.leaseId < b.leaseId ? -1 : 1));
  return { leases, problems };
}

async function expireLeases(f: StoreFiles, retentionMs: number, now = Date.now()): Promise<{ removed: string[]; problems: LeaseProblem[] }> {
  if (f.readOnly) throw new LeaseStoreReadOnlyError("expire");
  if (typeof retentionMs !== "number" || !(retentionMs >= 0)) throw new RangeError(`retentionMs must be a number >= 0, got ${retentionMs}`);
  const cutoff = now - retentionMs;
  const removed: string[] = [];
  const problems: LeaseProblem[] = [];
  const done = await listFolder(f, f.archive, () => true);
  problems.push(...done.problems);
  const archived = new Set(done.leases.map((l) => l.leaseId));
  for (const l of done.leases) {
    if (TERMINAL_STATES.has(l.state) && (l.updatedAt ?? l.startedAt) < cutoff) {
      await unlink(join(f.archive, `${l.leaseId}.json`)).catch(ignoreEnoent);
      removed.push(l.leaseId);
    }
  }
  const live = await listFolder(f, f.dir, () => true);
  problems.push(...live.problems);
  await finishMoves(f, live.leases.filter((l) => archived.has(l.leaseId)).map((l) => l.leaseId));
  for (const l of live.leases) {
    if (!archived.has(l.leaseId) && TERMINAL_STATES.has(l.state) && (l.updatedAt ?? l.startedAt) < cutoff) {
      await unlink(join(f.dir, `${l.leaseId}.json`)).catch(ignoreEnoent);
      removed.push(l.leaseId);
    }
  }
  await removeStaleTemps(f, now);
  if (f.durable && removed.length > 0) {
    await fsyncDir(f.archive);
    await fsyncDir(f.dir);
  }
  return { removed, problems };
}

/**
 * A live copy beside a readable archive copy is the debris of an
 * interrupted move: the archive write landed, the unlink after it did not
 * (a crash, or a directory sync the host refused, say for want of a
 * descriptor). The archive copy wins; this ends the move: the archive's
 * directory synced first, so a record is never only in the copy being
 * removed, then each live copy removed. Callers pass only ids whose archive
 * copy they parsed. Best effort: what fails stays debris for the next list,
 * load or expire, which see it and call this again.
 */
async function finishMoves(f: StoreFiles, ids: Iterable<string>): Promise<void> {
  const todo = [...ids];
  if (f.readOnly || todo.length === 0) return;
  try {
    if (f.durable) await fsyncDir(f.archive);
    for (const id of todo) await removeDurably(f.dir, `${id}.json`, f.durable);
  } catch {
    // left for the next pass (above)
  }
}

/** Temp files older than STALE_TEMP_MS are debris from a crashed write. */
async function removeStaleTemps(f: StoreFiles, now: number): Promise<void> {
  for (const folder of [f.dir, f.archive]) {
    for (const n of await readdir(folder).catch((): string[] => [])) {
      if (!n.startsWith(".tmp-")) continue;
      const st = await lstat(join(folder, n)).catch(() => null);
      if (st && st.isFile() && now - st.mtimeMs > STALE_TEMP_MS) await unlink(join(folder, n)).catch(ignoreEnoent);
    }
  }
}

function isDir(path: string): Promise<boolean> {
  return stat(path).then((st) => st.isDirectory(), () => false);
}

/**
 * Which of `ids` also have an archive copy (stat, as exists). Many ids are
 * first narrowed by one listing of the archive, so that only the names it
 * holds cost a stat, not one thread-pool job per live lease.
 */
async function archivedCopies(f: StoreFiles, ids: readonly string[]): Promise<Set<string>> {
  let candidates = ids;
  if (ids.length > ARCHIVE_LISTING_MIN) {
    const names = await readdir(f.archive).catch((): string[] | null => null);
    if (names !== null) {
      const held = new Set(names);
      candidates = ids.filter((id) => held.has(`${id}.json`));
    }
  }
  const found = await mapLimit(candidates, f.concurrency, async (id) => ((await exists(join(f.archive, `${id}.json`))) ? id : null));
  return new Set(found.filter((x): x is string => x !== null));
}

function exists(path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false);
}

function ignoreEnoent(e: unknown): void {
  if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
}
