/**
 * list() and expire() of the lease store (lease-store.ts has the layout):
 * both read the archive and the live folder, and end the interrupted moves
 * they find there.
 */
import { lstat, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { fsyncDir, mapLimit } from "./fs-safe.js";
import { TERMINAL_STATES } from "./lease-record.js";
import type { ProcessLease } from "./types.js";
import { LeaseStoreReadOnlyError, type LeaseListFilter, type LeaseProblem } from "./lease-store-api.js";
import {
  exists,
  finishMoves,
  ignoreEnoent,
  listFolder,
  load,
  type LeaseListing,
  type StoreFiles,
} from "./lease-store-read.js";

/** above this many live leases, list() reads the archive's names once instead of a stat per lease */
const ARCHIVE_LISTING_MIN = 64;
/** temp files older than this are debris from a crashed write */
const STALE_TEMP_MS = 10 * 60 * 1000;

export async function listLeases(f: StoreFiles, filter: LeaseListFilter | undefined): Promise<LeaseListing> {
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

export async function expireLeases(
  f: StoreFiles,
  retentionMs: number,
  now = Date.now(),
): Promise<{ removed: string[]; problems: LeaseProblem[] }> {
  if (f.readOnly) throw new LeaseStoreReadOnlyError("expire");
  if (typeof retentionMs !== "number" || !(retentionMs >= 0))
    throw new RangeError(`retentionMs must be a number >= 0, got ${retentionMs}`);
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
  await finishMoves(
    f,
    live.leases.filter((l) => archived.has(l.leaseId)).map((l) => l.leaseId),
  );
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
  const found = await mapLimit(candidates, f.concurrency, async (id) =>
    (await exists(join(f.archive, `${id}.json`))) ? id : null,
  );
  return new Set(found.filter((x): x is string => x !== null));
}
