/** The public shapes of the exec sessions, and their defaults. */
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import type { KeySequence } from "../shared/keys.js";
import type { KillTreeResult } from "../shared/kill-tree.js";
import type { ProcessSupervisor } from "../core/supervisor.js";
import type { RunExit, SpawnInput } from "../shared/types.js";

export const DEFAULT_FINISHED_TTL_MS = 30 * 60_000;
export const DEFAULT_MAX_POLL_WAIT_MS = 30_000;
export const DEFAULT_LOG_LINES = 200;
export const DEFAULT_ADOPTED_CHECK_MS = 1000;

export type ExecSessionStatus = "running" | "exited";

export interface ExecSessionInfo {
  id: string;
  /** the supervisor run id; absent for adopted processes */
  runId?: string;
  pid?: number;
  /** adopted sessions: the start time recorded at adopt time (ProcessInfo.startTime); kill/remove signal only that process */
  startTime?: string;
  mode: "child" | "pty" | "adopted";
  command: string;
  status: ExecSessionStatus;
  startedAtMs: number;
  exitedAtMs?: number;
  exit?: RunExit;
}

export interface PollResult {
  status: ExecSessionStatus;
  /** output that arrived since the previous poll */
  output: string;
  exit?: RunExit;
}

export interface LogResult {
  lines: string[];
  totalLines: number;
  /** index of the first returned line */
  offset: number;
}

export type TerminateResult =
  | { via: "supervisor"; exit: RunExit }
  | { via: "tree-kill"; result: KillTreeResult }
  | { via: "none"; reason: "already-exited" | "no-pid" };

export type ProcessActionRequest =
  | { action: "list" }
  | { action: "poll"; sessionId: string; timeoutMs?: number; signal?: AbortSignal }
  | { action: "log"; sessionId: string; offset?: number; limit?: number }
  | { action: "write"; sessionId: string; data: string; eof?: boolean }
  | ({ action: "send-keys"; sessionId: string } & KeySequence)
  | { action: "submit"; sessionId: string; text: string }
  | { action: "paste"; sessionId: string; text: string }
  | { action: "kill"; sessionId: string }
  | { action: "clear"; sessionId: string }
  | { action: "remove"; sessionId: string };

export type ProcessActionResult =
  | { action: "list"; sessions: ExecSessionInfo[] }
  | ({ action: "poll" } & PollResult)
  | ({ action: "log" } & LogResult)
  | { action: "write" | "send-keys" | "submit" | "paste" | "clear"; ok: true }
  | { action: "kill" | "remove"; result: TerminateResult };

export interface ExecSessionsOptions {
  supervisor: ProcessSupervisor;
  /** finished sessions are forgotten this long after they exit; default 30 min */
  finishedTtlMs?: number;
  /** upper bound for a poll's wait, whatever the caller asks; default 30 s */
  maxPollWaitMs?: number;
  /** aggregated output kept per session (the tail); default 1 000 000 characters */
  maxOutputChars?: number;
  /** for the tree kill of adopted sessions; default DEFAULT_GRACE_MS */
  graceMs?: number;
  /** how often adopted sessions are checked for an exit (so the TTL can expire them); default 1000 ms */
  adoptedCheckMs?: number;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
}

export interface ExecSessions {
  /** Spawns a background run through the supervisor and tracks it as a session (id = runId). */
  start(input: SpawnInput): Promise<ExecSessionInfo>;
  /**
   * Tracks a live process the supervisor does not know. Its start time is
   * read now (rejects when the process is not running or the facts backend
   * cannot tell its identity); kill/remove tree-kill that exact process only,
   * and the session is marked exited once that process is gone.
   */
  adopt(input: { pid: number; command: string; id?: string }): Promise<ExecSessionInfo>;
  list(): ExecSessionInfo[];
  /**
   * Output since the previous poll; with `timeoutMs`, waits (up to
   * maxPollWaitMs) for output or the exit first. An aborted `signal` ends
   * the wait at once and rejects with its reason (an AbortError by
   * default); the output stays pending for the next poll.
   */
  poll(id: string, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<PollResult>;
  log(id: string, opts?: { offset?: number; limit?: number }): LogResult;
  write(id: string, data: string, opts?: { eof?: boolean }): void;
  sendKeys(id: string, seq: KeySequence): void;
  /** text then Enter (CR on a PTY, LF on a pipe) */
  submit(id: string, text: string): void;
  /** bracketed paste on a PTY, plain text on a pipe */
  paste(id: string, text: string): void;
  kill(id: string): Promise<TerminateResult>;
  /** Forgets a finished session; a running one must be killed or removed instead. */
  clear(id: string): void;
  /** Forgets the session at once (even while running) and still terminates it. */
  remove(id: string): Promise<TerminateResult>;
  run(request: ProcessActionRequest): Promise<ProcessActionResult>;
  /** Drops finished sessions older than the TTL; returns how many went. */
  sweep(now?: number): number;
}
