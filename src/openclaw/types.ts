/**
 * OpenClaw's ACP runtime backend contract, written structurally so this
 * package builds and type-checks without `openclaw` installed. The shapes
 * mirror `AcpRuntime` and the types around it as openclaw@2026.9.6 declares
 * them (an internal chunk, `dist/types.openclaw-*.d.ts`, region
 * `packages/acp-core/src/runtime/types.d.ts`); CI type-checks
 * createOpenClawAcpRuntime against that file of a real install
 * (.ci/openclaw-typecheck.ts), so a drift fails there, not in a gateway.
 */

/** What a turn is for: a new prompt, or steering text for the running one. */
export type OpenClawPromptMode = "prompt" | "steer";
export type OpenClawSessionMode = "persistent" | "oneshot";
/** The update tag OpenClaw filters status lines by; unknown tags pass through. */
export type OpenClawUpdateTag =
  | "agent_message_chunk"
  | "agent_thought_chunk"
  | "tool_call"
  | "tool_call_update"
  | "usage_update"
  | "available_commands_update"
  | "current_mode_update"
  | "config_option_update"
  | "session_info_update"
  | "plan"
  | (string & {});
export type OpenClawRuntimeControl = "session/set_mode" | "session/set_config_option" | "session/status";

/** The handle OpenClaw stores (session metadata) and passes back into every call. */
export interface OpenClawRuntimeHandle {
  sessionKey: string;
  agentId?: string;
  /** the registered backend id; OpenClaw looks the backend up by it after a restart */
  backend: string;
  runtimeSessionName: string;
  cwd?: string;
  acpxRecordId?: string;
  /** the ACP session id (here: the agent's session/new, resume or load answer) */
  backendSessionId?: string;
  /** the upstream agent's session id, the id OpenClaw offers back as resumeSessionId */
  agentSessionId?: string;
  appliedModel?: { kind: "applied"; model: string } | { kind: "dropped" };
  appliedThinking?: { kind: "applied"; thinking: string } | { kind: "dropped" };
}

export interface OpenClawEnsureInput {
  sessionKey: string;
  agentId?: string;
  /** the handle OpenClaw stored for this key: a locator, never authority to act on */
  persistedHandle?: OpenClawRuntimeHandle;
  /** the agent name: a key of the runtime's `agents` */
  agent: string;
  mode: OpenClawSessionMode;
  resumeSessionId?: string;
  model?: string;
  modelExplicit?: boolean;
  thinking?: string;
  thinkingExplicit?: boolean;
  cwd?: string;
  env?: Record<string, string>;
}

export interface OpenClawTurnAttachment {
  mediaType: string;
  /** base64 */
  data: string;
}

export interface OpenClawTurnInput {
  handle: OpenClawRuntimeHandle;
  text: string;
  attachments?: OpenClawTurnAttachment[];
  mode: OpenClawPromptMode;
  requestId: string;
  signal?: AbortSignal;
  /** OpenClaw's elicitation handler; this backend speaks no ACP elicitation, so it is never called */
  onElicitation?: unknown;
}

export interface OpenClawCapabilities {
  controls: OpenClawRuntimeControl[];
  configOptionKeys?: string[];
}

export interface OpenClawConfigOptionResult {
  configOptions: Array<{
    id: string;
    category?: string | null;
    currentValue: string | boolean;
    options?: Array<{ value: string }> | Array<{ options: Array<{ value: string }> }>;
  }>;
}

export interface OpenClawRuntimeStatus {
  summary?: string;
  acpxRecordId?: string;
  backendSessionId?: string;
  agentSessionId?: string;
  details?: Record<string, unknown>;
}

export interface OpenClawDoctorReport {
  ok: boolean;
  code?: string;
  message: string;
  installCommand?: string;
  details?: string[];
}

export type OpenClawTextDeltaEvent = {
  type: "text_delta";
  text: string;
  stream?: "output" | "thought";
  tag?: OpenClawUpdateTag;
};
export type OpenClawStatusEvent = {
  type: "status";
  text: string;
  tag?: OpenClawUpdateTag;
  used?: number;
  size?: number;
};
export type OpenClawToolKind =
  "read" | "edit" | "delete" | "move" | "search" | "execute" | "fetch" | "switch_mode" | "think" | "other";
export type OpenClawToolCallEvent = {
  type: "tool_call";
  text: string;
  tag?: OpenClawUpdateTag;
  toolCallId?: string;
  status?: string;
  title?: string;
  kind?: OpenClawToolKind;
};
export type OpenClawDoneEvent = { type: "done"; status?: "completed" | "cancelled"; stopReason?: string };
export type OpenClawErrorEvent = {
  type: "error";
  message: string;
  code?: string;
  detailCode?: string;
  retryable?: boolean;
};
/** What a turn streams; runTurn's stream ends with `done` or `error`, startTurn's carries neither (its `result` does). */
export type OpenClawRuntimeEvent =
  OpenClawTextDeltaEvent | OpenClawStatusEvent | OpenClawToolCallEvent | OpenClawDoneEvent | OpenClawErrorEvent;
/** The live part of a turn: everything but the terminal events. */
export type OpenClawLiveEvent = OpenClawTextDeltaEvent | OpenClawStatusEvent | OpenClawToolCallEvent;

export interface OpenClawTurnError {
  message: string;
  code?: string;
  detailCode?: string;
  retryable?: boolean;
}

export type OpenClawTurnResult =
  | { status: "completed"; stopReason?: string }
  | { status: "cancelled"; stopReason?: string }
  | { status: "failed"; error: OpenClawTurnError };

export interface OpenClawRuntimeTurn {
  readonly requestId: string;
  readonly promptStarted?: Promise<void>;
  readonly events: AsyncIterable<OpenClawLiveEvent>;
  readonly result: Promise<OpenClawTurnResult>;
  cancel(input?: { reason?: string }): Promise<void>;
  closeStream(input?: { reason?: string }): Promise<void>;
}

/** OpenClaw's `AcpRuntime`, every optional method implemented. */
export interface OpenClawAcpRuntimeContract {
  readonly ownerAwareSessions?: 1;
  ensureSession(input: OpenClawEnsureInput): Promise<OpenClawRuntimeHandle>;
  startTurn?(input: OpenClawTurnInput): OpenClawRuntimeTurn;
  runTurn(input: OpenClawTurnInput): AsyncIterable<OpenClawRuntimeEvent>;
  getCapabilities?(input: { handle?: OpenClawRuntimeHandle }): Promise<OpenClawCapabilities> | OpenClawCapabilities;
  getStatus?(input: { handle: OpenClawRuntimeHandle; signal?: AbortSignal }): Promise<OpenClawRuntimeStatus>;
  setMode?(input: { handle: OpenClawRuntimeHandle; mode: string }): Promise<void>;
  setConfigOption?(input: {
    handle: OpenClawRuntimeHandle;
    key: string;
    value: string;
  }): Promise<OpenClawConfigOptionResult | void>;
  doctor?(): Promise<OpenClawDoctorReport>;
  prepareFreshSession?(input: {
    sessionKey: string;
    agentId?: string;
    persistedHandle?: OpenClawRuntimeHandle;
  }): Promise<void>;
  cancel(input: { handle: OpenClawRuntimeHandle; reason?: string }): Promise<void>;
  close(input: { handle: OpenClawRuntimeHandle; reason: string; discardPersistentState?: boolean }): Promise<void>;
}
