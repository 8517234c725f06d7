/**
 * The controller's side of ACP: a thin layer over the SDK's client app,
 * speaking newline-delimited JSON-RPC over the adapter's stdin/stdout (which
 * pass through the wrapper untouched). It adds what the lifecycle needs and
 * the SDK leaves to callers: timeouts, a way to fail every pending request
 * with one named error when the session is torn down, and a look at the
 * first bytes of stdout (an adapter that prints something other than ACP is
 * named as such, not reported as a mere timeout), and a gate on that stdout
 * (stdout-backpressure.ts) that a lagging turn consumer holds, so the
 * adapter blocks on its write instead of the gateway buffering it.
 *
 * The transport is ours, not the SDK's ndJsonStream (intake-stream.ts): every
 * line the agent writes and every answer the gateway queues for it goes
 * through the session's budget (session-budget.ts), and the SDK's
 * console.error paths never fire (sdk-guard.ts for the one it cannot avoid).
 *
 * Agent → client requests are served only when the caller passes a handler
 * (permissions, fs, terminals): a method without one is answered "method
 * not found" by the SDK, and the matching capability is never advertised.
 * The handshake lives in handshake.ts, bounded turns in prompt-turn.ts.
 */
import type { Readable, Writable } from "node:stream";
import {
  client as acpClient,
  DEFAULT_MAX_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  type ClientCapabilities,
  type ClientConnection,
  type ContentBlock,
  type InitializeResponse,
  type McpServer,
  type NewSessionResponse,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import type { ClientFsHandlers } from "./client-fs.js";
import type { ClientTerminalHandlers } from "./client-terminal.js";
import { resolveIntakeLimits } from "./intake-limits.js";
import { idKey, IntakeStream } from "./intake-stream.js";
import { guardNotificationHandlers } from "./sdk-guard.js";
import { SessionBudget, type AnswerBudget } from "./session-budget.js";
import { StdoutGate } from "./stdout-backpressure.js";
import { StdoutProbe } from "./stdout-probe.js";

/**
 * The ACP protocol versions this client speaks: the SDK's v1 client speaks
 * exactly its PROTOCOL_VERSION. An agent answering initialize with any other
 * version is refused (the spec: the client disconnects), never half-spoken to.
 */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = Object.freeze([PROTOCOL_VERSION]);

/** JSON-RPC error code of ACP's auth_required. */
export const ACP_AUTH_REQUIRED = -32000;

/** Default wait for a turn to end after session/cancel (prompt timeout, abort or cancel). */
export const DEFAULT_CANCEL_GRACE_MS = 2000;
/** Upper bound for a prompt timeout: what a Node timer can hold (about 24.8 days). */
export const MAX_PROMPT_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * The ACP transport's limit on one message: an adapter built on the SDK
 * closes its connection when a line it reads is longer (the SDK's
 * stream-limits), so a prompt is measured against it before it is sent.
 */
export const ACP_MAX_MESSAGE_BYTES: number = DEFAULT_MAX_MESSAGE_BYTES;

const PACKAGE_VERSION = "0.1.0";

export class AcpTimeoutError extends Error {
  override name = "AcpTimeoutError";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`ACP ${method} got no answer within ${timeoutMs} ms`);
  }
}

/** What an agent's session/prompt answer carries (usage is an unstable ACP field, kept when sent). */
export interface PromptAnswer {
  stopReason: string;
  usage?: unknown;
  _meta?: Record<string, unknown> | null;
}

export interface AcpClientOptions {
  /** the adapter's stdout, as seen by the controller */
  input: Readable;
  /** the adapter's stdin */
  output: Writable;
  /** every session/update, in arrival order, called synchronously */
  onUpdate?: (n: SessionNotification) => void;
  /** answers session/request_permission; absent = "cancelled" (fail closed) */
  requestPermission?: (params: RequestPermissionRequest, signal: AbortSignal) => Promise<RequestPermissionResponse>;
  /** fs/read_text_file and fs/write_text_file, advertised only when given */
  fs?: ClientFsHandlers;
  /** terminal/*, advertised only when given */
  terminal?: ClientTerminalHandlers;
  /** the session's budget (session-budget.ts); absent = one with the default intake limits and no logger */
  budget?: SessionBudget;
  /** a re-adopted session's request id offset (intake-stream.ts): its ids go out above the earlier gateway's */
  idOffset?: number;
}

