/**
 * The pure-TypeScript Linux backend: reads /proc with asynchronous fs calls
 * (libuv pool), so a walk never blocks the event loop. It parses exactly what the native Linux walker
 * parses (stat by the LAST ')', uid = owner of /proc/PID/stat), so the two
 * agree field for field and either can stand in for the other.
 */
import fs, { promises as fsp } from "node:fs";
import { factsFault } from "./errno.js";
import { isAlive, isDeadState } from "./liveness.js";
import { inspectEach } from "./inspect-many.js";
import { buildSnapshot } from "./snapshot.js";
import { assertEnvKeys, assertPid } from "./validate.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "./types.js";

/** The fields of /proc/PID/stat this project uses. */
export interface ParsedStat {
  pid: number;
  comm: string;
  state: string;
  ppid: number;
  pgid: number;
  sid: number;
  /** field 9, the task's PF_* flags */
  flags: number;
  /** field 22, clock ticks since boot, kept as the kernel's decimal string */
  startTime: string;
}

/** PF_KTHREAD in /proc/PID/stat field 9: a kernel thread. */
export const PF_KTHREAD = 0x00200000;
/** PF_EXITING in /proc/PID/stat field 9: the task is inside exit(2). */
export const PF_EXITING = 0x00000004;

/** The /proc/PID/status lines this project uses; each is undefined when absent or malformed. */
export interface ParsedStatus {
  tgid?: number;
  /** Uid: real, effective */
  realUid?: number;
  effectiveUid?: number;
  threads?: number;
}

/** Parses /proc/PID/status text ("Name:\tvalue" lines) for Tgid, Uid and Threads. */
export function parseStatus(text: string): ParsedStatus {
  const out: ParsedStatus = {};
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon);
    if (name !== "Tgid" && name !== "Uid" && name !== "Threads") continue;
    const vals = line
      .slice(colon + 1)
      .trim()
      .split(/\s+/);
    if (!vals.every((v) => UINT_RE.test(v))) continue;
    if (name === "Tgid" && vals.length === 1) out.tgid = Number(vals[0]);
    else if (name === "Threads" && vals.length === 1) out.threads = Number(vals[0]);
    else if (name === "Uid" && vals.length === 4) {
      out.realUid = Number(vals[0]);
      out.effectiveUid = Number(vals[1]);
    }
  }
  return out;
}

const INT_RE = /^-?\d+$/;
const UINT_RE = /^\d+$/;

/**
 * One synchronous read of /proc/<pid>/stat through parseStat, for code that
 * must not await (a check right before a signal). null when the process is
 * gone or the file is unreadable or malformed.
 */
export function readStatSync(pid: number | "self", procRoot = "/proc"): ParsedStat | null {
  try {
    return parseStat(fs.readFileSync(`${procRoot}/${pid}/stat`, "utf8"));
  } catch {
    return null;
  }
}

/**
 * Parses one /proc/PID/stat line. comm (field 2) may contain anything,
 * including ") (", spaces and newlines, so it is delimited by the first "("
 * and the LAST ")". Returns null for anything truncated or malformed: a
 * half-read stat must never become a half-true ProcessInfo.
 */
export function parseStat(text: string): ParsedStat | null {
  const open = text.indexOf(" (");
  const close = text.lastIndexOf(")");
  if (open <= 0 || close < open) return null;
  const pidText = text.slice(0, open);
  if (!UINT_RE.test(pidText)) return null;
  // after ") " come fields 3.. separated by single spaces
  if (text[close + 1] !== " ") return null;
  const rest = text
    .slice(close + 2)
    .trimEnd()
    .split(" ");
  // rest[0] = field 3 (state) … rest[19] = field 22 (starttime)
  if (rest.length < 20) return null;
  const [state, ppid, pgid, sid] = rest;
  const flags = rest[6]!;
  const startTime = rest[19]!;
  if (state === undefined || !/^[A-Za-z]$/.test(state)) return null;
  if (!INT_RE.test(ppid ?? "") || !INT_RE.test(pgid ?? "") || !INT_RE.test(sid ?? "")) return null;
  if (!UINT_RE.test(flags) || !UINT_RE.test(startTime)) return null;
  return {
    pid: Number(pidText),
    comm: text.slice(open + 2, close),
    state,
    ppid: Number(ppid),
    pgid: Number(pgid),
    sid: Number(sid),
    flags: Number(flags),
    // normalise like the native side does (a double printed as an integer)
    startTime: BigInt(startTime).toString(),
  };
}

