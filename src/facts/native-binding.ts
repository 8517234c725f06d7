/**
 * The typed surface of the C++ addon (node-usb style: one file declares what
 * the native side returns, so no `any` escapes the loader). The native side
 * only marshals plain data; all validation happens in TypeScript before a call.
 *
 * Exception mode: the addon is built with NAPI_CPP_EXCEPTIONS off
 * (NAPI_DISABLE_CPP_EXCEPTIONS) and never throws for OS errors: every
 * OS-level failure is a value (null, a negative errno, or an outcome string).
 * It throws a JS TypeError only when called with wrong argument types, which
 * TS validation rules out.
 */

/**
 * Packed result of a full /proc (or proc_listallpids) walk.
 * `ints` holds `count` records of INT_FIELDS int32 values each:
 *   [pid, ppid, pgid, sid, uid, stateCharCode, flags]
 * where flags holds REC_KERNEL_THREAD | REC_ZOMBIE_LEADER | REC_EXITING.
 * `starts` holds `count` start times (Linux: clock ticks since boot,
 * macOS: microseconds since the epoch) as float64 — exact up to 2^53.
 * `index` holds the pid, ppid and pgid lookup tables the worker built
 * (layout in native/snapshot_index.cc; read by native-snapshot.ts).
 */
export interface NativeSnapshot {
  count: number;
  ints: Int32Array;
  starts: Float64Array;
  index: Int32Array;
}

export const INT_FIELDS = 7;
/** PF_KTHREAD was set in /proc/PID/stat field 9 (mirrors kRecKernelThread in native/facts.h) */
export const REC_KERNEL_THREAD = 1;
/** a thread-group leader in state Z with live threads (mirrors kRecZombieLeader) */
export const REC_ZOMBIE_LEADER = 2;
/** PF_EXITING was set: the task is inside exit(2) (mirrors kRecExiting) */
export const REC_EXITING = 4;

/**
 * One inspected process as the addon packs it (kSlotsFixed in addon.cc):
 * DETAIL_SLOTS numbers in a Float64Array, then one 0/1 per requested key
 * (present or not). Its strings travel separately in one text, each followed
 * by a NUL: the exe path when hasExe, then argc argv elements, then the
 * value of every present key, in key order.
 */
export const SLOT = {
  found: 0,
  pid: 1,
  ppid: 2,
  pgid: 3,
  sid: 4,
  /** effective uid (Linux: "Uid:" in /proc/PID/status; macOS: pbi_uid) */
  uid: 5,
  /** -1 when status could not be read */
  realUid: 6,
  stateCode: 7,
  flags: 8,
  startTime: 9,
  hasExe: 10,
  /** -1 when argv is unreadable */
  argc: 11,
  /** 0 when the environment could not be read at all */
  envReadable: 12,
} as const;
export const DETAIL_SLOTS = 13;

/** What inspectMany resolves with: DETAIL_SLOTS + keys slots per pid, in request order, and their text. */
export interface NativeDetailsBatch {
  slots: Float64Array;
  text: string;
}

export type NativeSignalOutcome = "signalled" | "gone" | "mismatch" | "denied" | "unsupported";

