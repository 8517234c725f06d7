// Public surface of proclease/openclaw: an OpenClaw ACP runtime backend on the
// lifecycle controller, its plugin entry, and the process supervisor in
// OpenClaw's shape. Nothing here needs `openclaw` installed to load.
export { createOpenClawAcpRuntime, type OpenClawAcpRuntime, type ProcleaseOpenClawHandle } from "./runtime.js";
export { DEFAULT_BACKEND_ID, type OpenClawAcpRuntimeOptions, type OpenClawAgentConfig } from "./options.js";
export {
  OPENCLAW_ACP_ERROR_CODES,
  ProcleaseAcpRuntimeError,
  type OpenClawAcpErrorCode,
  type OpenClawErrorFactory,
  type OpenClawFailure,
} from "./errors.js";
export { EventMapper } from "./events.js";
export { controllerKey } from "./session-table.js";
export {
  default as procleasePlugin,
  createProcleasePlugin,
  loadHostAcpRuntimeSdk,
  ACP_RUNTIME_SDK,
  PLUGIN_ID,
} from "./plugin.js";
export type {
  AcpRuntimeSdk,
  PluginApiLike,
  PluginServiceLike,
  PluginServiceContextLike,
  ProcleasePlugin,
} from "./plugin.js";
export { parsePluginConfig, runtimeOptionsFor, type PluginConfig, type PluginAgentConfig } from "./plugin-config.js";
export type * from "./types.js";
export {
  createOpenClawProcessSupervisor,
  installOpenClawProcessSupervisor,
  execCommandLine,
  SupervisorAdapterError,
  type OpenClawManagedRun,
  type OpenClawProcessSupervisor,
  type OpenClawRunActivity,
  type OpenClawRunExit,
  type OpenClawRunStdin,
  type OpenClawSpawnInput,
} from "./supervisor-adapter.js";
