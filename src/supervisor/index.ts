// Public surface of src/supervisor, re-exported from the package root.
export type {
  ManagedRun,
  ManagedRunStdin,
  RunExit,
  RunRecord,
  RunState,
  SpawnChildInput,
  SpawnInput,
  SpawnPtyInput,
  StdinMode,
  SupervisorRunRef,
  TerminationReason,
} from "./shared/types.js";
export { createProcessSupervisor, PTY_EXIT_FALLBACK_MS, SupervisorShutdownError } from "./core/supervisor.js";
export type {
  ProcessSupervisor,
  ProcessSupervisorOptions,
  ReconcileOrphansOptions,
  ShutdownReport,
} from "./core/supervisor.js";
export { createRunRegistry, DEFAULT_MAX_EXITED_RECORDS } from "./run/registry.js";
export type { FinalizeInput, FinalizeResult, RunRegistry } from "./run/registry.js";
export { killProcessTree, signalProcessTree } from "./shared/kill-tree.js";
export type {
  KillProcessTreeOptions,
  KillTreeResult,
  SignalProcessTreeOptions,
  SignalTreeResult,
  TreeSignalResult,
} from "./shared/kill-tree.js";
export {
  FRESH_WATCHDOG_DEFAULTS,
  RESUME_WATCHDOG_DEFAULTS,
  WATCHDOG_MIN_TIMEOUT_MS,
  resolveNoOutputTimeoutMs,
  resolveRunNoOutputTimeoutMs,
} from "./shared/watchdog.js";
export type { ResolveNoOutputTimeoutInput, WatchdogProfile } from "./shared/watchdog.js";
export {
  createExecSessions,
  AdoptError,
  UnknownSessionError,
  DEFAULT_ADOPTED_CHECK_MS,
  DEFAULT_FINISHED_TTL_MS,
  DEFAULT_LOG_LINES,
  DEFAULT_MAX_POLL_WAIT_MS,
} from "./exec/actions.js";
export type {
  ExecSessionInfo,
  ExecSessions,
  ExecSessionsOptions,
  ExecSessionStatus,
  LogResult,
  PollResult,
  ProcessActionRequest,
  ProcessActionResult,
  TerminateResult,
} from "./exec/types.js";
export { encodeKey, encodeKeySequence, KEY_NAMES, BRACKETED_PASTE_START, BRACKETED_PASTE_END } from "./shared/keys.js";
export type { KeySequence } from "./shared/keys.js";
export { PtyUnavailableError, PTY_SHELL } from "./adapters/pty.js";
export type { PtyLoader, PtyModule, PtyProcess } from "./adapters/pty.js";
export { SUPERVISOR_SESSION_PREFIX, SUPERVISOR_WRAPPER_FIELDS } from "./hold/durability.js";
export type { ReconcilableState, ReconcileReport, ReconciledRun } from "./hold/durability.js";
export { DEFAULT_MAX_OUTPUT_CHARS } from "./shared/output.js";
