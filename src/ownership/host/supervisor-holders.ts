/**
 * One live supervisor process per run: a process supervisor takes no
 * state-dir lock (a gateway runs its ACPX controller, which holds
 * gateway.lock, beside it, and a rolling restart runs two gateways on one
 * state dir for a while), so a reconcile in one process must not end the
 * runs of a supervisor that is alive in another. Each process that
 * supervises leased runs on a state dir holds a holder lock,
 * `<stateDir>/acpx/supervisors/<holder id>.lock`, with the same
 * kernel-released flock(2) as the state-dir lock (state-lock.ts): the kernel
 * drops it when the process dies, so a crashed supervisor's runs are
 * reconciled by the next one, and a pid reused since cannot pass for it.
 * Every run's lease names its holder (ProcessLease.holder); reconcile
 * leaves alone every run whose holder is held by another process.
 *
 * The holder is the process, not the supervisor object: two supervisors in
 * one process on one state dir share it, and a second supervisor object in
 * the same process reconciles as before (a restart within one process).
 * Without the addon, the file names its holder (pid + start time) and is
 * judged through the facts layer, failing closed: a holder that cannot be
 * proven gone is alive.
 */
import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { open, readdir, stat, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { isAlive } from "../../facts/liveness.js";
import { sameProcess } from "../../facts/identity.js";
import { getProcessFacts } from "../../facts/get.js";
import { loadNative } from "../../facts/native.js";
import type { ProcessFacts } from "../../facts/types.js";
import { ensurePrivateDir, readOwnedFile } from "../leases/fs-safe.js";

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const EWOULDBLOCK = new Set([-11, -35]);
/** a lock file nobody holds and older than this is a crashed holder's: removed by the next look */
const STALE_MS = 60_000;

/** This process's holder id: one per process, whatever the number of supervisors in it. */
export const HOLDER_ID = `h${process.pid}-${randomUUID().slice(0, 8)}`;

/** per state dir: the lock (taken once) and how many supervisors of this process use it */
const held = new Map<string, { lock: Promise<FileHandle | null>; users: number }>();

const folderOf = (stateDir: string) => join(stateDir, "acpx", "supervisors");

/**
 * Takes this process's holder lock on the state dir (once per process and
 * state dir; kept until the process exits). Resolves the holder id to write
 * into each lease; a lock that cannot be taken (no addon: the file alone
 * names us) still returns it.
 */
export async function holdSupervisorLock(stateDir: string): Promise<string> {
  let h = held.get(stateDir);
  if (!h) {
    const lock = takeLock(stateDir);
    h = { lock, users: 0 };
    held.set(stateDir, h);
    const mine = h;
    lock.catch(() => {
      if (held.get(stateDir) === mine) held.delete(stateDir);
    });
  }
  h.users++;
  try {
    await h.lock;
  } catch (e) {
    h.users--;
    throw e;
  }
  return HOLDER_ID;
}

async function takeLock(stateDir: string): Promise<FileHandle | null> {
  await ensurePrivateDir(folderOf(stateDir));
  const fh = await open(
    join(folderOf(stateDir), `${HOLDER_ID}.lock`),
    constants.O_RDWR | constants.O_CREAT | O_NOFOLLOW,
    0o600,
  );
  const native = loadNative();
  if (native) {
    const rc = native.lockExclusive(fh.fd);
    if (rc !== 0) {
      await fh.close();
      throw new Error(`${join(folderOf(stateDir), `${HOLDER_ID}.lock`)}: flock failed (errno ${-rc})`);
    }
  }
  // this process's own start time through the default backend: the caller's facts are for its runs (a test may hold them)
  const me = await getProcessFacts()
    .inspect(process.pid)
    .catch(() => null);
  await fh.write(
    `${JSON.stringify({ pid: process.pid, startTime: me ? String(me.startTime) : "unknown" })}\n`,
    0,
    "utf8",
  );
  // kept open for the life of the process: the kernel drops the flock at exit
  return fh;
}

/** Gives the lock back (the last supervisor of this process on the state dir shut down). */
export async function releaseSupervisorLock(stateDir: string): Promise<void> {
  const h = held.get(stateDir);
  if (!h || --h.users > 0) return;
  held.delete(stateDir);
  const fh = await h.lock.catch(() => null);
  await unlink(join(folderOf(stateDir), `${HOLDER_ID}.lock`)).catch(() => undefined);
  await fh?.close().catch(() => undefined);
}

/**
 * The holder ids of other processes that hold their lock on this state dir
 * now. A lock file nobody holds and older than STALE_MS is removed (its
 * process died); one that cannot be judged counts as held (fail closed).
 */
export async function liveHolders(stateDir: string, facts: ProcessFacts): Promise<Set<string>> {
  const out = new Set<string>();
  let names: string[];
  try {
    names = await readdir(folderOf(stateDir));
  } catch {
    return out;
  }
  const native = loadNative();
  for (const n of names) {
    if (!n.endsWith(".lock")) continue;
    const id = n.slice(0, -5);
    if (id === HOLDER_ID) continue;
    const path = join(folderOf(stateDir), n);
    const alive = native ? await probeFlock(path, native.lockExclusive.bind(native)) : await probeFile(path, facts);
    if (alive !== false) out.add(id);
  }
  return out;
}

/** true: held by a live process; false: nobody holds it (a stale one is removed); null: cannot tell. */
async function probeFlock(path: string, lockExclusive: (fd: number) => number): Promise<boolean | null> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, constants.O_RDONLY | O_NOFOLLOW);
    const rc = lockExclusive(fh.fd);
    if (EWOULDBLOCK.has(rc)) return true;
    if (rc !== 0) return null;
    // nobody holds it: a crashed holder's (or one in the instant between create and flock: kept while young)
    const st = await stat(path);
    if (Date.now() - st.mtimeMs > STALE_MS) await unlink(path).catch(() => undefined);
    return false;
  } catch {
    return null;
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

async function probeFile(path: string, facts: ProcessFacts): Promise<boolean | null> {
  const r = await readOwnedFile(path, 4096);
  if (r.kind !== "ok") return r.kind === "missing" ? false : null;
  try {
    const h = JSON.parse(r.text) as { pid?: unknown; startTime?: unknown };
    if (typeof h.pid !== "number" || typeof h.startTime !== "string") return null;
    const d = await facts.inspect(h.pid);
    return d !== null && sameProcess(d, { pid: h.pid, startTime: h.startTime }) && isAlive(d);
  } catch {
    return null;
  }
}

const HOLDER_ID_RE = /^h\d+-[0-9a-f]{8}$/;

/**
 * A dead process's holder lock, taken over by its keeper (keeper-reap.ts):
 * while the keeper holds it, every other process's reconcile leaves that
 * holder's runs alone, as while the process lived, so the keeper and a
 * gateway started meanwhile never settle the same run. The kernel drops the
 * dead holder's flock with its last descriptor, possibly a moment after the
 * keeper learnt of the death: refusals are retried for `waitMs`. Null when it
 * cannot be taken (then the keeper leaves that holder's runs alone too).
 */
export async function takeOverHolderLock(
  stateDir: string,
  holderId: string,
  waitMs: number,
): Promise<{ release(): Promise<void> } | null> {
  if (!HOLDER_ID_RE.test(holderId)) return null;
  const path = join(folderOf(stateDir), `${holderId}.lock`);
  let fh: FileHandle;
  try {
    await ensurePrivateDir(folderOf(stateDir));
    fh = await open(path, constants.O_RDWR | constants.O_CREAT | O_NOFOLLOW, 0o600);
  } catch {
    return null;
  }
  const native = loadNative();
  const deadline = Date.now() + waitMs;
  for (;;) {
    const rc = native ? native.lockExclusive(fh.fd) : 0;
    if (rc === 0) break;
    if (!EWOULDBLOCK.has(rc) || Date.now() > deadline) {
      await fh.close().catch(() => undefined);
      return null;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  // without the addon the file alone names the holder: it names this process now
  const me = await getProcessFacts()
    .inspect(process.pid)
    .catch(() => null);
  await fh.truncate(0).catch(() => undefined);
  await fh
    .write(`${JSON.stringify({ pid: process.pid, startTime: me ? String(me.startTime) : "unknown" })}\n`, 0, "utf8")
    .catch(() => undefined);
  return {
    async release() {
      await unlink(path).catch(() => undefined);
      await fh.close().catch(() => undefined);
    },
  };
}
