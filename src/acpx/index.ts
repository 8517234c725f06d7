// Public surface of src/acpx, re-exported from the package root.
export { createAcpxLifecycleController } from "./controller.js";
export type {
  AcpRuntimeEnsureInput,
  AcpRuntimeHandle,
  AcpxLifecycleController,
  AcpxLifecycleControllerOptions,
  CancelReport,
  ClientCapabilitiesOption,
  CloseReport,
  ContentBlock,
  EnsureTiming,
  LeaseSettledOutcome,
  SessionEndHow,
  SessionStatus,
  SessionSummary,
  SessionUpdate,
  SessionUpdateListener,
  TurnInput,
  TurnResult,
  TurnStream,
  ReapReport,
  ReapReportEntry,
  TreeKillMember,
  TreeKillSummary,
  AdoptedTurn,
  DurableOptions,
} from "./types.js";
export { DEFAULT_JOURNAL_BYTES } from "./durable/protocol.js";
export {
  AcpxEnsureError,
  AcpxNoSessionError,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxPromptTooLargeError,
  AcpxSessionClosedError,
  AcpxControllerDisposedError,
  AcpxSessionBusyError,
  AcpxSessionRequestError,
  AcpxUnsupportedContentError,
  AcpxDurableUnavailableError,
  type SessionRequestFailure,
  type AcpAuthMethodInfo,
  type AcpErrorInfo,
  type AcpxDiagnostics,
  type EnsureFailureCause,
  type LimitsRefusal,
  type PromptFailureCause,
} from "./errors.js";
export type { AcpAuthInput, AcpAuthResolver, PromptOptions } from "./types.js";
export type { AcpxContainmentOptions, LimitController, SessionLimits } from "./types.js";
export { STDERR_RING_BYTES } from "./stderr-ring.js";
export type { SessionEnd } from "./wrapper-end.js";
export {
  openSessionStore,
  parseSessionRecord,
  sessionFileName,
  type AcpxSessionRecord,
  type LegacyAcpxSessionRecord,
  type SessionStore,
  type StoredSessionRecord,
} from "./session-store.js";
export { installWrapper, packagedWrapperPath, wrapperShimSource, type InstalledWrapper } from "./install-wrapper.js";
export {
  AcpClient,
  AcpTimeoutError,
  SUPPORTED_PROTOCOL_VERSIONS,
  type AcpClientOptions,
  type PromptAnswer,
} from "./acp-client.js";
export {
  permissionOption,
  DEFAULT_PERMISSION_TIMEOUT_MS,
  type PermissionAnswer,
  type PermissionContext,
  type PermissionHook,
} from "./permissions.js";
export { DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_WRITE_BYTES, type ClientFsOptions, type FsRefusal } from "./client-fs.js";
export {
  DEFAULT_MAX_TERMINALS,
  DEFAULT_TERMINAL_OUTPUT_BYTES,
  TERMINAL_RUN_PREFIX,
  type ClientTerminalOptions,
} from "./client-terminal.js";
export { MAX_BACKLOG, type DroppedUpdates } from "./session-updates.js";
export { DEFAULT_SESSION_BACKLOG_BYTES, DEFAULT_TURN_BACKLOG_BYTES, type UpdateLimits } from "./update-bytes.js";
export { DEFAULT_INTAKE_LIMITS, type IntakeLimits } from "./intake-limits.js";
export type { IntakeRefusal, IntakeStatus } from "./session-budget.js";
export type { SessionAgentState } from "./session-controls.js";
export type { ControllerLogger } from "./logger.js";
export { fixtureAgentPath } from "./fixture-agent.js";
export { AcpxRawSessionError, type RawAdapter, type RawAdapterInput } from "./raw-adapter.js";
export {
  LIFELINE_FD,
  parseReportLine,
  createReportReader,
  type WrapperReport,
  type StartedReport,
  type SpawnErrorReport,
  type ExitReport,
  type CleanupReport,
} from "./wrapper/protocol.js";
