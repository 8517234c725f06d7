/**
 * Small filesystem primitives shared by the lease store and the instance id:
 * atomic durable writes, symlink-refusing reads, owned private directories.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lstat, mkdir, open, rename, unlink, type FileHandle } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { getSystemErrorMap, getSystemErrorName } from "node:util";
import { loadNative } from "../../facts/native.js";
import { hostFault, hostFaultOfCode, type HostFault } from "./host-faults.js";
import { FILE_STEP, type FileStep, type NativeBinding, type NativeFileRead } from "../../facts/native-binding.js";

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_NONBLOCK = constants.O_NONBLOCK ?? 0;

export function myUid(): number | null {
  return typeof process.getuid === "function" ? process.getuid() : null;
}

/**
 * A state dir, a folder under it or a file we trust is refused, like ssh
 * refuses a loose ~/.ssh, when it is writable by group or others or owned by
 * another uid: either would let someone else plant or delete leases, or the
 * instance id (a deleted id mints a new identity and strands every earlier
 * lease's processes). The error names the path and the fix; nothing is ever
 * chmod'ed behind the operator's back.
 */
export class InsecurePathError extends Error {
  override name = "InsecurePathError";
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

export function assertPrivate(path: string, st: { uid: number; mode: number }, kind: "directory" | "file"): void {
  const uid = myUid();
  if (uid !== null && st.uid !== uid) {
    throw new InsecurePathError(
      path,
      `${path} is owned by uid ${st.uid}, not ${uid}; refusing to use it (chown ${uid} ${path}, or choose a state dir of your own)`,
    );
  }
  const loose = st.mode & 0o022;
  if (loose !== 0) {
    const who = loose === 0o022 ? "group and others" : loose === 0o020 ? "group" : "others";
    const mode = (st.mode & 0o777).toString(8).padStart(3, "0");
    throw new InsecurePathError(
      path,
      `${path} is writable by ${who} (mode ${mode}); refusing to use it. Fix: chmod ${kind === "directory" ? "700" : "600"} ${path}`,
    );
  }
}

/**
 * mkdir -p with 0700 (unless `create` is false), then refuses a directory
 * that is a symlink, not a directory, owned by another uid or writable by
 * group or others (assertPrivate). Returns false when it does not exist and
 * `create` is false (a read-only caller).
 */
export async function ensurePrivateDir(path: string, create = true): Promise<boolean> {
  if (create) await mkdir(path, { recursive: true, mode: 0o700 });
  let st;
  try {
    st = await lstat(path);
  } catch (e) {
    if (!create && hostFault(e) === "missing") return false;
    throw e;
  }
  if (st.isSymbolicLink())
    throw new InsecurePathError(path, `${path} is a symlink; refusing to use it as a private directory`);
  if (!st.isDirectory()) throw new Error(`${path} is not a directory`);
  assertPrivate(path, st, "directory");
  return true;
}

/** What an fsync of a directory may fail with where the OS does not offer it: the sync is skipped. */
const DIR_SYNC_REFUSED: ReadonlySet<HostFault> = new Set<HostFault>([
  "invalid",
  "is-a-directory",
  "not-permitted",
  "bad-descriptor",
]);

/** fsync a directory so a rename/unlink in it is durable; a no-op where the OS refuses. */
export async function fsyncDir(path: string): Promise<void> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY);
    await fh.sync();
  } catch (e) {
    if (!DIR_SYNC_REFUSED.has(hostFault(e))) throw e;
  } finally {
    // the sync is done (or refused): the close need not hold up the caller
    fh?.close().catch(() => undefined);
  }
}

/**
 * A fresh temp name in `dir`: the pid, a random tag drawn once per process
 * and a counter (its exclusive create refuses a name that exists anyway; a
 * random draw per write was a measurable share of a startup reap's CPU).
 */