export interface NativeBinding {
  readonly platform: "linux" | "darwin";
  /** Full walk and its indexes, executed on a libuv worker thread (Napi::AsyncWorker). */
  snapshot(): Promise<NativeSnapshot>;
  /**
   * Synchronous single-pid read into `slots` (a Float64Array of at least
   * DETAIL_SLOTS + key count); returns its text, or null when the process
   * does not exist, vanished mid-read, or `pid` is a thread id that is not
   * its process's (Tgid != pid), or -errno when the host refused a read that
   * decides it (EMFILE, ENOMEM, EIO…). `envKeys` is the keys joined by NUL.
   */
  inspect(pid: number, envKeys: string, slots: Float64Array): string | null | number;
  /**
   * The same reads for every pid of `pids` in one worker-thread job; a pid
   * that does not exist has found 0, a refused read -errno. `listed` is
   * InspectOptions.listed: no status read (but for a zombie), realUid -1.
   */
  inspectMany(pids: Int32Array, envKeys: string, listed: boolean): Promise<NativeDetailsBatch>;
  /** Linux: /proc/sys/kernel/random/boot_id; macOS: kern.bootsessionuuid. null when unreadable. */
  bootId(): string | null;
  /** Linux: readlink /proc/self/ns/pid (e.g. "pid:[4026531836]"); macOS: null. */
  pidNamespace(): string | null;
  /**
   * Identity-checked signal. Linux: pidfd_open → re-read start time → compare
   * with expectedStart → pidfd_send_signal. macOS: re-read start time → kill(2).
   */
  signalIfSame(pid: number, expectedStart: number, signal: number): NativeSignalOutcome;
  /** Linux: prctl(PR_SET_CHILD_SUBREAPER, 1). Returns 0 or -errno. macOS: -ENOSYS. */
  setChildSubreaper(): number;
  /** Linux: prctl(PR_SET_PDEATHSIG, signal). Returns 0 or -errno. macOS: -ENOSYS. */
  setParentDeathSignal(signal: number): number;
  /**
   * Linux: unshare(CLONE_NEWCGROUP) for the calling thread (a child it forks
   * afterwards is born in the new namespace). 0 or -errno; macOS: -ENOSYS.
   * Absent from an addon built before it (optional on purpose: such an addon
   * still loads).
   */
  unshareCgroupNamespace?(): number;
  /**
   * waitpid(pid, WNOHANG) on each given pid (zombie children adopted by a
   * subreaper, chosen in TS so the adapter libuv waits for is never stolen).
   * Returns the pids actually reaped.
   */
  reapChildren(pids: number[]): number[];
  /**
   * Linux: a close-on-exec memfd (descriptor >= 10) holding `bytes`, sealed
   * against writes, growth and shrinking, so what is exec'd from it by
   * /proc/self/fd/N is exactly these bytes. Returns the descriptor or
   * -errno. macOS: -ENOSYS.
   */
  sealedCopy(name: string, bytes: Buffer): number;
  /** Linux: prctl(PR_SET_DUMPABLE, on). Returns 0 or -errno. macOS: -ENOSYS. */
  setDumpable(on: boolean): number;
  /** glibc: mallopt(M_MMAP_THRESHOLD, bytes), which also ends its dynamic threshold: 0 or -EINVAL; elsewhere -ENOSYS. */
  setMmapThreshold(bytes: number): number;
  /** glibc malloc_trim(0) on a pool thread: 1 when memory went back to the kernel, 0 when none, -ENOSYS elsewhere */
  trimMalloc(): Promise<number>;
  /** Linux: prctl(PR_GET_DUMPABLE): 1, 0, or -errno. macOS: -ENOSYS. */
  getDumpable(): number;
  /** true when pidfd_open and pidfd_send_signal work on this kernel */
  pidfdSupported(): boolean;
  /**
   * flock(fd, LOCK_EX | LOCK_NB) on a descriptor Node opened: 0, or -errno
   * (-EWOULDBLOCK / -EAGAIN: another open file description holds it). The
   * lock lives as long as the descriptor; the kernel drops it when the
   * holder dies.
   */
  lockExclusive(fd: number): number;
  /**
   * Linux: a non-blocking, close-on-exec Unix socket connected to
   * `<dir>/<name>` (through /proc/self/fd, so no path length limit), and the
   * pid and uid of the process that listens on it (SO_PEERCRED); or -errno.
   * Absent from an addon built before it. macOS: -ENOSYS.
   */
  connectAttach?(dir: string, name: string): { fd: number; pid: number; uid: number } | number;
  /**
   * CLOCK_THREAD_CPUTIME_ID of the calling thread in nanoseconds (-1 when
   * unreadable): what a call cost this thread, without the time a busy host
   * gave to other threads. The benches measure the main thread with it.
   */
  threadCpuTimeNs(): number;
  /**
   * open(O_NOFOLLOW|O_NONBLOCK) + fstat + read + close of each state-dir
   * file, in order, in one worker-thread job; one result per path. Never
   * rejects: an OS failure is `err` (-errno) at `step`; the stat fields are
   * set once fstat succeeded, `text` only for a regular file of at most
   * maxBytes (`tooLarge` when it grew past them).
   */
  readSmallFiles(paths: readonly string[], maxBytes: number): Promise<NativeFileRead[]>;
  /**
   * tmp (exclusive, 0600, no symlink) + write + fsync + close + rename onto
   * target + fsync(dir), the fsyncs only when durable, in one worker-thread
   * job. Never rejects: `err` is 0 or -errno at `step`; a failure before the
   * rename has removed tmp.
   */
  replaceFile(
    dir: string,
    tmp: string,
    target: string,
    data: string,
    durable: boolean,
  ): Promise<{ err: number; step: FileStep }>;
  /**
   * unlink(target) + fsync(dir), the fsync only when durable, in one
   * worker-thread job. Never rejects: `err` is 0 or -errno at `step`; a
   * target already gone is not an error.
   */
  removeFile(dir: string, target: string, durable: boolean): Promise<{ err: number; step: FileStep }>;
  /**
   * replaceFile(dir, tmp, target, data, durable), then, once it succeeded,
   * removeFile(fromDir, from, durable), in one worker-thread job. Never
   * rejects: `err` is 0 or -errno at `step` of the replacement, or of the
   * removal when `removing` (the new copy is then in place, the old one may
   * be too).
   */
  moveFile(
    dir: string,
    tmp: string,
    target: string,
    data: string,
    durable: boolean,
    fromDir: string,
    from: string,
  ): Promise<{ err: number; step: FileStep; removing: boolean }>;
  /**
   * `rel` (normalised, relative; "" is the root) read beneath the folder
   * `root` whose identity is rootDev/rootIno, in one worker-thread job that
   * never blocks on the file (native/beneath_posix.cc): openat2
   * RESOLVE_BENEATH, or a no-symlink walk when `walkOnly` or openat2 is
   * missing; only a regular file of at most maxBytes is opened and read.
   * Never rejects: an OS failure is `err` (-errno) at `step`.
   */
  readBeneath(
    root: string,
    rootDev: bigint,
    rootIno: bigint,
    rel: string,
    walkOnly: boolean,
    maxBytes: number,
  ): Promise<NativeBeneathResult>;
  /**
   * `data` written to `rel` beneath `root`, resolved as readBeneath does: an
   * existing regular file truncated and rewritten (nothing else is opened
   * for writing), a missing one created exclusively, its missing folders
   * first. Never rejects.
   */
  writeBeneath(
    root: string,
    rootDev: bigint,
    rootIno: bigint,
    rel: string,
    walkOnly: boolean,
    data: Buffer,
  ): Promise<NativeBeneathResult>;
}

