/**
 * A streamed turn: startTurn's `{ events, result, cancel }`.
 * - `events`: the session's updates during the turn, in arrival order and
 *   unmodified, as an async iterable for one consumer. It ends when the turn
 *   ends, and throws the turn's error after the updates that came before it.
 *   A consumer that stops early (break) stops the buffering; the turn runs on.
 *   Unread updates are bounded in estimated bytes (updateLimits
 *   .turnBacklogBytes, update-bytes.ts): past the bound the adapter's
 *   stdout is no longer read until the consumer has read half of it, so a
 *   flood blocks the agent on its write instead of growing the gateway;
 *   none is dropped. The turn's answer comes behind its updates, so
 *   `result` of such a turn settles only once `events` is read (or left).
 * - `result`: `{ stopReason, usage?, contextUsage?, cancelRequested }`:
 *   `usage` as the agent's session/prompt answer reported it (ACP's token
 *   counts), `contextUsage` the last usage_update of the turn. Timeouts,
 *   aborts, closes and dead adapters reject it typed (prompt-turn.ts).
 * - `cancel()`: session/cancel, pending permission requests answered
 *   "cancelled", then resolves once the turn has ended, or after
 *   `cancelGraceMs` with `turnEnded: false` (an agent that never ends a
 *   cancelled turn keeps the session busy until it does or is closed).
 * prompt() is the same turn without a stream: its updates go to the
 * session's onUpdate listeners.
 */
import type { ContentBlock, SessionUpdate } from "@agentclientprotocol/sdk";
import { DEFAULT_CANCEL_GRACE_MS, type AcpClient, type PromptAnswer } from "./acp-client.js";
import { AcpxUnsupportedContentError } from "../report/errors.js";
import { startTurn as startBoundedTurn } from "./prompt-turn.js";
import type { SessionConversation } from "./conversation.js";
import type { SessionPipes } from "../launch/launch.js";
import type { CancelReport, TurnInput, TurnResult, TurnStream } from "./turn.js";
import type { PromptOptions } from "./types.js";

export type { CancelReport, TurnInput, TurnResult, TurnStream } from "./turn.js";

export interface TurnSession {
  sessionKey: string;
  acpSessionId: string;
  client: AcpClient;
  launched: SessionPipes;
  conv: SessionConversation;
  /** the running request, held until the agent ends the turn */
  setTurn(request: Promise<unknown> | undefined): void;
}

const BLOCK_CAPABILITY: Readonly<Record<string, "image" | "audio" | "embeddedContext" | undefined>> = {
  image: "image",
  audio: "audio",
  resource: "embeddedContext",
};

/** The prompt's blocks, refused typed when the agent did not advertise what a block needs. */
export function promptBlocks(
  sessionKey: string,
  input: TurnInput,
  caps: Record<string, unknown> | undefined,
): string | readonly ContentBlock[] {
  if (typeof input === "string") return input;
  if (!Array.isArray(input) || input.length === 0)
    throw new TypeError("input must be a string or a non-empty array of ACP content blocks");
  input.forEach((b: unknown, i: number) => {
    const type = (b as { type?: unknown } | null)?.type;
    if (typeof type !== "string" || !["text", "image", "audio", "resource_link", "resource"].includes(type)) {
      throw new TypeError(`input[${i}] must be an ACP content block (text, image, audio, resource_link, resource)`);
    }
    const need = BLOCK_CAPABILITY[type];
    if (need !== undefined && caps?.[need] !== true)
      throw new AcpxUnsupportedContentError(sessionKey, type, `promptCapabilities.${need}`);
  });
  return input;
}

export function runTurn(
  s: TurnSession,
  input: TurnInput,
  options: PromptOptions | undefined,
  stream: boolean,
  stderrInMessage: boolean,
): TurnStream {
  const prompt = promptBlocks(
    s.sessionKey,
    input,
    s.conv.init?.agentCapabilities?.promptCapabilities as Record<string, unknown> | undefined,
  );
  return streamTurn(s, { prompt }, options, stream, stderrInMessage);
}

/**
 * The turn an earlier gateway left in flight (durable/adopt.ts), streamed
 * from the journal's replay on: `request` is the agent's answer to the
 * earlier session/prompt. Nothing is sent; cancel() sends session/cancel.
 */
export function adoptTurn(s: TurnSession, request: Promise<PromptAnswer>, stderrInMessage: boolean): TurnStream {
  return streamTurn(s, { prompt: "", adopted: request }, undefined, true, stderrInMessage);
}

