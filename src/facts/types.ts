/**
 * The public shape of live process facts (docs/process-facts.md). Every backend
 * (native, procfs, ps, none) implements `ProcessFacts`; callers above this
 * layer never learn which one answered except through `backend` and
 * `identityStrength`.
 */

export type FactsBackend = "native" | "procfs" | "ps" | "none";

/**
 * "exact": start time is unique per process (Linux clock ticks since boot,
 * qualified by boot id; macOS microseconds). "coarse": `ps lstart`, one-second
 * resolution. "none": nothing can be verified.
 */
export type IdentityStrength = "exact" | "coarse" | "none";

/**
 * `state` and `startTime` are plain strings on purpose: the contract fixes
 * them so for users (a user compares `state` with "Z"), and these same
 * records reach users (getProcessFacts, verifyOwnedTree's tree). An opaque
 * type would break that, and a branded `string & {…}` still compares with a
 * letter, so it would guard nothing. Their homes (liveness.ts reads a state,
 * identity.ts compares start times) are held instead by the architecture
 * test, which asks the checker for these two declarations behind any
 * spelling in src/ (docs/architecture.md, "What enforces each rule").
 */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  /**
   * The effective uid. Linux snapshots read it from the owner of
   * /proc/PID/stat, which is root for a non-dumpable process and a zombie;
   * for such a root-owned stat of a process that is not a kernel thread they
   * ask the owner of the /proc/PID directory, which the kernel keeps at the
   * effective uid. inspect always reads status. See docs/process-facts.md
   * ("Which uid").
   */
  uid: number;
  /** kernel state letter; "Z" = zombie (but see zombieLeader). Dead ("X") records are never reported. */
  state: string;
  /** decimal string; its unit depends on the backend (see identityStrength) */
  startTime: string;
  /** Linux: a kernel thread (PF_KTHREAD; `ps`: pid 2 and its children). Never a lease's process. */
  kernelThread?: boolean;
  /**
   * state "Z", yet ALIVE: a thread-group leader whose main thread exited
   * (pthread_exit) while other threads run on. A signal to its pid reaches
   * them; exe, argv and environment are no longer readable.
   */
  zombieLeader?: boolean;
  /**
   * PF_EXITING (Linux): the task is inside exit(2); argv, environ and exe may
   * already read as gone while the state is still R or D. Unless zombieLeader
   * (other threads run on), the process is going away: liveness.ts counts it
   * as gone. Absent where a backend cannot tell.
   */
  exiting?: boolean;
}

export interface ProcessDetails extends ProcessInfo {
  /**
   * The real uid, where the backend can read it (Linux: "Uid:" in
   * /proc/PID/status; macOS native: pbi_ruid). `uid` is always the effective uid.
   */
  realUid?: number;
  /** null = unreadable (permission, kernel thread) — never guessed.
   *  A Linux exe whose file was unlinked keeps the kernel's " (deleted)" suffix:
   *  it names what was executed, and never equals a live path. */
  exePath: string | null;
  /** the real argv (NUL-split), not a re-joined string; null = unreadable */
  argv: string[] | null;
  /** ONLY the requested keys; null = absent or unreadable */
  env: Record<string, string | null>;
  /** true when the environment itself could be read (so a null value means "absent", not "unknown") */
  envReadable?: boolean;
  bootId?: string;
  pidNamespace?: string;
}

export interface ProcessSnapshot {
  /** Date.now() when the walk started */
  readonly takenAt: number;
  readonly processes: ReadonlyMap<number, ProcessInfo>;
  /** O(1) per call: the index is built once per snapshot */
  childrenOf(pid: number): readonly ProcessInfo[];
  groupMembers(pgid: number): readonly ProcessInfo[];
}

export interface InspectOptions {
  envKeys?: readonly string[];
  /**
   * Every pid was listed by a snapshot (which lists only thread-group
   * leaders), and the caller compares each answer's start time with that
   * record. Then the thread-or-leader question and the real uid need not be
   * asked: the native Linux backend skips /proc/PID/status (about a third of
   * an inspect's kernel time; a zombie's is still read), `uid` is still the
   * effective uid, and `realUid` is absent. Other backends read everything
   * anyway. A pid that is not a leader may then be answered for its thread:
   * only the start-time comparison tells it apart, so never pass this
   * without one.
   */
  listed?: boolean;
}

export interface ProcessFacts {
  readonly backend: FactsBackend;
  readonly identityStrength: IdentityStrength;
  /** Every visible process with the cheap fields. Must not block the event loop. */
  snapshot(): Promise<ProcessSnapshot>;
  /** One process in depth; null when it does not exist (or is gone mid-read). */
  inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null>;
  /**
   * inspect for many pids at once: one result per pid, in order, each
   * independent of the others (null for a pid that does not exist or is
   * gone mid-read, never an error for the batch). The native backend reads
   * them in worker-thread jobs (one per core for a large batch); procfs and
   * ps loop over inspect.
   * Every pid is validated first, as inspect does; an empty list gives [].
   * It rejects only when the facts themselves fail (the none backend, ps
   * that cannot run): then nothing about any pid is known.
   */
  inspectMany(pids: readonly number[], opts?: InspectOptions): Promise<Array<ProcessDetails | null>>;
}

/**
 * Outcome of one identity-checked signal. Typed, never a bare boolean
 * (psutil's NoSuchProcess / AccessDenied, but as values):
 * - signalled: the process we meant received the signal
 * - gone: no such process (or it exited between check and send)
 * - mismatch: the pid now belongs to a different process (start time differs)
 * - denied: EPERM
 * - unsupported: this host/backend cannot signal with an identity check
 * - unknown: identity could not be established (fail closed: nothing was sent)
 * - refused: the guards (guards.ts) forbid this pid (init, ourselves, an
 *   ancestor, …): nothing was sent
 */
export type SignalOutcome = "signalled" | "gone" | "mismatch" | "denied" | "unsupported" | "unknown" | "refused";

/**
 * Sends a signal to `pid` only if its start time is still `expectedStartTime`.
 * On Linux with the addon: pidfd_open, re-read start time, pidfd_send_signal
 * (race-free). Elsewhere: re-inspect then kill(2), with a documented window.
 */
export interface ProcessSignaller {
  /** true when the check and the send cannot be separated by a pid reuse */
  readonly raceFree: boolean;
  signal(pid: number, expectedStartTime: string, signal: NodeJS.Signals): Promise<SignalOutcome>;
}