/** Where a confined file job stopped (mirrors kBeneath* in native/beneath.h). */
export const BENEATH_STEP = {
  root: 0,
  rootMoved: 1,
  resolve: 2,
  type: 3,
  tooLarge: 4,
  open: 5,
  io: 6,
  mkdir: 7,
  done: 8,
} as const;
export type BeneathStep = (typeof BENEATH_STEP)[keyof typeof BENEATH_STEP];
/** How a confined job resolved its path (mirrors kHow* in native/beneath.h; 0 before it got there). */
export const BENEATH_HOW = { openat2: 1, walk: 2 } as const;

export interface NativeBeneathResult {
  err: number;
  step: BeneathStep;
  how: number;
  /** st_mode of the resolved file, once known */
  mode: number;
  size: number;
  created: boolean;
  /** a read's bytes (empty otherwise) */
  data: Buffer;
}

/** Which syscall a file job stopped at (mirrors kStep* in native/facts.h). */
export const FILE_STEP = {
  open: 0,
  stat: 1,
  read: 2,
  write: 3,
  sync: 4,
  close: 5,
  rename: 6,
  dirSync: 7,
  unlink: 8,
  dirOpen: 9,
} as const;
export type FileStep = (typeof FILE_STEP)[keyof typeof FILE_STEP];

export interface NativeFileRead {
  err: number;
  step: FileStep;
  regular: boolean;
  tooLarge: boolean;
  ino: number;
  dev: number;
  mode: number;
  uid: number;
  size: number;
  mtimeMs: number;
  text: string;
}
