// Public surface of src/facts, re-exported from the package root.
export type {
  FactsBackend,
  IdentityStrength,
  InspectOptions,
  ProcessDetails,
  ProcessFacts,
  ProcessInfo,
  ProcessSignaller,
  ProcessSnapshot,
  SignalOutcome,
} from "./types.js";
export type { NativeBinding, NativeDetailsBatch, NativeSignalOutcome, NativeSnapshot } from "./native-binding.js";
export { getProcessFacts, describeBackendChoice, type BackendChoiceCode } from "./get.js";
export { FactsReadError, FactsUnavailableError } from "./none.js";
export { assertPid, assertEnvKeys, MAX_PID } from "./validate.js";
export { buildSnapshot } from "./snapshot.js";
export { inspectEach } from "./inspect-many.js";
export { loadNative, loadError, createNativeFacts } from "./native.js";
export { makeProcessNonDumpable, processDumpable, type NonDumpableResult } from "./dumpable.js";
export { createSignaller, signalUnreapedChild } from "./signal.js";
export {
  checkSignalTarget,
  checkGroupSignal,
  checkGroupTarget,
  isOwnProcessGroup,
  ownProcessGroupId,
  ancestorsOfThisProcess,
} from "./guards.js";
export type { GuardRefusal, GuardVerdict } from "./guards.js";