/**
 * /proc/PID/cmdline → argv. Arguments are NUL-terminated; the final NUL is a
 * terminator, not an empty last argument. A process that rewrote its argv
 * area may leave no final NUL: the last piece is still an argument.
 */
export function parseCmdline(buf: Buffer): string[] {
  if (buf.length === 0) return [];
  const end = buf[buf.length - 1] === 0 ? buf.length - 1 : buf.length;
  return buf.subarray(0, end).toString("utf8").split("\0");
}

/**
 * /proc/PID/environ → only the requested keys (null when absent). Values are
 * never copied for keys nobody asked for. The first "=" separates key and
 * value, so values may themselves contain "=". An entry without "=" is skipped.
 */
export function parseEnviron(buf: Buffer, keys: readonly string[]): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const k of keys) out[k] = null;
  if (keys.length === 0) return out;
  const wanted = new Set(keys);
  let start = 0;
  while (start < buf.length) {
    let end = buf.indexOf(0, start);
    if (end === -1) end = buf.length;
    const eq = buf.indexOf(0x3d, start); // '='
    if (eq !== -1 && eq < end) {
      const key = buf.subarray(start, eq).toString("utf8");
      // the first occurrence wins, as getenv(3) would see it
      if (wanted.has(key) && out[key] === null) out[key] = buf.subarray(eq + 1, end).toString("utf8");
    }
    start = end + 1;
  }
  return out;
}

/**
 * The options of the mount at /proc from /proc/mounts text, or null when
 * /proc is not mounted. The last matching line wins (it is the one on top).
 */
export function procMountOptions(mounts: string): string[] | null {
  let found: string[] | null = null;
  for (const line of mounts.split("\n")) {
    const f = line.split(" ");
    if (f[1] === "/proc" && f[2] === "proc" && f[3] !== undefined) found = f[3].split(",");
  }
  return found;
}

/** The hidepid= value (e.g. "2", "invisible"), or null when processes are not hidden. */
export function hidepidOf(options: readonly string[]): string | null {
  for (const o of options) {
    if (o.startsWith("hidepid=")) {
      const v = o.slice("hidepid=".length);
      return v === "0" || v === "off" ? null : v;
    }
  }
  return null;
}

/**
 * Reads in flight per snapshot. They run on the libuv pool, not the loop:
 * a /proc read can block for as long as the target task holds its mm lock
 * (the classic "ps hangs" on a process stuck in the kernel), and that must
 * stall a pool thread, never the event loop. 32 keeps the pool busy without
 * letting one snapshot queue thousands of requests ahead of everyone else.
 */
const CONCURRENCY = 32;
const STAT_BUF = 4096;

/** Gone (ENOENT, ESRCH) or hidden from us (EACCES, EPERM, EINVAL): both mean "not readable now". */
function isGoneOrHidden(err: unknown): boolean {
  const f = factsFault(err);
  return f === "missing" || f === "no-process" || f === "denied" || f === "invalid";
}

/**
 * Reads /proc/PID/stat and its owner through one descriptor, so the uid and
 * the text come from the same process even if the pid is reused in between.
 * null when the process is gone or unreadable.
 *
 * Callback fs rather than FileHandle: the same libuv pool work, but about a
 * third of the cost per process (no FileHandle object, no close tracking),
 * which is most of a snapshot's time.
 */
