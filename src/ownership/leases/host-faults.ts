/**
 * What a failing host does to a gateway, named (docs/host-faults.md): the
 * one place an errno from the disk or from a spawn becomes a
 * typed error that says which resource ran out and where its limit can be
 * read. Three kinds:
 *
 * - LeaseRecordWriteError: a lease record could not be written (the disk is
 *   full, read-only, failing, the state dir was removed or is not ours to
 *   write). Writes are temp + rename, so the record on disk is the one
 *   before the write, never a torn one. The lifecycle keeps ending verified
 *   trees through it and leaves the settlement pending (lifecycle.ts).
 * - HostResourceError: a spawn failed because the host ran out of something
 *   (descriptors, the file table, processes or threads, memory, space).
 * - CwdUnusableError: the working directory asked for cannot be used; checked
 *   before any lease or cgroup is made.
 *
 * Limits are read when the error is made (synchronously: an error path,
 * small files), so the message carries the number that was hit.
 */
import { accessSync, closeSync, constants, openSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** errno codes that mean "the record could not be written", not "the code is wrong". */
const RECORD_WRITE_CODES: ReadonlySet<string> = new Set([
  "ENOSPC",
  "EDQUOT",
  "EROFS",
  "EIO",
  "EACCES",
  "EPERM",
  "ENOENT",
  "ENOTDIR",
  "EMFILE",
  "ENFILE",
  "ENOMEM",
]);

/**
 * What an errno means to ownership and every layer above it (supervisor,
 * acpx, the CLI, the plugin): the one map they read; facts and containment
 * keep their own (facts/errno.ts, containment/errors.ts). A closed union,
 * so comparing a HostFault with an errno name fails to type-check;
 * test/architecture.test.ts finds an errno named outside the maps.
 */
export type HostFault =
  | "missing" // ENOENT
  | "not-a-directory" // ENOTDIR
  | "exists" // EEXIST
  | "no-access" // EACCES
  | "not-permitted" // EPERM
  | "busy" // EBUSY, ENOTEMPTY (an rmdir of a folder in use or not empty)
  | "link" // ELOOP, EMLINK (O_NOFOLLOW met a symlink)
  | "invalid" // EINVAL
  | "is-a-directory" // EISDIR
  | "bad-descriptor" // EBADF
  | "try-again" // EAGAIN
  | "broken-pipe" // EPIPE
  | "other";

const HOST_FAULTS: Readonly<Record<string, HostFault>> = Object.freeze({
  ENOENT: "missing",
  ENOTDIR: "not-a-directory",
  EEXIST: "exists",
  EACCES: "no-access",
  EPERM: "not-permitted",
  EBUSY: "busy",
  ENOTEMPTY: "busy",
  ELOOP: "link",
  EMLINK: "link",
  EINVAL: "invalid",
  EISDIR: "is-a-directory",
  EBADF: "bad-descriptor",
  EAGAIN: "try-again",
  EPIPE: "broken-pipe",
});

/** The fault an errno name stands for ("other" for none or an unknown one). */
export function hostFaultOfCode(code: string | undefined): HostFault {
  return (code !== undefined && Object.hasOwn(HOST_FAULTS, code) ? HOST_FAULTS[code] : undefined) ?? "other";
}

/** The fault of a thrown error, by its errno `code`. */
export function hostFault(err: unknown): HostFault {
  return hostFaultOfCode(errnoCode(err));
}

export function errnoCode(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === "string" ? c : undefined;
}

/** One clause naming what a write failure means for a state dir. */
export function describeRecordWrite(code: string, stateDir: string): string {
  switch (code) {
    case "ENOSPC":
      return `no space left on the filesystem holding the state dir ${stateDir}`;
    case "EDQUOT":
      return `the disk quota of uid ${process.getuid?.() ?? "?"} on the filesystem holding ${stateDir} is used up`;
    case "EROFS":
      return `the filesystem holding the state dir ${stateDir} is read-only`;
    case "EIO":
      return `an I/O error on the filesystem holding the state dir ${stateDir}`;
    case "EACCES":
    case "EPERM":
      return `the state dir ${stateDir} is not writable by uid ${process.getuid?.() ?? "?"} (${code})`;
    case "ENOENT":
    case "ENOTDIR":
      return `the state dir ${stateDir} (or its acpx/leases folder) no longer exists: was it removed under the running gateway?`;
    case "EMFILE":
      return `this process has no descriptor left for a file under ${stateDir} (${describeNofile()})`;
    case "ENFILE":
      return `the system's file table is full (${describeFileMax()})`;
    case "ENOMEM":
      return "the kernel had no memory for the write";
    default:
      return `${code} writing under ${stateDir}`;
  }
}

/** A lease record that could not be written. The file on disk is the one before the write. */
export class LeaseRecordWriteError extends Error {
  override name = "LeaseRecordWriteError";
  constructor(
    readonly stateDir: string,
    readonly path: string,
    readonly code: string,
    /** what was being written: create, update, transition */
    readonly op: string,
    cause: unknown,
  ) {
    super(
      `the lease record ${path} could not be ${op === "read" ? "read" : `written (${op})`}: ${code}: ${describeRecordWrite(code, stateDir)}; the record on disk is as it was before, never half-written`,
      { cause },
    );
  }
}

/** The store's write failed for a reason of the host (see RECORD_WRITE_CODES): a LeaseRecordWriteError, else the error as it was. */
export function asRecordWriteError(err: unknown, stateDir: string, path: string, op: string): unknown {
  if (err instanceof LeaseRecordWriteError) return err;
  const code = errnoCode(err);
  return code !== undefined && RECORD_WRITE_CODES.has(code)
    ? new LeaseRecordWriteError(stateDir, path, code, op, err)
    : err;
}

/** "; <what the errno means for the state dir>" for an error the host caused (RECORD_WRITE_CODES), else "". */
export function hostFaultNote(err: unknown, stateDir: string): string {
  const code = errnoCode(err);
  return code !== undefined && RECORD_WRITE_CODES.has(code) ? `; ${describeRecordWrite(code, stateDir)}` : "";
}

export function isRecordWriteBlocked(err: unknown): err is LeaseRecordWriteError {
  return err instanceof LeaseRecordWriteError;
}

// ------------------------------------------------------------------ spawn resources

export type HostResource = "descriptors" | "file-table" | "processes" | "memory" | "disk";

/** A spawn the host could not make: which resource, which limit (with its value), and where to read it. */
export class HostResourceError extends Error {
  override name = "HostResourceError";
  constructor(
    readonly code: string,
    readonly resource: HostResource,
    /** the limit that was hit, with its value where it can be read ("RLIMIT_NOFILE soft 128, hard 128") */
    readonly limit: string,
    /** where an operator reads it */
    readonly readAt: string,
    what: string,
    cause?: unknown,
  ) {
    super(
      `${what}: ${code}: ${RESOURCE_WORDS[resource]}: ${limit} (read at ${readAt})`,
      cause === undefined ? undefined : { cause },
    );
  }
}

const RESOURCE_WORDS: Readonly<Record<HostResource, string>> = {
  descriptors: "this process ran out of file descriptors",
  "file-table": "the system's open-file table is full",
  processes: "could not create a process or thread: the pids/threads limit",
  memory: "could not get memory for a new process",
  disk: "no space left on a device the spawn needed",
};

/** The typed error for a spawn that failed on a host limit (EMFILE, ENFILE, EAGAIN, ENOMEM, ENOSPC); null for any other failure. */
export function hostResourceError(err: unknown, what: string): HostResourceError | null {
  const code = errnoCode(err);
  switch (code) {
    case "EMFILE":
      return new HostResourceError(
        code,
        "descriptors",
        describeNofile(),
        `/proc/${process.pid}/limits ("Max open files"), ulimit -n`,
        what,
        err,
      );
    case "ENFILE":
      return new HostResourceError(
        code,
        "file-table",
        describeFileMax(),
        "/proc/sys/fs/file-nr, /proc/sys/fs/file-max",
        what,
        err,
      );
    case "EAGAIN":
      return processLimitError(what, err);
    case "ENOMEM":
      return new HostResourceError(
        code,
        "memory",
        describeMemoryLimit(),
        "/proc/meminfo, the cgroup's memory.max",
        what,
        err,
      );
    case "ENOSPC":
      return new HostResourceError(
        code,
        "disk",
        "a full filesystem (or an exhausted kernel table: pid namespace, inotify)",
        "df, /proc/sys/kernel/pid_max",
        what,
        err,
      );
    default:
      return null;
  }
}

/** Host limits a dead or stalled process names on its stderr, checked in this order. */
const LIMITS_IN_TEXT: ReadonlyArray<readonly [string, RegExp]> = [
  ["EMFILE", /EMFILE|Too many open files/],
  ["ENFILE", /ENFILE|file table overflow/i],
  ["ENOMEM", /ENOMEM|Cannot allocate memory|heap out of memory/i],
];

/** The typed error for the first descriptor, file-table or memory limit that `text` (a stderr) names; null for none. */
export function hostResourceErrorInText(text: string, what: string): HostResourceError | null {
  for (const [code, seen] of LIMITS_IN_TEXT) if (seen.test(text)) return hostResourceError({ code }, what);
  return null;
}

/**
 * Whether this process can open a descriptor right now: the typed error
 * when it cannot (EMFILE, ENFILE), else null. For a read that answered
 * "nothing there" under a descriptor limit (a /proc read that could not even
 * open its file reads like a process that is gone).
 */
export function descriptorShortage(what: string): HostResourceError | null {
  let fd: number | undefined;
  try {
    fd = openSync("/dev/null", "r");
    return null;
  } catch (e) {
    return hostResourceError(e, what);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** EAGAIN from fork/clone/pthread_create: the tightest pids.max above this process, RLIMIT_NPROC and threads-max. */
export function processLimitError(what: string, cause?: unknown, pid?: number): HostResourceError {
  const pids = tightestPidsMax(pid) ?? tightestPidsMax();
  const nproc = readLimit("Max processes");
  const parts = [
    pids ? `pids.max ${pids.max} of cgroup ${pids.path} (pids.current ${pids.current})` : null,
    nproc ? `RLIMIT_NPROC soft ${nproc.soft}, hard ${nproc.hard}` : null,
    `kernel.threads-max ${readText("/proc/sys/kernel/threads-max") ?? "?"}`,
  ].filter((p): p is string => p !== null);
  const readAt = [
    pids ? `${pids.path}/pids.max` : null,
    `/proc/${process.pid}/limits ("Max processes")`,
    "/proc/sys/kernel/threads-max",
  ]
    .filter((p) => p !== null)
    .join(", ");
  return new HostResourceError("EAGAIN", "processes", parts.join("; "), readAt, what, cause);
}

function describeNofile(): string {
  const l = readLimit("Max open files");
  return l ? `RLIMIT_NOFILE soft ${l.soft}, hard ${l.hard}` : "RLIMIT_NOFILE";
}

function describeFileMax(): string {
  const nr = readText("/proc/sys/fs/file-nr")?.split(/\s+/);
  return `fs.file-max ${readText("/proc/sys/fs/file-max") ?? "?"}${nr?.[0] ? ` (${nr[0]} open)` : ""}`;
}

function describeMemoryLimit(): string {
  const avail = /MemAvailable:\s+(\d+) kB/.exec(readText("/proc/meminfo") ?? "")?.[1];
  const as = readLimit("Max address space");
  return (
    [avail ? `MemAvailable ${avail} kB` : null, as ? `RLIMIT_AS soft ${as.soft}` : null]
      .filter((x) => x !== null)
      .join("; ") || "memory"
  );
}

/**
 * /proc/self/limits as last read: read again for each error (a limit can be
 * changed under a running process, prlimit --pid), but when the read itself
 * fails (EMFILE: it needs a descriptor too) the last good copy answers.
 */
let limitsText = readText("/proc/self/limits") ?? "";

function readLimit(name: string): { soft: string; hard: string } | null {
  limitsText = readText("/proc/self/limits") ?? limitsText;
  const line = limitsText.split("\n").find((l) => l.startsWith(name));
  if (!line) return null;
  const f = line.slice(name.length).trim().split(/\s+/);
  return f.length >= 2 ? { soft: f[0]!, hard: f[1]! } : null;
}

/**
 * Whether a pids cgroup above `pid` (default: this process) is at its
 * pids.max now: a process that stalls or dies before it can report, in a
 * cgroup with no task left, could not make its threads.
 */
export function pidsLimitReached(pid?: number): boolean {
  const t = tightestPidsMax(pid);
  return t !== null && Number(t.current) >= t.max;
}

/** The pids cgroup above `pid` (default: this process) with the lowest pids.max (v2 first, then v1), or null when none limits it. */
function tightestPidsMax(pid?: number): { path: string; max: number; current: string } | null {
  const cgroups = readText(`/proc/${pid ?? "self"}/cgroup`) ?? "";
  const mounts = (readText("/proc/self/mountinfo") ?? "").split("\n").map((l) => l.split(" "));
  const candidates: string[] = [];
  for (const line of cgroups.split("\n")) {
    const [, ctrls, path] = line.split(":");
    if (path === undefined) continue;
    const isV2 = ctrls === "";
    if (!isV2 && !ctrls!.split(",").includes("pids")) continue;
    const mount = mounts.find((f) => {
      const sep = f.indexOf("-");
      return (
        sep > 0 &&
        (isV2 ? f[sep + 1] === "cgroup2" : f[sep + 1] === "cgroup" && (f[sep + 3] ?? "").split(",").includes("pids"))
      );
    });
    if (!mount) continue;
    let p = path;
    for (;;) {
      candidates.push(join(mount[4]!, p));
      if (p === "/" || p === "") break;
      p = p.slice(0, p.lastIndexOf("/")) || "/";
    }
  }
  let best: { path: string; max: number; current: string } | null = null;
  for (const c of candidates) {
    const max = readText(join(c, "pids.max"));
    if (max === null || max === "max") continue;
    const n = Number(max);
    if (Number.isFinite(n) && (best === null || n < best.max))
      best = { path: c, max: n, current: readText(join(c, "pids.current")) ?? "?" };
  }
  return best;
}

function readText(p: string): string | null {
  try {
    return readFileSync(p, "utf8").trim();
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------ cwd

/** A working directory that cannot be used, named with why. */
export class CwdUnusableError extends Error {
  override name = "CwdUnusableError";
  constructor(
    readonly path: string,
    /** ENOENT, ENOTDIR, EACCES, … */
    readonly code: string,
    why: string,
  ) {
    super(`cwd ${JSON.stringify(path)} cannot be used: ${why}; nothing was started`);
  }
}

/**
 * The cwd must exist, be a directory, and be searchable by this uid (a
 * spawn's chdir needs X; a gateway and its adapters also list it, so R too).
 * Checked before anything is made: a bad cwd would otherwise surface as the
 * executable's spawn error ("spawn node ENOENT").
 */
export function checkCwd(path: string): void {
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = errnoCode(e) ?? "error";
    throw new CwdUnusableError(
      path,
      code,
      code === "ENOENT"
        ? "it does not exist"
        : code === "ENOTDIR"
          ? "a part of it is not a directory"
          : `${code}: ${(e as Error).message}`,
    );
  }
  if (!st.isDirectory()) throw new CwdUnusableError(path, "ENOTDIR", "it is not a directory");
  try {
    accessSync(path, constants.R_OK | constants.X_OK);
  } catch (e) {
    throw new CwdUnusableError(
      path,
      errnoCode(e) ?? "EACCES",
      `uid ${process.getuid?.() ?? "?"} may not enter and read it (${errnoCode(e) ?? "EACCES"})`,
    );
  }
}
