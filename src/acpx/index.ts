// Public surface of src/acpx, re-exported from the package root.
export { createAcpxLifecycleController } from "./controller/controller.js";
export type { AcpRuntimeEnsureInput, AcpRuntimeHandle, AdoptedTurn } from "./connection/types.js";
export type {
  AcpxLifecycleControllerOptions,
  ClientCapabilitiesOption,
  CloseReport,
  EnsureTiming,
  LeaseSettledOutcome,
  SessionEndHow,
  SessionStatus,
  SessionSummary,
  TreeKillMember,
  TreeKillSummary,
  DurableOptions,
} from "./sessions/types.js";
export type {
  AcpxLifecycleController,
  CancelReport,
  ContentBlock,
  SessionUpdate,
  SessionUpdateListener,
  TurnInput,
  TurnResult,
  TurnStream,
  ReapReport,
  ReapReportEntry,
} from "./controller/types.js";
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
} from "./report/errors.js";
export type { AcpAuthInput, AcpAuthResolver, PromptOptions } from "./connection/types.js";
export type { LimitController, SessionLimits } from "./connection/types.js";
export type { AcpxContainmentOptions } from "./sessions/types.js";
export { STDERR_RING_BYTES } from "./launch/stderr-ring.js";
export type { SessionEnd } from "./launch/wrapper-end.js";
export {
  openSessionStore,
  parseSessionRecord,
  sessionFileName,
  type AcpxSessionRecord,
  type LegacyAcpxSessionRecord,
  type SessionStore,
  type StoredSessionRecord,
} from "./sessions/session-store.js";
export {
  installWrapper,
  packagedWrapperPath,
  wrapperShimSource,
  type InstalledWrapper,
} from "./launch/install-wrapper.js";
export {
  AcpClient,
  AcpTimeoutError,
  SUPPORTED_PROTOCOL_VERSIONS,
  type AcpClientOptions,
  type PromptAnswer,
} from "./connection/acp-client.js";
export {
  permissionOption,
  DEFAULT_PERMISSION_TIMEOUT_MS,
  type PermissionAnswer,
  type PermissionContext,
  type PermissionHook,
} from "./connection/permissions.js";
export {
  DEFAULT_MAX_READ_BYTES,
  DEFAULT_MAX_WRITE_BYTES,
  type ClientFsOptions,
  type FsRefusal,
} from "./connection/client-fs.js";
export {
  DEFAULT_MAX_TERMINALS,
  DEFAULT_TERMINAL_OUTPUT_BYTES,
  TERMINAL_RUN_PREFIX,
  type ClientTerminalOptions,
} from "./connection/client-terminal.js";
export { MAX_BACKLOG, type DroppedUpdates } from "./connection/session-updates.js";
export {
  DEFAULT_SESSION_BACKLOG_BYTES,
  DEFAULT_TURN_BACKLOG_BYTES,
  type UpdateLimits,
} from "./connection/update-bytes.js";
export { DEFAULT_INTAKE_LIMITS, type IntakeLimits } from "./connection/intake-limits.js";
export type { IntakeRefusal, IntakeStatus } from "./connection/session-budget.js";
export type { SessionAgentState } from "./connection/session-controls.js";
export type { ControllerLogger } from "./report/logger.js";
export { fixtureAgentPath } from "./launch/fixture-agent.js";
export { AcpxRawSessionError } from "./sessions/raw-session-error.js";
export type { RawAdapter, RawAdapterInput } from "./sessions/raw-adapter.js";
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
