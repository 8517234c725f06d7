// Public surface of src/sessions, re-exported from the package root.
// Session visibility (docs/session-visibility.md), agent-to-agent policy, and the owner
// metadata (AcpSessionOwner) that spawners write on rows.
export type {
  AcpSessionOwner,
  AgentToAgentPolicy,
  CanSeeSessionRowInput,
  SessionAction,
  SessionRowOwnership,
  SessionVisibility,
  SessionVisibilityContext,
} from "./types.js";
export { SESSION_ACTIONS, SESSION_VISIBILITIES } from "./types.js";
export {
  agentIdFromSessionKey,
  canSeeSessionRow,
  clampSessionVisibility,
  isSessionVisibility,
  parseSessionVisibility,
  resolveSessionVisibility,
} from "./visibility.js";
export { assertAgentToAgentPolicy, isAgentAllowed, resolveAgentToAgentPolicy } from "./a2a-policy.js";
export { compileStarGlob, matchStarGlob, type StarGlobMatcher } from "./glob.js";
export {
  authorizeSessionAction,
  filterVisibleSessions,
  type AuthorizeSessionActionInput,
  type SessionAuthorization,
  type SessionDenialReason,
  type VisibleSessions,
} from "./authorize.js";
export {
  assertOwnerKeys,
  buildSessionOwner,
  normalizeSessionOwner,
  toSessionRowOwnership,
  type BuildSessionOwnerInput,
  type NormalizedSessionOwner,
} from "./owner.js";