export function tempName(dir: string, base: string): string {
  tempTag ??= randomBytes(6).toString("hex");
  return join(dir, `.tmp-${base}-${process.pid}-${tempTag}${(tempCount++).toString(36)}`);
}

let tempTag: string | undefined;
let tempCount = 0;

/** Writes `data` to a fresh 0600 temp file in `dir` (exclusive create), fsynced when durable. */
export async function writeTemp(dir: string, base: string, data: string, durable: boolean): Promise<string> {
  const tmp = tempName(dir, base);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | O_NOFOLLOW, 0o600);
  try {
    await fh.writeFile(data, "utf8");
    if (durable) await fh.sync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await fh.close();
  return tmp;
}

/** temp + fsync + rename + fsync(dir): readers see the old file or the new one, never a torn one. */
export async function atomicWrite(dir: string, file: string, data: string, durable: boolean): Promise<void> {
  const native = loadNative();
  if (native) return replaceNative(native, dir, file, data, durable);
  const tmp = await writeTemp(dir, file, data, durable);
  try {
    await rename(tmp, join(dir, file));
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  if (durable) await fsyncDir(dir);
}

/**
 * unlink, then fsync(dir) when durable, so the removal outlives a crash once
 * this resolves. A file already gone is not an error. One worker-thread job
 * with the addon, the unlink, open, fsync and close jobs of node:fs without
 * it: on a startup reap that ends a thousand leases, every job queued wakes
 * a pool thread that takes a core from the main thread.
 */
export async function removeDurably(dir: string, file: string, durable: boolean): Promise<void> {
  const native = loadNative();
  if (native) return removeNative(native, dir, file, durable);
  try {
    await unlink(join(dir, file));
  } catch (e) {
    if (hostFault(e) !== "missing") throw e;
  }
  if (durable) await fsyncDir(dir);
}

/**
 * A file moved to `dir` with new contents: atomicWrite(dir, file, data),
 * then removeDurably(fromDir, file), the removal only once the new copy is
 * in place (and synced when durable), so the record is never only in the
 * copy being removed. A failed removal leaves both copies, the new one
 * whole. One worker-thread job with the addon (removeDurably says why).
 */
export async function moveDurably(
  dir: string,
  fromDir: string,
  file: string,
  data: string,
  durable: boolean,
): Promise<void> {
  const native = loadNative();
  if (native) return moveNative(native, dir, fromDir, file, data, durable);
  await atomicWrite(dir, file, data, durable);
  await removeDurably(fromDir, file, durable);
}

export type SafeRead =
  | { kind: "ok"; text: string; ino: number; dev: number; mtimeMs: number; mode: number; uid: number }
  | { kind: "missing" }
  | { kind: "symlink" }
  | { kind: "foreign-owner"; uid: number }
  | { kind: "unreadable"; detail: string; code?: string };

/**
 * Opens with O_NOFOLLOW|O_NONBLOCK (a symlink fails with ELOOP instead of
 * being followed; a planted FIFO cannot block us) and checks the OPEN file
 * with fstat, so there is no lstat/open window to swap the file in.
 */
export async function readOwnedFile(path: string, maxBytes: number): Promise<SafeRead> {
  return (await readOwnedFiles([path], maxBytes))[0]!;
}

/**
 * readOwnedFile of each path, results in order. With the addon all of them
 * are one worker-thread job: on a 2-core host every job queued wakes a pool
 * thread that takes a core from the main thread, so a startup reap reads
 * its lease files in batches. Without it, the reads run side by side (the
 * caller sizes the batch).
 */
export async function readOwnedFiles(paths: readonly string[], maxBytes: number): Promise<SafeRead[]> {
  const native = loadNative();
  if (native) return (await native.readSmallFiles(paths, maxBytes)).map((r, i) => fromNative(r, paths[i]!, maxBytes));
  return Promise.all(paths.map((p) => readPortable(p, maxBytes)));
}

async function readPortable(path: string, maxBytes: number): Promise<SafeRead> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    return openFailure((e as NodeJS.ErrnoException).code, () => (e as Error).message);
  }
  try {
    const st = await fh.stat();
    const refused = refusal({ regular: st.isFile(), uid: st.uid, size: st.size }, maxBytes);
    if (refused) return refused;
    const bytes = await readOpen(fh, st.size, maxBytes);
    if (bytes === null) return tooLarge(maxBytes);
    return {
      kind: "ok",
      text: bytes.toString("utf8"),
      ino: st.ino,
      dev: st.dev,
      mtimeMs: st.mtimeMs,
      mode: st.mode,
      uid: st.uid,
    };
  } catch (e) {
    return { kind: "unreadable", detail: (e as Error).message };
  } finally {
    // nothing waits on the close: what was read is already in hand
    fh.close().catch(() => undefined);
  }
}