function streamTurn(
  s: TurnSession,
  sent: { prompt: string | readonly ContentBlock[]; adopted?: Promise<PromptAnswer> },
  options: PromptOptions | undefined,
  stream: boolean,
  stderrInMessage: boolean,
): TurnStream {
  const { prompt } = sent;
  const queue = new UpdateQueue(stream, s.client.stdoutGate, s.conv.config.updateLimits.turnBacklogBytes);
  const detach = stream ? s.conv.router.attachTurn(s.acpSessionId, queue.push) : () => undefined;
  const usageBefore = s.conv.state.agent.contextUsage;
  s.conv.permissions.turnStarted();
  let cancelRequested = false;
  const turn = startBoundedTurn(s.client, {
    sessionKey: s.sessionKey,
    acpSessionId: s.acpSessionId,
    prompt,
    launched: s.launched,
    stderrInMessage,
    ...(options !== undefined ? { options } : {}),
    ...(sent.adopted !== undefined ? { adopted: sent.adopted } : {}),
  });
  const request = turn.request;
  if (request !== null) {
    s.setTurn(request);
    const free = (): void => s.setTurn(undefined);
    request.then(free, free);
  }
  const result = turn.result.then(
    (answer): TurnResult => {
      detach();
      queue.end();
      const usageNow = s.conv.state.agent.contextUsage;
      return {
        stopReason: answer.stopReason,
        ...(answer.usage !== undefined ? { usage: answer.usage } : {}),
        ...(usageNow !== usageBefore && usageNow !== null ? { contextUsage: usageNow } : {}),
        cancelRequested,
      };
    },
    (err: unknown) => {
      detach();
      queue.end(err);
      throw err;
    },
  );
  // a caller that only reads events must not leave an unhandled rejection behind
  result.catch(() => undefined);
  const grace = options?.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
  const cancel = async (): Promise<CancelReport> => {
    if (request === null) return { cancelSent: false, turnEnded: true };
    cancelRequested = true;
    s.conv.permissions.cancelAll("the turn was cancelled");
    return cancelAndWait(s.client, s.acpSessionId, request, grace);
  };
  return { events: queue, result, cancel };
}

/** session/cancel, then up to `graceMs` for `request` (the turn) to settle. */
export async function cancelAndWait(
  client: AcpClient,
  acpSessionId: string,
  request: Promise<{ stopReason: string }>,
  graceMs: number,
): Promise<CancelReport> {
  let cancelSent = true;
  try {
    await client.cancel(acpSessionId);
  } catch {
    cancelSent = false;
  }
  let timer: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    request.then(
      (r) => ({ ended: true, stopReason: r.stopReason as string | undefined }),
      () => ({ ended: true, stopReason: undefined }),
    ),
    new Promise<{ ended: false; stopReason: undefined }>((r) => {
      timer = setTimeout(() => r({ ended: false, stopReason: undefined }), graceMs);
    }),
  ]);
  clearTimeout(timer);
  return {
    cancelSent,
    turnEnded: settled.ended,
    ...(settled.stopReason !== undefined ? { stopReason: settled.stopReason } : {}),
  };
}

/** What a turn's queue needs of the adapter's stdout (acp-client.ts's StdoutGate). */
export interface StdoutHold {
  hold(holder: object): void;
  release(holder: object): void;
}

/**
 * A single-consumer async queue. push() hands an update straight to a
 * waiting next() (no buffer, no timer); otherwise it is buffered in order,
 * and its estimated size counts against `boundBytes`: past the bound the
 * queue holds the adapter's stdout (backpressure: nothing more is read, the
 * adapter blocks on its write) until the consumer has read it down to half
 * the bound. Nothing pushed is ever dropped while the consumer is live;
 * the end of the turn or a consumer that stops releases the hold.
 */
class UpdateQueue implements AsyncIterableIterator<SessionUpdate> {
  private items: { u: SessionUpdate; bytes: number }[] = [];
  private head = 0;
  private unreadBytes = 0;
  private holding = false;
  private waiter: { resolve: (r: IteratorResult<SessionUpdate>) => void; reject: (e: unknown) => void } | undefined;
  private ended = false;
  private error: unknown;
  private failed = false;

  constructor(
    private open: boolean,
    private readonly stdout: StdoutHold,
    private readonly boundBytes: number,
  ) {}

  readonly push = (u: SessionUpdate, bytes: number): void => {
    if (!this.open) return;
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve({ value: u, done: false });
      return;
    }
    this.items.push({ u, bytes });
    this.unreadBytes += bytes;
    if (!this.holding && this.unreadBytes > this.boundBytes) {
      this.holding = true;
      this.stdout.hold(this);
    }
  };

  end(err?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    // nothing more comes into this queue: what it holds is read at the consumer's pace
    this.letGo();
    if (err !== undefined) {
      this.failed = true;
      this.error = err;
    }
    const w = this.waiter;
    if (w === undefined) return;
    this.waiter = undefined;
    if (this.failed) w.reject(this.error);
    else w.resolve({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<SessionUpdate>> {
    if (this.head < this.items.length) {
      const item = this.items[this.head]!;
      this.items[this.head++] = undefined as unknown as { u: SessionUpdate; bytes: number };
      this.unreadBytes -= item.bytes;
      if (this.holding && this.unreadBytes <= this.boundBytes / 2) this.letGo();
      if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve({ value: item.u, done: false });
    }
    if (this.ended || !this.open) {
      if (this.failed) {
        this.failed = false;
        return Promise.reject(this.error);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  return(): Promise<IteratorResult<SessionUpdate>> {
    this.open = false;
    this.items = [];
    this.head = 0;
    this.unreadBytes = 0;
    this.letGo();
    this.failed = false;
    return Promise.resolve({ value: undefined, done: true });
  }

  private letGo(): void {
    if (!this.holding) return;
    this.holding = false;
    this.stdout.release(this);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
