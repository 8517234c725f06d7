/**
 * One OpenClaw turn on the controller's streamed turn (startTurn):
 * `events` carries the mapped updates (events.ts) in arrival order,
 * `result` the terminal outcome and never rejects (a failure is
 * `{ status: "failed", error }` with OpenClaw's code, detailCode and
 * retryable), `promptStarted` resolves once session/prompt went out (and
 * rejects, handled, when it never did), `cancel` sends ACP session/cancel
 * and waits for the turn's end (bounded by the controller's cancel grace),
 * `closeStream` stops the events while the turn runs on. Unread events are
 * bounded in bytes: past the bound the turn stops reading the controller's
 * events until OpenClaw reads (event-queue.ts). An aborted
 * `signal` cancels like `cancel`. runTurn is the same turn as one stream
 * ending in `done` or `error`.
 *
 * ACP has no steering: a `steer` turn is sent as a prompt, and refused
 * (SESSION_BUSY, retryable) while another turn runs.
 */
import type { ContentBlock } from "@agentclientprotocol/sdk";
import type { AcpxLifecycleController, TurnInput, TurnStream } from "../acpx/controller/types.js";
import { classify, toThrown, turnError, type OpenClawErrorFactory } from "./errors.js";
import { EventMapper } from "./events.js";
import { EventQueue } from "./event-queue.js";
import { DEFAULT_TURN_BACKLOG_BYTES, estimateJsonBytes } from "../acpx/connection/update-bytes.js";
import type { SessionEntry } from "./session-table.js";
import type {
  OpenClawLiveEvent,
  OpenClawRuntimeEvent,
  OpenClawRuntimeHandle,
  OpenClawRuntimeTurn,
  OpenClawTurnInput,
  OpenClawTurnResult,
} from "./types.js";

/** What runtime.cancel() reaches of a running turn. */

export interface TurnDeps {
  backendId: string;
  errorFactory: OpenClawErrorFactory | undefined;
  /** the controller and the live session a handle names (rejects with the runtime's typed error) */
  open(handle: OpenClawRuntimeHandle): Promise<{ ctl: AcpxLifecycleController; entry: SessionEntry }>;
  /** the turn is over, whatever its outcome (a oneshot session closes now) */
  ended(entry: SessionEntry): void;
  /** unread events a turn holds before it stops reading the controller's (default DEFAULT_TURN_BACKLOG_BYTES) */
  eventBacklogBytes?: number;
  /** true while a durable gateway hands its sessions over (handover.ts): an abort then leaves the turn running */
  handingOver?: () => boolean;
}

const noop = (): void => undefined;

export function startOpenClawTurn(deps: TurnDeps, input: OpenClawTurnInput): OpenClawRuntimeTurn {
  const queue = new EventQueue<OpenClawLiveEvent>(
    estimateJsonBytes,
    deps.eventBacklogBytes ?? DEFAULT_TURN_BACKLOG_BYTES,
  );
  let markStarted: () => void = noop;
  let markNotStarted: (e: unknown) => void = noop;
  const promptStarted = new Promise<void>((resolve, reject) => {
    markStarted = resolve;
    markNotStarted = reject;
  });
  // OpenClaw may never read it: a turn that fails before its prompt must not be an unhandled rejection
  promptStarted.catch(noop);
  let stream: TurnStream | undefined;
  let cancelAsked = false;
  const cancel = async (): Promise<void> => {
    cancelAsked = true;
    if (stream !== undefined) await stream.cancel();
  };
  const result = runToEnd(deps, input, queue, {
    started: (s) => {
      stream = s;
      markStarted();
      // a cancel that came while the session was being looked up
      if (cancelAsked) void s.cancel();
    },
    notStarted: markNotStarted,
    cancel,
  });
  return {
    requestId: input.requestId,
    promptStarted,
    events: queue,
    result,
    cancel: () => cancel(),
    closeStream: async () => queue.close(),
  };
}

interface TurnHooks {
  started(stream: TurnStream): void;
  notStarted(err: unknown): void;
  cancel(): Promise<void>;
}