/** What an open that failed with `code` means for a read (the message is made only when it is shown). */
function openFailure(code: string | undefined, message: () => string): SafeRead {
  const fault = hostFaultOfCode(code);
  if (fault === "missing" || fault === "not-a-directory") return { kind: "missing" };
  if (fault === "link") return { kind: "symlink" };
  return { kind: "unreadable", detail: `${code ?? "error"}: ${message()}`, ...(code !== undefined ? { code } : {}) };
}

/** The refusals the open file's fstat decides, in order; null when it may be read. */
function refusal(st: { regular: boolean; uid: number; size: number }, maxBytes: number): SafeRead | null {
  if (!st.regular) return { kind: "unreadable", detail: "not a regular file" };
  const uid = myUid();
  if (uid !== null && st.uid !== uid) return { kind: "foreign-owner", uid: st.uid };
  return st.size > maxBytes ? tooLarge(maxBytes) : null;
}

function tooLarge(maxBytes: number): SafeRead {
  return { kind: "unreadable", detail: `larger than ${maxBytes} bytes` };
}

/**
 * One file of the addon's read job (native/files_posix.cc): the same
 * syscalls and the same refusals as readPortable, without the four
 * thread-pool round trips, the FileHandle and, for a missing file, the
 * Error a startup reap would otherwise make per lease file on the gateway's
 * main thread.
 */
function fromNative(r: NativeFileRead, path: string, maxBytes: number): SafeRead {
  if (r.err !== 0 && r.step === FILE_STEP.open)
    return openFailure(getSystemErrorName(r.err), () => errnoError(r.err, "open", path).message);
  if (r.err !== 0 && r.step === FILE_STEP.stat)
    return { kind: "unreadable", detail: errnoError(r.err, "fstat", path).message };
  const refused = refusal(r, maxBytes);
  if (refused) return refused;
  if (r.err !== 0) return { kind: "unreadable", detail: errnoError(r.err, "read", path).message };
  if (r.tooLarge) return tooLarge(maxBytes);
  return { kind: "ok", text: r.text, ino: r.ino, dev: r.dev, mtimeMs: r.mtimeMs, mode: r.mode, uid: r.uid };
}

/** atomicWrite as one job of the addon: temp, write, fsync, rename, fsync(dir), as writeTemp + atomicWrite do. */
async function replaceNative(
  native: NativeBinding,
  dir: string,
  file: string,
  data: string,
  durable: boolean,
): Promise<void> {
  const tmp = tempName(dir, file);
  const target = join(dir, file);
  replaceFailed(await native.replaceFile(dir, tmp, target, data, durable), dir, tmp, target);
}

/** removeDurably as one job of the addon: unlink, then fsync(dir) when durable. */
async function removeNative(native: NativeBinding, dir: string, file: string, durable: boolean): Promise<void> {
  const target = join(dir, file);
  jobFailed(await native.removeFile(dir, target, durable), dir, target);
}

