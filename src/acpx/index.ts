// Public surface of src/acpx, re-exported from the package root.
export { createAcpxLifecycleController } from "./controller.js";
export type {
  AcpRuntimeEnsureInput,
  AcpRuntimeHandle,
  AcpxLifecycleController,
  AcpxLifecycleControllerOptions,
  CloseReport,
  EnsureTiming,
  ReapReport,
  ReapReportEntry,
  ReapedProcess,
  TreeReapSummary,
} from "./types.js";
export {
  AcpxEnsureError,
  AcpxNoSessionError,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxSessionClosedError,
  type AcpAuthMethodInfo,
  type AcpErrorInfo,
  type AcpxDiagnostics,
  type EnsureFailureCause,
  type LimitsRefusal,
  type PromptFailureCause,
} from "./errors.js";
export type { AcpAuthInput, AcpAuthResolver, PromptOptions } from "./types.js";
export type { AcpxContainmentOptions, LimitController, SessionLimits } from "./types.js";
export { STDERR_RING_BYTES, type SessionEnd } from "./launch.js";
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
export { AcpClient, AcpTimeoutError, SUPPORTED_PROTOCOL_VERSIONS, type AcpClientOptions } from "./acp-client.js";
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