async function runToEnd(
  deps: TurnDeps,
  input: OpenClawTurnInput,
  queue: EventQueue<OpenClawLiveEvent>,
  hooks: TurnHooks,
): Promise<OpenClawTurnResult> {
  let entry: SessionEntry | undefined;
  let sent = false;
  // decided a microtask later: OpenClaw's shutdown aborts the signal, then calls cancel() with its reason at once (handover.ts)
  const onAbort = (): void =>
    queueMicrotask(() => {
      if (deps.handingOver?.() !== true) void hooks.cancel();
    });
  try {
    if (input.signal?.aborted) {
      hooks.notStarted(new Error("the turn was aborted before its prompt was sent"));
      return { status: "cancelled", stopReason: "cancelled" };
    }
    const opened = await deps.open(input.handle);
    entry = opened.entry;
    await showAdopted(entry, queue);
    const stream = opened.ctl.startTurn(entry.handle, turnInput(input));
    sent = true;
    entry.turn = { cancel: hooks.cancel };
    hooks.started(stream);
    input.signal?.addEventListener("abort", onAbort, { once: true });
    if (input.signal?.aborted) onAbort();
    const mapper = new EventMapper();
    try {
      for await (const u of stream.events) {
        const ev = mapper.map(u);
        if (ev === undefined) continue;
        queue.push(ev);
        // a lagging OpenClaw consumer: stop reading the controller's events (which holds the adapter's stdout)
        await queue.room();
      }
    } catch {
      // the turn's error: `result` rejects with it, below
    }
    const r = await stream.result;
    return r.stopReason === "cancelled"
      ? { status: "cancelled", stopReason: r.stopReason }
      : { status: "completed", stopReason: r.stopReason };
  } catch (err) {
    const f = classify(err, "turn", deps.backendId);
    if (!sent) hooks.notStarted(toThrown(f, deps.errorFactory));
    return { status: "failed", error: turnError(f) };
  } finally {
    input.signal?.removeEventListener("abort", onAbort);
    queue.end();
    if (entry !== undefined) {
      entry.turn = undefined;
      deps.ended(entry);
    }
  }
}

/**
 * A turn a gateway restart interrupted, on this session: waited for (the
 * agent takes one turn at a time), then what it said goes out first, once.
 */
async function showAdopted(entry: SessionEntry, queue: EventQueue<OpenClawLiveEvent>): Promise<void> {
  const adopted = entry.adopted;
  if (adopted === undefined) return;
  entry.adopted = undefined;
  await adopted.done;
  for (const ev of adopted.events()) {
    queue.push(ev);
    await queue.room();
  }
}

/** OpenClaw's text and attachments as ACP content (text alone stays a string). */
export function turnInput(input: Pick<OpenClawTurnInput, "text" | "attachments">): TurnInput {
  const attachments = input.attachments ?? [];
  if (attachments.length === 0) return input.text;
  const blocks: ContentBlock[] = [];
  if (input.text !== "") blocks.push({ type: "text", text: input.text });
  attachments.forEach((a, i) => {
    if (a.mediaType.startsWith("image/")) blocks.push({ type: "image", mimeType: a.mediaType, data: a.data });
    else if (a.mediaType.startsWith("audio/")) blocks.push({ type: "audio", mimeType: a.mediaType, data: a.data });
    else
      blocks.push({ type: "resource", resource: { uri: `attachment:${i + 1}`, mimeType: a.mediaType, blob: a.data } });
  });
  return blocks;
}

/** The legacy stream: the live events, then `done` or `error`. A consumer that stops early closes the stream; the turn runs on. */
export async function* runOpenClawTurn(deps: TurnDeps, input: OpenClawTurnInput): AsyncGenerator<OpenClawRuntimeEvent> {
  const turn = startOpenClawTurn(deps, input);
  let finished = false;
  try {
    for await (const ev of turn.events) yield ev;
    const r = await turn.result;
    finished = true;
    if (r.status === "failed") yield { type: "error", ...r.error };
    else yield { type: "done", status: r.status, ...(r.stopReason !== undefined ? { stopReason: r.stopReason } : {}) };
  } finally {
    if (!finished) await turn.closeStream();
  }
}