/** moveDurably as one job of the addon: replaceNative's steps in `dir`, then removeNative's in `fromDir`. */
async function moveNative(
  native: NativeBinding,
  dir: string,
  fromDir: string,
  file: string,
  data: string,
  durable: boolean,
): Promise<void> {
  const tmp = tempName(dir, file);
  const target = join(dir, file);
  const from = join(fromDir, file);
  const r = await native.moveFile(dir, tmp, target, data, durable, fromDir, from);
  if (r.removing) jobFailed(r, fromDir, from);
  else replaceFailed(r, dir, tmp, target);
}

/** jobFailed for a replacement: its failure is at the temp file, or at its rename onto `target`. */
function replaceFailed(r: { err: number; step: FileStep }, dir: string, tmp: string, target: string): void {
  jobFailed(r, dir, tmp, r.step === FILE_STEP.rename ? target : undefined);
}

/**
 * Throws the error Node's fs would have thrown where a write or removal job
 * stopped (at `file`, or at `dir` for its sync). Nothing for a job that
 * succeeded, or for a directory sync the OS refuses: skipped, as fsyncDir
 * skips it.
 */
function jobFailed(r: { err: number; step: FileStep }, dir: string, file: string, dest?: string): void {
  if (r.err === 0) return;
  const atDir = r.step === FILE_STEP.dirOpen || r.step === FILE_STEP.dirSync;
  const e = errnoError(r.err, SYSCALL[r.step], atDir ? dir : file, dest);
  if (!(atDir && DIR_SYNC_REFUSED.has(hostFaultOfCode(e.code)))) throw e;
}

const SYSCALL: Record<FileStep, string> = {
  0: "open",
  1: "fstat",
  2: "read",
  3: "write",
  4: "fsync",
  5: "close",
  6: "rename",
  7: "fsync",
  8: "unlink",
  9: "open",
};

let errorMap: Map<number, [string, string]> | undefined;

/** The error Node's fs would have thrown for -errno `err` (its code, syscall, path and message). */
function errnoError(
  err: number,
  syscall: string,
  path: string,
  dest?: string,
): NodeJS.ErrnoException & { dest?: string } {
  errorMap ??= getSystemErrorMap();
  const [code, description] = errorMap.get(err) ?? [`Unknown system error ${err}`, "unknown error"];
  const e: NodeJS.ErrnoException & { dest?: string } = new Error(
    `${code}: ${description}, ${syscall} '${path}'${dest !== undefined ? ` -> '${dest}'` : ""}`,
  );
  e.errno = err;
  e.code = code;
  e.syscall = syscall;
  e.path = path;
  if (dest !== undefined) e.dest = dest;
  return e;
}

/**
 * The file's bytes in as few reads as the size its fstat gave allows: one, as
 * a rule (FileHandle.readFile stats again and reads once more for EOF, two
 * more thread-pool round trips per file; a startup reap reads every lease
 * several times). A file still growing past `size` is read to EOF; null when
 * it passes maxBytes.
 */
async function readOpen(fh: FileHandle, size: number, maxBytes: number): Promise<Buffer | null> {
  let buf = Buffer.allocUnsafe(size + 1);
  let len = 0;
  for (;;) {
    if (len === buf.length) {
      if (len > maxBytes) return null;
      const bigger = Buffer.allocUnsafe(Math.min(buf.length * 2, maxBytes + 1));
      buf.copy(bigger, 0, 0, len);
      buf = bigger;
    }
    const { bytesRead } = await fh.read(buf, len, buf.length - len, len);
    if (bytesRead === 0) break;
    len += bytesRead;
    // the whole file its fstat described: lease files are replaced by
    // rename, never rewritten in place, so no EOF read is needed to trust it
    if (len === size) break;
  }
  return len > maxBytes ? null : buf.subarray(0, len);
}

/** Runs fn over items with at most `limit` in flight; results keep input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Is `child` strictly inside `parent` (both already resolved)? The one path-containment rule (wrapper paths under wrapperRoot). */
export function isUnder(child: string, parent: string): boolean {
  const rel = relative(parent, child);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}
