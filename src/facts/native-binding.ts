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
 */
export interface NativeSnapshot {
  count: number;
  ints: Int32Array;
  starts: Float64Array;
}

export const INT_FIELDS = 7;
/** PF_KTHREAD was set in /proc/PID/stat field 9 (mirrors kRecKernelThread in native/facts.h) */
export const REC_KERNEL_THREAD = 1;
/** a thread-group leader in state Z with live threads (mirrors kRecZombieLeader) */
export const REC_ZOMBIE_LEADER = 2;
/** PF_EXITING was set: the task is inside exit(2) (mirrors kRecExiting) */
export const REC_EXITING = 4;

/**
 * What inspect returns: a flat array, so the addon sets slots by index and
 * creates no property names per call (native.ts builds ProcessDetails).
 * realUid is -1 when status could not be read; stateCode is the kernel
 * state letter's char code; flags holds REC_* bits; envValues has one slot
 * per requested key, in request order, null when absent.
 */
export type NativeDetails = [
  pid: number,
  ppid: number,
  pgid: number,
  sid: number,
  /** effective uid (Linux: "Uid:" in /proc/PID/status; macOS: pbi_uid) */
  uid: number,
  realUid: number,
  stateCode: number,
  flags: number,
  startTime: number,
  /** null when unreadable */
  exePath: string | null,
  argv: string[] | null,
  /** false when the environment could not be read at all */
  envReadable: boolean,
  ...envValues: Array<string | null>,
];

/** index of the first env value in NativeDetails */
export const DETAILS_ENV = 12;

export type NativeSignalOutcome = "signalled" | "gone" | "mismatch" | "denied" | "unsupported";

export interface NativeBinding {
  readonly platform: "linux" | "darwin";
  /**
   * Full walk, executed on a libuv worker thread (Napi::AsyncWorker).
   * uidFromStatus (Linux): processes whose /proc/PID/stat is owned by root
   * take their effective uid from /proc/PID/status (non-dumpable processes
   * show root as the owner of their /proc files). Ignored on macOS.
   */
  snapshot(uidFromStatus?: boolean): Promise<NativeSnapshot>;
  /**
   * Synchronous single-pid read; null when the process does not exist,
   * vanished mid-read, or `pid` is a thread id that is not its process's
   * (Tgid != pid).
   */
  inspect(pid: number, envKeys: string[]): NativeDetails | null;
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
   * waitpid(pid, WNOHANG) on each given pid (zombie children adopted by a
   * subreaper, chosen in TS so the adapter libuv waits for is never stolen).
   * Returns the pids actually reaped.
   */
  reapChildren(pids: number[]): number[];
  /** true when pidfd_open and pidfd_send_signal work on this kernel */
  pidfdSupported(): boolean;
  /**
   * flock(fd, LOCK_EX | LOCK_NB) on a descriptor Node opened: 0, or -errno
   * (-EWOULDBLOCK / -EAGAIN: another open file description holds it). The
   * lock lives as long as the descriptor; the kernel drops it when the
   * holder dies.
   */
  lockExclusive(fd: number): number;
}
