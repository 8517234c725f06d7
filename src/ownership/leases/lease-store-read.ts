/**
 * Reading the lease store's files (lease-store.ts has the layout and the
 * rules): the state an open store shares (StoreFiles), one lease file judged
 * (a bad one quarantined), one lease loaded, one folder listed, and the end
 * of an interrupted move to the archive, which a read is the one to notice.
 */
import { lstat, readdir, rename, stat } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDir, mapLimit, readOwnedFiles, removeDurably, type SafeRead } from "./fs-safe.js";
import { parseLeaseRecord } from "./lease-record.js";
import type { Limiter } from "./keyed-queue.js";
import { asRecordWriteError, hostFault, hostFaultOfCode } from "./host-faults.js";
import type { ProcessLease } from "./types.js";
import type { LeaseProblem } from "./lease-store-api.js";

const MAX_LEASE_BYTES = 64 * 1024;
/** lease files per read job when a folder is listed: a sixteenth of the jobs, and four jobs still keep the pool's threads busy */
const LIST_BATCH = 16;

/**
 * One open store: its folders, options, and the state its writes share (the
 * per-lease lock, the I/O limiter, the records remembered for a removed
 * folder). Every function of the store takes it; openLeaseStore
 * (lease-store.ts) makes it once.
 */
export interface StoreFiles {
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
  /** at most IO_SLOTS (lease-store.ts) lease reads and writes at once (keyed-queue.ts Limiter says why) */
  readonly io: Limiter;
  /**
   * The last record this store wrote of each live (open/closing) lease. Read
   * back only when the lease folder itself is gone (the state dir removed
   * under a running gateway): the trees this gateway started can still be
   * verified and ended, and their settlements written once the folder is back.
   */
  readonly remembered: Map<string, ProcessLease>;
}

type ReadResult = { lease: ProcessLease | null; problem?: LeaseProblem };
export type LeaseListing = { leases: ProcessLease[]; problems: LeaseProblem[] };

/** A lease record's file name in a lease folder (temp files of a write in flight start with a dot). */
export function isLeaseFileName(name: string): boolean {
  return name.endsWith(".json") && !name.startsWith(".");
}

/** What one lease file read (readOwnedFiles) holds: the lease, or the problem reported for it (a bad file is quarantined). */
async function judgeLease(f: StoreFiles, path: string, r: SafeRead, expectedId: string | null): Promise<ReadResult> {
  switch (r.kind) {
    case "missing":
      return { lease: null };
    case "symlink":
      return {
        lease: null,
        problem: { file: path, kind: "symlink", detail: "lease file is a symlink; refused, left in place" },
      };
    case "foreign-owner":
      return {
        lease: null,
        problem: { file: path, kind: "foreign-owner", detail: `owned by uid ${r.uid}; refused, left in place` },
      };
    case "unreadable":
      // the host refused the read (no descriptor left, an I/O error): not "no such lease", an error naming the cause
      if (
        r.code !== undefined &&
        hostFaultOfCode(r.code) !== "no-access" &&
        hostFaultOfCode(r.code) !== "not-permitted"
      )
        throw asRecordWriteError(Object.assign(new Error(r.detail), { code: r.code }), f.stateDir, path, "read");
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
      return {
        lease: null,
        problem: { file: path, kind: "bad-schema", detail: `${parsed.reason} (newer schema; left in place)` },
      };
    }
    return { lease: null, problem: await quarantineFile(f, path, r, "bad-schema", parsed.reason) };
  }
  if (expectedId !== null && parsed.lease.leaseId !== expectedId) {
    return {
      lease: null,
      problem: await quarantineFile(
        f,
        path,
        r,
        "bad-schema",
        `file name says ${expectedId}, record says ${parsed.lease.leaseId}`,
      ),
    };
  }
  return { lease: parsed.lease };
}

async function quarantineFile(
  f: StoreFiles,
  path: string,
  seen: { ino: number; dev: number },
  kind: LeaseProblem["kind"],
  detail: string,
): Promise<LeaseProblem> {
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

export async function load(f: StoreFiles, leaseId: string): Promise<ProcessLease | null> {
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
  if (l.lease === null && !l.problem && f.remembered.has(leaseId) && !(await isDir(f.dir)))
    return f.remembered.get(leaseId)!;
  return l.lease;
}

export async function listFolder(
  f: StoreFiles,
  folder: string,
  wanted: (l: ProcessLease) => boolean,
): Promise<LeaseListing> {
  if (!f.present) return { leases: [], problems: [] };
  let all: string[];
  try {
    all = await readdir(folder);
  } catch (e) {
    if (hostFault(e) !== "missing") throw e;
    // removed under a running gateway: nothing to list, said once (the writes name it too)
    return {
      leases: [],
      problems: [
        {
          file: folder,
          kind: "unreadable",
          detail: `missing: the state dir ${f.stateDir} or its lease folder was removed`,
        },
      ],
    };
  }
  const names = all.filter(isLeaseFileName);
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
export async function finishMoves(f: StoreFiles, ids: Iterable<string>): Promise<void> {
  const todo = [...ids];
  if (f.readOnly || todo.length === 0) return;
  try {
    if (f.durable) await fsyncDir(f.archive);
    for (const id of todo) await removeDurably(f.dir, `${id}.json`, f.durable);
  } catch {
    // left for the next pass (above)
  }
}

export function isDir(path: string): Promise<boolean> {
  return stat(path).then(
    (st) => st.isDirectory(),
    () => false,
  );
}

export function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

export function ignoreEnoent(e: unknown): void {
  if (hostFault(e) !== "missing") throw e;
}
