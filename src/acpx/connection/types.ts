/**
 * What a session is opened with and what it answers: ensureSession's input
 * (with its limits and auth) and the handle every later call names. The
 * connection binds the handle; the sessions and the controller pass both on.
 */
import type { AgentCapabilities, Implementation, McpServer } from "@agentclientprotocol/sdk";
import type { AcpSessionOwner } from "../../sessions/index.js";
import type { AcpAuthInput } from "./handshake-steps.js";
import type { TurnStream } from "./turn.js";

export type { AcpAuthInput, AcpAuthResolver } from "./handshake-steps.js";

export interface AcpRuntimeEnsureInput {
  sessionKey: string;
  agentId: string;
  /** the ACP adapter's argv */
  command: readonly string[];
  cwd?: string;
  /** keys set in the adapter's environment (after envRemove; the two markers always win) */
  env?: Record<string, string>;
  /**
   * Keys dropped from the environment the adapter inherits from the gateway
   * (OpenClaw's `env -u …`: provider credentials an adapter must not see).
   * The markers OPENCLAW_ACPX_LEASE_ID and OPENCLAW_GATEWAY_INSTANCE_ID can
   * never be removed (TypeError naming them). A key both removed and set in
   * `env` gets the `env` value.
   */
  envRemove?: readonly string[];
  /**
   * ACP `authenticate` before `session/new`: a method id the agent advertised
   * in its initialize answer, or a resolver that picks one from the agent's
   * methods (undefined = do not authenticate). Without it, an agent that
   * answers session/new with auth_required fails ensureSession with
   * AcpxEnsureError("auth-required") listing its methods.
   */
  auth?: AcpAuthInput;
  /**
   * Resource limits written into the lease's own cgroup v2 (memory.max,
   * pids.max) after the cgroup is made and before the wrapper is spawned, so
   * the adapter and everything it forks are born limited: a runaway agent is
   * OOM-killed, or refused forks, inside its own cgroup instead of taking
   * the host down. Fail closed: a positive limit that cannot be applied
   * (containment off, the controller not on cgroup v2 here, a refused write)
   * rejects with AcpxEnsureError("limits-unavailable") whose message carries
   * the reason, and nothing is spawned. `"max"` asks for no limit (a new
   * cgroup's default): it is never written and never refused. Malformed
   * values (0, negative, NaN, non-integer, unknown keys) are a TypeError
   * before any lease is written. The controllers are enabled for the leases
   * on the first request that needs them, or at create with
   * `containment: { controllers }` (docs/containment.md).
   * ensureSession on a key whose session is already running returns it only
   * when every positive limit asked for is the one it runs with
   * (AcpxEnsureError("limits-mismatch") otherwise).
   */
  limits?: SessionLimits;
  spawnedBy?: string;
  parentSessionKey?: string;
  ownerSessionKey?: string;
  /** MCP servers passed through to session/new (and session/resume / session/load) as given */
  mcpServers?: readonly McpServer[];
  /**
   * The agent session to take back (session/resume or session/load,
   * whichever the agent advertises; docs/conversation.md "Sessions survive a restart").
   * Absent: the key's stored record's agent session, unless `resume: false`.
   */
  resumeSessionId?: string;
  /** false: never take an earlier agent session back, start a new one (default true) */
  resume?: boolean;
  /**
   * The key already has a running session with another command, agentId or
   * cwd: true closes it (verified, through the lifecycle) and starts this
   * one; absent or false refuses with AcpxEnsureError("session-mismatch").
   */
  replace?: boolean;
}

/** ensureSession's `limits`: each a positive integer, or "max" for none. */
export interface SessionLimits {
  /** bytes (memory.max; the kernel rounds down to whole pages), or "max" */
  memoryMax?: number | "max";
  /** tasks: processes and threads together (pids.max), or "max" */
  pidsMax?: number | "max";
}

/** A cgroup v2 controller that SessionLimits needs (memoryMax → memory, pidsMax → pids). */
export type LimitController = "memory" | "pids";

export interface AcpRuntimeHandle {
  sessionKey: string;
  leaseId: string;
  /** the wrapper's pid (the root of the lease's tree) */
  rootPid: number;
  /** the adapter's process group, as the wrapper reported it */
  processGroupId?: number;
  /** from the adapter's session/new answer (or the session resumed or loaded) */
  acpSessionId: string;
  owner: AcpSessionOwner;
  /** the key's running session was returned as it is (ensureSession on a live key) */
  reused: boolean;
  /** the earlier agent session was resumed or loaded (session/resume, session/load) */
  resumed: boolean;
  /** why not, when `resumed` is false ("nothing to resume: a new session" when none was asked for) */
  resumeReason?: string;
  /** what the agent advertised in initialize */
  agentCapabilities: AgentCapabilities;
  agentInfo?: Implementation;
  /**
   * A durable session an earlier gateway left waiting, re-adopted by this
   * controller: the same `rootPid`, nothing spawned (docs/lifecycle-controller.md
   * "Durable sessions").
   */
  adopted?: true;
  /**
   * Only on the handle the adopting ensureSession returns: the turn that was
   * in flight when the earlier gateway went away.
   */
  turn?: AdoptedTurn;
}

/** prompt's options: signal, timeoutMs, and the grace for the turn to end after session/cancel. */
export interface PromptOptions {
  /** aborting sends session/cancel and rejects with an error named "AbortError" */
  signal?: AbortSignal;
  /** past it, session/cancel is sent and prompt rejects with AcpxPromptTimeoutError */
  timeoutMs?: number;
  /** after session/cancel, how long to wait for the agent to end the turn before rejecting; default 2000 */
  cancelGraceMs?: number;
}

/**
 * A turn re-adopted with its session (startTurn's shape): `events` yields
 * every session/update of the turn since it began, in order, each once (the
 * `replayed` ones the wrapper kept first, then the live ones), `result` its
 * stop reason. `gap`: the wrapper could not keep all of it (the turn passed
 * the journal's bound while attached), so some of its updates are missing.
 */
export interface AdoptedTurn extends TurnStream {
  readonly replayed: number;
  readonly gap: boolean;
}