export class AcpClient {
  readonly connection: ClientConnection;
  /** the first bytes of the adapter's stdout, kept until the handshake is over */
  readonly stdoutProbe = new StdoutProbe();
  /** the adapter's stdout as the SDK reads it; a lagging turn consumer holds it (backpressure) */
  readonly stdoutGate: StdoutGate;
  /** what the agent holds of the gateway, and what was refused (session-budget.ts) */
  readonly budget: SessionBudget;
  private readonly capabilities: ClientCapabilities;
  private readonly intake: IntakeStream;

  constructor(opts: AcpClientOptions) {
    const budget = opts.budget ?? new SessionBudget(resolveIntakeLimits(undefined), {}, () => "");
    this.budget = budget;
    const answer = (requestId: unknown): AnswerBudget =>
      budget.answerBudget(idKey(requestId as string | number | null));
    const app = acpClient({ name: "proclease" }).onNotification("session/update", ({ params }) => {
      opts.onUpdate?.(params);
    });
    const ask = opts.requestPermission;
    app.onRequest("session/request_permission", ({ params, signal }) =>
      ask ? ask(params, signal) : { outcome: { outcome: "cancelled" as const } },
    );
    if (opts.fs?.read) {
      const read = opts.fs.read;
      app.onRequest("fs/read_text_file", ({ params, requestId }) => read(params, answer(requestId)));
    }
    if (opts.fs?.write) {
      const write = opts.fs.write;
      app.onRequest("fs/write_text_file", async ({ params }) => {
        await write(params);
        return {};
      });
    }
    const t = opts.terminal;
    if (t) {
      app
        .onRequest("terminal/create", ({ params }) => t.create(params))
        .onRequest("terminal/output", ({ params, requestId }) => t.output(params, answer(requestId)))
        .onRequest("terminal/wait_for_exit", ({ params, signal }) => t.waitForExit(params, signal))
        .onRequest("terminal/kill", async ({ params }) => {
          await t.kill(params);
          return {};
        })
        .onRequest("terminal/release", async ({ params }) => {
          await t.release(params);
          return {};
        });
    }
    this.capabilities = {
      fs: { readTextFile: opts.fs?.read !== undefined, writeTextFile: opts.fs?.write !== undefined },
      terminal: t !== undefined,
    };
    // a notification the SDK cannot parse is counted and logged here, never written to stderr by the SDK
    guardNotificationHandlers(app, (method) =>
      budget.refuse("invalid-notification", `a ${method} notification the ACP schema refuses: dropped`),
    );
    this.stdoutProbe.watch(opts.input);
    this.stdoutGate = new StdoutGate(opts.input);
    budget.bindStdout(this.stdoutGate);
    const intake = new IntakeStream({
      input: this.stdoutGate.readable,
      output: opts.output,
      budget,
      ...(opts.idOffset !== undefined ? { idOffset: opts.idOffset } : {}),
    });
    this.intake = intake;
    this.connection = app.connect(intake.stream);
    void this.connection.closed.then(() => {
      budget.close(new Error("the ACP connection closed"));
      intake.failAdopted(new Error("the ACP connection closed"));
    });
  }

  get closed(): Promise<void> {
    return this.connection.closed;
  }

  /** what initialize advertises: fs and terminal only where a handler serves them */
  get clientCapabilities(): ClientCapabilities {
    return this.capabilities;
  }