function readStat(pid: number, root: string, buf: Buffer): Promise<{ stat: ParsedStat; owner: number } | null> {
  return new Promise((resolve, reject) => {
    const fail = (err: NodeJS.ErrnoException) => (isGoneOrHidden(err) ? resolve(null) : reject(err));
    fs.open(`${root}/${pid}/stat`, "r", (openErr, fd) => {
      if (openErr) return fail(openErr);
      const done = (err: NodeJS.ErrnoException | null, value: { stat: ParsedStat; owner: number } | null) =>
        fs.close(fd, () => (err ? fail(err) : resolve(value)));
      fs.fstat(fd, (statErr, st) => {
        if (statErr) return done(statErr, null);
        fs.read(fd, buf, 0, buf.length, 0, (readErr, bytesRead) => {
          if (readErr) return done(readErr, null);
          const parsed = parseStat(buf.toString("latin1", 0, bytesRead));
          // a dead ("X") task is gone, like one we could not read at all
          if (parsed === null || parsed.pid !== pid || isDeadState(parsed.state)) return done(null, null);
          done(null, { stat: parsed, owner: st.uid });
        });
      });
    });
  });
}

function toInfo(stat: ParsedStat, uid: number, zombieLeader: boolean): ProcessInfo {
  return {
    pid: stat.pid,
    ppid: stat.ppid,
    pgid: stat.pgid,
    sid: stat.sid,
    uid,
    state: stat.state,
    startTime: stat.startTime,
    kernelThread: (stat.flags & PF_KTHREAD) !== 0,
    zombieLeader,
    exiting: (stat.flags & PF_EXITING) !== 0,
  };
}

async function readStatus(dir: string): Promise<ParsedStatus | null> {
  const b = await readOptional(`${dir}/status`);
  return b === null ? null : parseStatus(b.toString("latin1"));
}

/**
 * Whether a zombie thread-group leader (its main thread called
 * pthread_exit) still has a live thread: one in task/ that is neither a
 * zombie, dead, nor inside exit(2). status "Threads:" counts the leader
 * until it is waited for, so "Threads: 1" (or less) answers no without
 * reading task/. A dying multi-threaded process shows several threads for a
 * moment, all on their way out: that process is not alive. The same rule as
 * native/procfs_linux.cc LiveThreadsBehindZombie.
 */
async function liveThreadsBehindZombie(dir: string, status: ParsedStatus | null): Promise<boolean> {
  if (status?.threads !== undefined && status.threads <= 1) return false;
  const leader = Number(dir.slice(dir.lastIndexOf("/") + 1));
  let tids: string[];
  try {
    tids = await fsp.readdir(`${dir}/task`);
  } catch (err) {
    if (isGoneOrHidden(err)) return false;
    throw err;
  }
  for (const tid of tids) {
    if (Number(tid) === leader) continue;
    const text = await readOptional(`${dir}/task/${tid}/stat`);
    const t = text === null ? null : parseStat(text.toString("latin1"));
    if (t && isAlive({ state: t.state, exiting: (t.flags & PF_EXITING) !== 0 })) return true;
  }
  return false;
}

/** The owner of a /proc/PID directory, or null when it is gone or hidden. */
async function dirOwner(dir: string): Promise<number | null> {
  try {
    return (await fsp.stat(dir)).uid;
  } catch (err) {
    if (isGoneOrHidden(err)) return null;
    throw err;
  }
}

async function readOptional(path: string): Promise<Buffer | null> {
  try {
    return await fsp.readFile(path);
  } catch (err) {
    if (isGoneOrHidden(err)) return null;
    throw err;
  }
}

async function readlinkOptional(path: string): Promise<string | null> {
  try {
    return await fsp.readlink(path);
  } catch (err) {
    // ENAMETOOLONG: the kernel cannot render a path longer than a page. The
    // target is unknown, which is null like any other unreadable exe.
    if (isGoneOrHidden(err) || factsFault(err) === "name-too-long") return null;
    throw err;
  }
}

export interface ProcfsOptions {
  /** mount point to read; tests may point it at a fixture tree */
  root?: string;
}

