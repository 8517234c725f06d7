/**
 * The supervisor's public shapes (docs/supervisor.md; OpenClaw's names;
 * its names are kept). Process-local on purpose: nothing here imports agent
 * or session types, so the supervisor can sit under any caller.
 */

export type RunState = "starting" | "running" | "exiting" | "exited";

/**
 * Why a run ended. When several apply, priority is
 * forced (`manual-cancel`) > deadline (`overall-timeout`, `no-output-timeout`)
 * > `signal` > `exit`. `spawn-error` means the OS never started the program.
 */
export type TerminationReason =
  "manual-cancel" | "overall-timeout" | "no-output-timeout" | "spawn-error" | "signal" | "exit";

/** The stdin of a run, as the supervisor hands it out: process-local, no agent types. */
export interface ManagedRunStdin {
  /** Writes bytes/text; on a PTY the terminal's line discipline applies. */
  write(data: string | Uint8Array): void;
  /** Pipes: closes the write end. PTYs: sends EOT (`\x04`, Ctrl-D). */
  end(): void;
  readonly destroyed: boolean;
}

export type StdinMode = "inherit" | "pipe-open" | "pipe-closed";

interface SpawnCommon {
  /** Caller-chosen id; a random UUID when absent. Must be unique among live runs. */
  runId?: string;
  sessionId: string;
  backendId: string;
  /** Runs sharing a scope can be cancelled together (`cancelScope`). */
  scopeKey?: string;
  /**
   * Cancel the scope's live runs (reason `manual-cancel`) before spawning
   * this one, runs still starting included (they end before or as soon as
   * their process exists). Of several replacements of one scope, the last
   * `spawn` call is the only one that can survive.
   */
  replaceExistingScope?: boolean;
  cwd?: string;
  /** Full environment of the child; defaults to `process.env`. */
  env?: Record<string, string | undefined>;
  /** Overall deadline in ms; absent, 0 or negative = none. */
  timeoutMs?: number;
  /**
   * Deadline between two output chunks in ms; resets on every chunk; absent or
   * 0 = disabled. Resolved by the watchdog's one resolver
   * (`resolveRunNoOutputTimeoutMs`): never under WATCHDOG_MIN_TIMEOUT_MS and,
   * with a `timeoutMs`, kept below it so `no-output-timeout` can fire first.
   */
  noOutputTimeoutMs?: number;
  /** Keep stdout/stderr in the RunExit (default true). Capped: see `maxOutputChars`. */
  captureOutput?: boolean;
  /**
   * Characters of each captured stream kept for this run (the tail, cut on a
   * code-point boundary); an integer >= 1. Default: the supervisor's
   * `maxOutputChars`.
   */
  maxOutputChars?: number;
  onStdout?: (chunk: string) => void;
  onStderr?: (chunk: string) => void;
  /**
   * A background run outlives the call that started it. With a supervisor
   * `stateDir`, background runs get a lease (restart durability); foreground
   * runs never do (their caller awaits them, so a gateway crash ends the
   * caller too and the reconciliation of the lease would kill nothing useful).
   */
  background?: boolean;
}

export interface SpawnChildInput extends SpawnCommon {
  mode: "child";
  /** argv[0] is the program (PATH lookup), the rest its arguments; never joined into a shell string. */
  argv: readonly string[];
  /** Written to stdin before it is closed (or left open with `pipe-open`). */
  input?: string;
  /** Default `pipe-closed`: a detached child must never compete for the gateway's terminal. */
  stdinMode?: StdinMode;
  /**
   * A leased run whose root keeps its tree while a durable session waits for
   * a re-adoption, and ends it itself when that session ends (an ACP
   * terminal of a durable session, under its terminal holder): its lease
   * says so (`durable`), and reconciles spare its tree while it verifies.
   */
  durable?: { reattachWithinMs: number };
}

export interface SpawnPtyInput extends SpawnCommon {
  mode: "pty";
  /**
   * The exact command line handed to `/bin/sh -c` inside the terminal. It is
   * used literally (quotes, `$`, unicode untouched) and never rebuilt from
   * an argv; an empty or whitespace-only command is rejected.
   */
  ptyCommand: string;
  cols?: number;
  rows?: number;
}

export type SpawnInput = SpawnChildInput | SpawnPtyInput;

export interface RunExit {
  reason: TerminationReason;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  durationMs: number;
  stdout: string;
  stderr: string;
  /** true for both deadlines (`overall-timeout` and `no-output-timeout`), as OpenClaw sets it; `reason` tells which */
  timedOut: boolean;
  /** true only for `no-output-timeout` */
  noOutputTimedOut: boolean;
}

export interface ManagedRun {
  readonly runId: string;
  /** absent when no process was ever started (a run cancelled while it was starting) */
  readonly pid?: number;
  readonly startedAtMs: number;
  readonly stdin?: ManagedRunStdin;
  /** Resolves once the root exited and any tree kill started for it has finished. */
  wait(): Promise<RunExit>;
  /** Requests termination of the whole tree (TERM, grace, KILL). Default reason `manual-cancel`. */
  cancel(reason?: TerminationReason): void;
}

export interface RunRecord {
  runId: string;
  sessionId: string;
  backendId: string;
  mode: "child" | "pty";
  scopeKey?: string;
  pid?: number;
  processGroupId?: number;
  /** Present when the run is covered by a lease (background + stateDir). */
  leaseId?: string;
  /**
   * The root's start time (the facts backend's unit), read right after the
   * spawn while the process at that pid provably was this run's child. Every
   * tree kill of the root is bound to it (a reused pid is never signalled).
   */
  rootStartTime?: string;
  /**
   * Why the root's start time could not be read: no tree kill is then sent
   * for the root, only the guarded signal through the unreaped child handle.
   */
  rootIdentityUnavailable?: string;
  state: RunState;
  createdAtMs: number;
  startedAtMs: number;
  updatedAtMs: number;
  lastOutputAtMs: number;
  /**
   * While the run is `exiting`: the reason it was asked to stop with (the
   * strongest, when several were), set the moment it was asked, starting runs
   * included. Once `exited`: the reason it ended with.
   */
  terminationReason?: TerminationReason;
  exitCode?: number | null;
  exitSignal?: NodeJS.Signals | null;
}

/**
 * A supervisor lease as `reconcileOrphans({ isSessionTracked })` shows it:
 * the run it covers (`runId`, from the lease's session key
 * `supervisor:<runId>`), the lease id, and that session key.
 */
export interface SupervisorRunRef {
  runId: string;
  leaseId: string;
  sessionKey: string;
}