  initialize(timeoutMs: number): Promise<InitializeResponse> {
    return withTimeout(
      "initialize",
      timeoutMs,
      this.connection.agent.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: this.capabilities,
        clientInfo: { name: "proclease", version: PACKAGE_VERSION },
      }),
    );
  }

  authenticate(methodId: string, timeoutMs: number): Promise<unknown> {
    return withTimeout("authenticate", timeoutMs, this.connection.agent.request("authenticate", { methodId }));
  }

  /** session/new, answering the whole response (modes, config options) */
  async openNewSession(
    cwd: string,
    timeoutMs: number,
    mcpServers: readonly McpServer[] = [],
  ): Promise<NewSessionResponse> {
    const res = await withTimeout(
      "session/new",
      timeoutMs,
      this.connection.agent.request("session/new", { cwd, mcpServers: [...mcpServers] }),
    );
    if (typeof res.sessionId !== "string" || res.sessionId.length === 0) {
      throw new Error("ACP session/new answered without a sessionId");
    }
    return res;
  }

  async newSession(cwd: string, timeoutMs: number): Promise<string> {
    return (await this.openNewSession(cwd, timeoutMs)).sessionId;
  }

  async prompt(sessionId: string, prompt: string | readonly ContentBlock[]): Promise<PromptAnswer> {
    const res = (await this.connection.agent.request(
      "session/prompt",
      promptParams(sessionId, prompt),
    )) as PromptAnswer;
    const out: PromptAnswer = { stopReason: res.stopReason };
    if (res.usage !== undefined && res.usage !== null) out.usage = res.usage;
    if (res._meta !== undefined && res._meta !== null) out._meta = res._meta;
    return out;
  }

  /**
   * An earlier gateway's session/prompt, still in flight under `id`
   * (durable/adopt.ts): the agent's answer to it settles this promise as
   * prompt() would; a refused or missing answer rejects it.
   */
  adoptPrompt(id: number | string): Promise<PromptAnswer> {
    return new Promise<PromptAnswer>((resolve, reject) => {
      this.intake.adopt(id, (m) => {
        if (m.error !== undefined) return reject(m.error);
        const r = m.result as PromptAnswer | null | undefined;
        if (typeof r !== "object" || r === null || typeof r.stopReason !== "string")
          return reject(new Error("the agent answered the adopted session/prompt without a stopReason"));
        const out: PromptAnswer = { stopReason: r.stopReason };
        if (r.usage !== undefined && r.usage !== null) out.usage = r.usage;
        if (r._meta !== undefined && r._meta !== null) out._meta = r._meta;
        resolve(out);
      });
    });
  }

  /** a notification: the running prompt answers `cancelled`; nothing is signalled */
  cancel(sessionId: string): Promise<void> {
    return this.connection.agent.notify("session/cancel", { sessionId });
  }

  /** Rejects every pending request with `reason` and stops reading. */
  close(reason?: Error): void {
    this.connection.close(reason);
  }

  /** Every message the SDK queued so far is in the adapter's stdin pipe, or `ms` passed (IntakeStream.writesFlushed). */
  writesFlushed(ms: number): Promise<void> {
    return this.intake.writesFlushed(ms);
  }
}

function promptParams(
  sessionId: string,
  prompt: string | readonly ContentBlock[],
): { sessionId: string; prompt: ContentBlock[] } {
  return { sessionId, prompt: typeof prompt === "string" ? [{ type: "text", text: prompt }] : [...prompt] };
}

// the most bytes one UTF-16 code unit can take in JSON: a control character escaped as \u001f
const MAX_JSON_BYTES_PER_UNIT = 6;
// the JSON-RPC envelope around the params, with the widest request id, and a text block's own keys
const ENVELOPE_BYTES = 256;

/** a text block with nothing beside its text (no annotations, no _meta): its size is its text's */
function isBareText(b: ContentBlock): boolean {
  return b.type === "text" && typeof b.text === "string" && Object.keys(b).every((k) => k === "type" || k === "text");
}

/**
 * The UTF-8 length of the session/prompt line prompt() would write (its
 * newline excluded, as the reader's limit counts it, and with the widest
 * request id so it never comes out short) when that line would exceed
 * ACP_MAX_MESSAGE_BYTES; undefined when it fits, or when the prompt cannot
 * be encoded at all (the SDK's own write says so then). Text whose worst
 * case fits is not encoded here: a prompt is stringified again to be sent.
 */
export function promptOverLimit(sessionId: string, prompt: string | readonly ContentBlock[]): number | undefined {
  const texts =
    typeof prompt === "string"
      ? [prompt]
      : prompt.every(isBareText)
        ? prompt.map((b) => (b as { text: string }).text)
        : null;
  if (texts !== null) {
    const units = texts.reduce((n, t) => n + t.length, sessionId.length);
    if (units * MAX_JSON_BYTES_PER_UNIT + ENVELOPE_BYTES * (texts.length + 1) <= ACP_MAX_MESSAGE_BYTES)
      return undefined;
  }
  let bytes: number;
  try {
    const line = JSON.stringify({
      jsonrpc: "2.0",
      id: Number.MAX_SAFE_INTEGER,
      method: "session/prompt",
      params: promptParams(sessionId, prompt),
    });
    bytes = Buffer.byteLength(line, "utf8");
  } catch {
    return undefined;
  }
  return bytes > ACP_MAX_MESSAGE_BYTES ? bytes : undefined;
}

export async function withTimeout<T>(method: string, timeoutMs: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AcpTimeoutError(method, timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