export function createProcfsFacts(opts: ProcfsOptions = {}): ProcessFacts {
  const root = opts.root ?? "/proc";
  // Both are fixed for the life of this process: read once.
  let hostIds: Promise<{ bootId: string | null; pidNamespace: string | null }> | undefined;
  const ids = () =>
    (hostIds ??= (async () => {
      const boot = await readOptional(`${root}/sys/kernel/random/boot_id`);
      const ns = await readlinkOptional(`${root}/self/ns/pid`);
      return { bootId: boot === null ? null : boot.toString("utf8").trim(), pidNamespace: ns };
    })());

  async function inspect(pid: number, o?: InspectOptions): Promise<ProcessDetails | null> {
    assertPid(pid);
    const envKeys = o?.envKeys ?? [];
    assertEnvKeys(envKeys, "opts.envKeys");
    const buf = Buffer.allocUnsafe(STAT_BUF);
    const before = await readStat(pid, root, buf);
    if (before === null) return null;
    const dir = `${root}/${pid}`;
    const environPath = `${dir}/environ`;
    const [status, exePath, cmdline, environ, host] = await Promise.all([
      readStatus(dir),
      readlinkOptional(`${dir}/exe`),
      readOptional(`${dir}/cmdline`),
      // With no key asked for, nothing is read: an open() answers the permission question alone.
      envKeys.length > 0 ? readOptional(environPath) : canRead(environPath).then((ok) => (ok ? Buffer.alloc(0) : null)),
      ids(),
    ]);
    // /proc/TID answers for any thread; a thread id is not a process (ps and
    // kill(2) semantics aside, it has no start time of its own to lease).
    if (status?.tgid !== undefined && status.tgid !== pid) return null;
    // Re-read: if the pid died or was reused while we read, the pieces above
    // may belong to two different processes. Report "gone" rather than mix them.
    const after = await readStat(pid, root, buf);
    if (after === null || after.stat.startTime !== before.stat.startTime) return null;
    // it may have become a zombie while we read: ask status again then
    const zombieLeader =
      after.stat.state === "Z" &&
      (await liveThreadsBehindZombie(dir, before.stat.state === "Z" ? status : await readStatus(dir)));
    const details: ProcessDetails = {
      ...toInfo(after.stat, status?.effectiveUid ?? after.owner, zombieLeader),
      exePath,
      argv: cmdline === null ? null : parseCmdline(cmdline),
      env: parseEnviron(environ ?? Buffer.alloc(0), envKeys),
      envReadable: environ !== null,
    };
    if (status?.realUid !== undefined && status.effectiveUid !== undefined) details.realUid = status.realUid;
    if (host.bootId !== null) details.bootId = host.bootId;
    if (host.pidNamespace !== null) details.pidNamespace = host.pidNamespace;
    return details;
  }

  const inspectMany = (pids: readonly number[], o?: InspectOptions) => inspectEach(inspect, pids, o, CONCURRENCY / 4);
  return { backend: "procfs", identityStrength: "exact", snapshot: () => snapshotOf(root), inspect, inspectMany };
}

/** Every process under `root` (a /proc mount), read CONCURRENCY at a time. */
async function snapshotOf(root: string): Promise<ProcessSnapshot> {
  const takenAt = Date.now();
  const names = await fsp.readdir(root);
  const pids: number[] = [];
  for (const n of names) if (UINT_RE.test(n)) pids.push(Number(n));
  const infos: ProcessInfo[] = [];
  let next = 0;
  const worker = async () => {
    const buf = Buffer.allocUnsafe(STAT_BUF);
    while (next < pids.length) {
      const pid = pids[next++]!;
      const r = await readStat(pid, root, buf);
      if (r === null) continue;
      const dir = `${root}/${pid}`;
      // a root-owned stat may belong to a non-dumpable process or a zombie:
      // the pid directory's owner is the effective uid either way (native/procfs_linux.cc)
      let uid = r.owner;
      if (uid === 0 && (r.stat.flags & PF_KTHREAD) === 0) {
        const owner = await dirOwner(dir);
        if (owner === null) continue; // gone since its stat was read
        uid = owner;
      }
      // a zombie leader may still have live threads: only then is status read (an
      // exiting leader not yet Z counts as going away, as in native/facts_linux.cc)
      const zombieLeader = r.stat.state === "Z" && (await liveThreadsBehindZombie(dir, await readStatus(dir)));
      infos.push(toInfo(r.stat, uid, zombieLeader));
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, pids.length) }, worker));
  infos.sort((a, b) => a.pid - b.pid);
  return buildSnapshot(takenAt, infos);
}

/** Whether the file could be opened for reading now (used only when no env key was asked for). */
async function canRead(path: string): Promise<boolean> {
  try {
    const fh = await fsp.open(path, "r");
    await fh.close();
    return true;
  } catch {
    return false;
  }
}
