/**
 * The controller's side of ACP: a thin layer over the SDK's client app,
 * speaking newline-delimited JSON-RPC over the adapter's stdin/stdout (which
 * pass through the wrapper untouched). It adds what the lifecycle needs and
 * the SDK leaves to callers: timeouts on the handshake and a way to fail every
 * pending request with one named error when the session is torn down.
 */
import { Readable, Writable } from "node:stream";
import {
  client as acpClient,
  ndJsonStream,
  PROTOCOL_VERSION,
  type ClientConnection,
  type InitializeResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";

export class AcpTimeoutError extends Error {
  override name = "AcpTimeoutError";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`ACP ${method} got no answer within ${timeoutMs} ms`);
  }
}

export interface AcpClientOptions {
  /** the adapter's stdout, as seen by the controller */
  input: Readable;
  /** the adapter's stdin */
  output: Writable;
  onUpdate?: (n: SessionNotification) => void;
}

export class AcpClient {
  readonly connection: ClientConnection;

  constructor(opts: AcpClientOptions) {
    const app = acpClient({ name: "proclease" })
      .onNotification("session/update", ({ params }) => {
        opts.onUpdate?.(params);
      })
      // The controller runs no tools: a permission request is answered
      // "cancelled" so an adapter never blocks a turn waiting for a human.
      .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" as const } }));
    const stream = ndJsonStream(
      Writable.toWeb(opts.output) as WritableStream<Uint8Array>,
      Readable.toWeb(opts.input) as ReadableStream<Uint8Array>,
    );
    this.connection = app.connect(stream);
  }

  get closed(): Promise<void> {
    return this.connection.closed;
  }

  initialize(timeoutMs: number): Promise<InitializeResponse> {
    return withTimeout(
      "initialize",
      timeoutMs,
      this.connection.agent.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "proclease", version: "0.1.0" },
      }),
    );
  }

  async newSession(cwd: string, timeoutMs: number): Promise<string> {
    const res = await withTimeout(
      "session/new",
      timeoutMs,
      this.connection.agent.request("session/new", { cwd, mcpServers: [] }),
    );
    if (typeof res.sessionId !== "string" || res.sessionId.length === 0) {
      throw new Error("ACP session/new answered without a sessionId");
    }
    return res.sessionId;
  }

  async prompt(sessionId: string, text: string): Promise<{ stopReason: string }> {
    const res = await this.connection.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    return { stopReason: res.stopReason };
  }

  /** a notification: the running prompt answers `cancelled`; nothing is signalled */
  cancel(sessionId: string): Promise<void> {
    return this.connection.agent.notify("session/cancel", { sessionId });
  }

  /** Rejects every pending request with `reason` and stops reading. */
  close(reason?: Error): void {
    this.connection.close(reason);
  }
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
