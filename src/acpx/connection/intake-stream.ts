/**
 * The ACP transport between the SDK's client connection and the adapter's
 * pipes, in place of the SDK's ndJsonStream, with the session's budget
 * (session-budget.ts) on both directions.
 *
 * In (the adapter's stdout, through its StdoutGate):
 * - lines are framed with a bound (line-framer.ts): an over-long line is
 *   skipped as it arrives, never buffered whole;
 * - depth and value count are read from the bytes before JSON.parse
 *   (json-scan.ts), so a bounded line cannot block the loop long;
 * - a refused line (too large, too deep, too many values) that is a request
 *   gets an ACP error by its id (read from its first bytes); one that
 *   answers a request of ours fails that request with the refusal; a
 *   notification is dropped. Each is counted and logged;
 * - only JSON-RPC the SDK handles quietly reaches it: a response to an id
 *   the gateway never sent (or already had answered) is dropped here, a
 *   message that is no JSON-RPC is answered here without echoing it (the
 *   SDK would echo it whole as the error's data), and a request past
 *   `maxRequestsInFlight`, or reusing an id still unanswered, is refused
 *   here; past `maxRequestBytesInFlight` the budget holds stdout instead. (The SDK writes those cases to the gateway's stderr with
 *   console.error, raw and unbounded.)
 * Ids of a re-adopted session (durable/adopt.ts): the old gateway's turn
 * may still be in flight under an id this connection's SDK would use again,
 * so the gateway's requests go out above the wrapper's `idOffset` (the
 * highest numeric id the gateway side ever sent, plus one) and their answers
 * come back to the SDK under its own ids; the answer to an adopted request
 * (the turn in flight) goes to whoever adopted it, never to the SDK.
 * Out (the adapter's stdin, answer-writer.ts): every message is serialised
 * and handed to the Node stream at once (a long string in slices), its
 * bytes charged to the budget until the pipe took them; the SDK's own
 * write chain then holds no message objects, and past the budget's bound
 * the agent's stdout is held until it reads.
 */
import type { Writable } from "node:stream";
import type { AnyMessage, Stream } from "@agentclientprotocol/sdk";
import { AnswerWriter } from "./answer-writer.js";
import { escapeForLog } from "../report/logger.js";
import { peekEnvelope, scanJson, type JsonRpcId } from "./json-scan.js";
import { LineFramer, type Framed } from "./line-framer.js";
import type { IntakeRefusal, SessionBudget } from "./session-budget.js";

/** The JSON-RPC code of a message refused by an intake bound ("Invalid request"); `data.refusal` names the bound. */
export const INTAKE_REFUSED_CODE = -32600;
const PARSE_ERROR = -32700;
/** a string request id longer than this is refused (answered with id null): ids are held while in flight */
export const MAX_REQUEST_ID_CHARS = 256;
/** how much of an id a log line shows */
const LOGGED_ID_CHARS = 64;

export interface IntakeStreamInput {
  /** the adapter's stdout (its StdoutGate's readable) */
  input: ReadableStream<Uint8Array>;
  /** the adapter's stdin */
  output: Writable;
  budget: SessionBudget;
  /** a re-adopted session's id floor, plus one: added to the gateway's numeric request ids on the wire (0: none) */
  idOffset?: number;
}

/** The answer to an adopted request: the agent's response, as it came. */
export type AdoptedAnswer = (response: { result?: unknown; error?: unknown }) => void;

type Controller = ReadableStreamDefaultController<AnyMessage>;

/**
 * How long the pump may keep the event loop. The SDK handles what it was
 * given in microtasks, all before the loop moves on, and one message can
 * cost it a millisecond (a session/update its schema refuses: measured
 * 0.4–1.2 ms), where a 64 KiB pipe chunk holds hundreds of them. So every
 * DRAIN_EVERY messages the pump lets the SDK finish them (drainMicrotasks,
 * no loop turn), and its clock then counts the SDK's work with its own: the
 * loop turns once SLICE_MS passed, held at most SLICE_MS and one batch. A
 * loop turn every 16 messages would cost a 10,000-update burst 625 loop
 * turns, about 2 µs of the loop's native work per update (docs/benchmarks.md,
 * "The burst turn: where the time goes").
 */
const SLICE_MS = 10;
const DRAIN_EVERY = 8;
/** turns of the loop an adopted answer waits at most for the SDK to take what came before it */
const ADOPTED_WAIT_TURNS = 1000;

/** An agent request on its way into the flight. */
interface Request {
  message: AnyMessage;
  id: JsonRpcId;
  method: string;
  /** its line's length, charged to the budget while it is in flight */
  bytes: number;
}

/** The key a JSON-RPC id is tracked by (1 and "1" are different ids). */
export function idKey(id: JsonRpcId): string {
  return typeof id === "number" ? `n${id}` : typeof id === "string" ? `s${id}` : "null";
}

function isId(v: unknown): v is JsonRpcId {
  return v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
}

function shownId(id: JsonRpcId): string {
  return JSON.stringify(typeof id === "string" ? id.slice(0, LOGGED_ID_CHARS) : id);
}

export class IntakeStream {
  readonly stream: Stream;
  /** the gateway's requests not answered yet, by id key */
  private readonly sent = new Set<string>();
  private readonly framer: LineFramer;
  private readonly writer: AnswerWriter;
  private outputError: Error | undefined;
  private cancelled = false;
  private reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private sinceDrain = 0;
  private sliceStart = performance.now();
  private readonly offset: number;
  /** requests of an earlier gateway this connection took over, by id key */
  private readonly adopted = new Map<string, AdoptedAnswer>();
  /** an adopted request's answer just read, for the pump to hand over in order (answerAdopted) */
  private adoptedAnswer: (() => void) | undefined;
  /** messages the SDK queued for the adapter's stdin, and of those handed to it (or failed) */
  private writesAsked = 0;
  private writesDone = 0;
  private readonly writeWaiters = new Set<() => void>();

  constructor(private readonly i: IntakeStreamInput) {
    this.offset = i.idOffset ?? 0;
    this.framer = new LineFramer(i.budget.limits.maxMessageBytes);
    this.writer = new AnswerWriter(i.output, i.budget);
    i.output.on("error", (err: Error) => {
      this.outputError ??= err;
    });
    this.stream = {
      readable: new ReadableStream<AnyMessage>({
        start: (c) => {
          void this.pump(c);
        },
        cancel: (reason: unknown) => {
          this.cancelled = true;
          return this.reader?.cancel(reason);
        },
      }),
      // the strategy's size() runs as the SDK queues a message, before its write: writesFlushed counts from there
      writable: new WritableStream<AnyMessage>(
        { write: (m) => this.sendCounted(m) },
        {
          highWaterMark: 1,
          size: () => {
            this.writesAsked++;
            return 1;
          },
        },
      ),
    };
  }

  private async pump(c: Controller): Promise<void> {
    const reader = this.i.input.getReader();
    this.reader = reader;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (this.cancelled) return;
        if (done) break;
        if (value === undefined) continue;
        for (const f of this.framer.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength))) {
          const waiting = this.take(f, c);
          if (this.adoptedAnswer !== undefined) await this.answerAdopted(c, this.adoptedAnswer);
          if (waiting !== undefined) {
            // the flight is full: answers already on their way (all microtasks) free their slots first
            await this.yieldToLoop();
            if (this.cancelled) return;
            this.admit(waiting, c, true);
          }
          if (this.cancelled) return;
          if (++this.sinceDrain >= DRAIN_EVERY) {
            await this.drainMicrotasks();
            if (this.cancelled) return;
          }
          if (performance.now() - this.sliceStart > SLICE_MS) {
            await this.yieldToLoop();
            if (this.cancelled) return;
          }
        }
      }
      const last = this.framer.flush();
      if (last !== undefined) {
        const waiting = this.take(last, c);
        if (this.adoptedAnswer !== undefined) await this.answerAdopted(c, this.adoptedAnswer);
        if (waiting !== undefined) this.admit(waiting, c, true);
      }
    } catch (err) {
      if (this.cancelled) return;
      c.error(err);
      void reader.cancel(err).catch(() => undefined);
      return;
    } finally {
      reader.releaseLock();
    }
    if (!this.cancelled) c.close();
  }

  /** One framed line: refused by its size or shape, or parsed and routed; a request that found the flight full is returned. */
  private take(f: Framed, c: Controller): Request | undefined {
    const limits = this.i.budget.limits;
    if (f.kind === "oversize") {
      this.refuseLine(
        "message-too-large",
        f.prefix,
        `a message of ${f.bytes} bytes, over intakeLimits.maxMessageBytes (${limits.maxMessageBytes})`,
        limits.maxMessageBytes,
        c,
      );
      return undefined;
    }
    let line = f.bytes;
    if (line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) line = line.subarray(3);
    if (isBlank(line)) return undefined;
    const scan = scanJson(line, limits.maxJsonDepth, limits.maxJsonValues);
    if (!scan.ok) {
      const deep = scan.over === "depth";
      this.refuseLine(
        deep ? "json-too-deep" : "json-too-many-values",
        line,
        deep
          ? `a message nested deeper than intakeLimits.maxJsonDepth (${limits.maxJsonDepth})`
          : `a message of more than intakeLimits.maxJsonValues (${limits.maxJsonValues}) JSON values`,
        deep ? limits.maxJsonDepth : limits.maxJsonValues,
        c,
      );
      return undefined;
    }
    let msg: unknown;
    try {
      msg = JSON.parse(line.toString("utf8"));
    } catch {
      this.i.budget.refuse("parse-error", `the agent wrote a line of ${line.length} bytes that is not JSON`);
      this.writeLine(errorLine(null, PARSE_ERROR, "Parse error"));
      return undefined;
    }
    return this.route(msg, line.length, c);
  }

  /** A parsed message to the SDK, or refused here; a request that found the flight full is returned. */
  private route(msg: unknown, bytes: number, c: Controller): Request | undefined {
    const b = this.i.budget;
    if (
      typeof msg !== "object" ||
      msg === null ||
      Array.isArray(msg) ||
      (msg as { jsonrpc?: unknown }).jsonrpc !== "2.0"
    ) {
      this.invalid(Array.isArray(msg) ? "a JSON-RPC batch (ACP has none)" : "a message that is not JSON-RPC 2.0");
      return undefined;
    }
    const m = msg as Record<string, unknown>;
    if ("method" in m) {
      const id = m.id;
      if (typeof m.method !== "string") this.invalid("a message whose method is not a string");
      else if (!("id" in m)) c.enqueue(m as AnyMessage);
      else if (!isId(id)) this.invalid("a request whose id is not a JSON-RPC id");
      else if (typeof id === "string" && id.length > MAX_REQUEST_ID_CHARS) {
        const why = `request ids are at most ${MAX_REQUEST_ID_CHARS} characters, this one has ${id.length}`;
        b.refuse("id-too-long", why);
        this.writeLine(refusalLine(null, "id-too-long", why, MAX_REQUEST_ID_CHARS));
      } else return this.admit({ message: m as AnyMessage, id, method: m.method, bytes }, c, false);
      return undefined;
    }
    if ("id" in m && isId(m.id)) {
      const key = idKey(m.id);
      const mine = this.adopted.get(key);
      if (this.sent.delete(key)) c.enqueue(this.inward(m));
      else if (mine !== undefined) {
        this.adopted.delete(key);
        // in order with what came before it: the pump answers it once the SDK handled those (answerAdopted)
        this.adoptedAnswer = () => mine(m);
      } else
        b.refuse(
          "unknown-response",
          `a response to id ${shownId(m.id)}, which the gateway never sent or already had answered: dropped`,
        );
    } else if ("result" in m || "error" in m || "id" in m) {
      // response-shaped without a usable id: nothing to answer it by
      b.refuse("invalid-message", "a response without a usable id: dropped");
    } else this.invalid("a message with neither method nor id");
    return undefined;
  }

  /**
   * A request into the flight, or refused with an ACP error at once: over
   * `maxRequestsInFlight` (on the second try: `final`) or reusing an id
   * still unanswered. A full flight on the first try is handed back.
   */
  private admit(r: Request, c: Controller, final: boolean): Request | undefined {
    const b = this.i.budget;
    const verdict = b.admitRequest(idKey(r.id), r.bytes);
    if (verdict === "ok") {
      c.enqueue(r.message);
      return undefined;
    }
    if (verdict === "full" && !final) return r;
    const limit = b.limits.maxRequestsInFlight;
    const method = escapeForLog(r.method, 64);
    const [kind, why]: [IntakeRefusal, string] =
      verdict === "full"
        ? [
            "too-many-requests",
            `at most ${limit} agent requests in flight per session (intakeLimits.maxRequestsInFlight); ${method} refused`,
          ]
        : ["duplicate-request-id", `request id ${shownId(r.id)} is still unanswered; ${method} refused`];
    b.refuse(kind, why);
    this.writeLine(refusalLine(r.id, kind, why, limit));
    return undefined;
  }

  private invalid(what: string): void {
    this.i.budget.refuse("invalid-message", `${what}: answered Invalid request`);
    this.writeLine(errorLine(null, INTAKE_REFUSED_CODE, "Invalid request"));
  }

  /**
   * A line refused before parsing: the agent's request is answered with the
   * refusal by its id, a request of ours it answered fails with the
   * refusal, anything else is dropped. Counted and logged either way.
   */
  private refuseLine(kind: IntakeRefusal, head: Buffer, why: string, limit: number, c: Controller): void {
    const env = peekEnvelope(head.subarray(0, 4096));
    const b = this.i.budget;
    if (env.hasMethod) {
      const what = env.method === undefined ? "a message" : escapeForLog(env.method, 64);
      if (env.id === undefined) return b.refuse(kind, `${why}: ${what} dropped`);
      b.refuse(kind, `${why}: ${what} (id ${shownId(env.id)}) refused`);
      return this.writeLine(refusalLine(env.id, kind, why, limit));
    }
    const error = {
      code: INTAKE_REFUSED_CODE,
      message: `proclease refused the agent's answer: ${why}`,
      data: { refusal: kind, limit },
    };
    const mine = env.id !== undefined ? this.adopted.get(idKey(env.id)) : undefined;
    if (env.id !== undefined && (this.sent.delete(idKey(env.id)) || mine !== undefined)) {
      b.refuse(kind, `${why}: the agent's answer to request ${shownId(env.id)} refused, the request fails`);
      if (mine !== undefined) {
        this.adopted.delete(idKey(env.id));
        return mine({ error });
      }
      return c.enqueue(this.inward({ jsonrpc: "2.0", id: env.id, error }));
    }
    b.refuse(kind, `${why}: dropped`);
  }

  /** Takes over an earlier gateway's request by its wire id: its answer goes to `answer`, never to the SDK. */
  adopt(id: JsonRpcId, answer: AdoptedAnswer): void {
    this.adopted.set(idKey(id), answer);
  }

  /**
   * Hands over an adopted request's answer once the SDK has handled every
   * message read before it. The SDK's own answers come through its queue in
   * order, but an adopted one goes to its turn directly: given at once, it
   * overtook the turn's last session/update still waiting in that queue, and
   * the turn ended without it. The SDK reads one message a microtask and
   * handles each in microtasks, so an empty queue and then one turn of the
   * loop mean it has handled them all; nothing more is read meanwhile.
   */
  private async answerAdopted(c: Controller, answer: () => void): Promise<void> {
    this.adoptedAnswer = undefined;
    // bounded: a reader that stopped reading (its connection closed) must not hold the answer, nor spin the loop
    for (let turns = 0; !this.cancelled && (c.desiredSize ?? 1) < 1 && turns < ADOPTED_WAIT_TURNS; turns++)
      await this.yieldToLoop();
    await this.yieldToLoop();
    answer();
  }

  /** Requests of an earlier gateway still unanswered: each answered with `reason` (the connection ended). */
  failAdopted(reason: Error): void {
    for (const answer of this.adopted.values()) answer({ error: reason });
    this.adopted.clear();
  }

  /** A response as the SDK knows its id (the offset taken off). */
  private inward(m: Record<string, unknown>): AnyMessage {
    if (this.offset === 0 || typeof m.id !== "number") return m as AnyMessage;
    return { ...m, id: m.id - this.offset } as AnyMessage;
  }

  /** A gateway message with its numeric request id (or a cancelled request's) above the offset. */
  private outward(m: Record<string, unknown>): Record<string, unknown> {
    if (this.offset === 0) return m;
    if ("method" in m && typeof m.id === "number") return { ...m, id: m.id + this.offset };
    const p = m.params as { requestId?: unknown } | undefined;
    if (m.method === "$/cancel_request" && typeof p?.requestId === "number")
      return { ...m, params: { ...p, requestId: p.requestId + this.offset } };
    return m;
  }

  /** A message from the SDK: serialised, charged, handed to the pipe (answer-writer.ts). */
  private async send(msg: AnyMessage): Promise<void> {
    if (this.outputError !== undefined) throw this.outputError;
    if (!this.writer.open)
      throw Object.assign(new Error("the adapter's stdin is closed"), { code: "ERR_STREAM_DESTROYED" });
    const m = this.outward(msg as Record<string, unknown>);
    msg = m as AnyMessage;
    const id = m.id;
    const request = "method" in m;
    if (request && isId(id)) this.sent.add(idKey(id));
    await this.writer.writeMessage(msg);
    // after the answer's bytes are queued: its reservation leaves as its bytes come in
    if (!request && isId(id)) this.i.budget.answered(idKey(id));
  }

  private async sendCounted(msg: AnyMessage): Promise<void> {
    try {
      await this.send(msg);
    } finally {
      this.writesDone++;
      for (const w of [...this.writeWaiters]) w();
    }
  }

  /**
   * Resolves once every message the SDK queued so far is in the adapter's
   * stdin pipe, or after `ms`. The SDK writes a message some microtasks (or,
   * behind a long message, loop turns) after it was asked; a caller about to
   * let go of the pipes (detach) waits here, or what it sent would be lost
   * with the pipe: a turn its caller is told goes on, or an answer (a
   * permission, a read) the agent then waits for in vain.
   */
  async writesFlushed(ms: number): Promise<void> {
    const target = this.writesAsked;
    const deadline = performance.now() + ms;
    const out = this.i.output;
    const done = (): boolean =>
      this.cancelled || out.destroyed || out.writableEnded || (this.writesDone >= target && out.writableLength === 0);
    while (!done() && performance.now() < deadline) {
      // woken by a message written or the pipe drained, and every 10 ms besides: a short write never emits "drain"
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          out.off("drain", wake);
          this.writeWaiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, 10);
        out.once("drain", wake);
        this.writeWaiters.add(wake);
      });
    }
  }

  /** A line of the intake's own (a refusal), after whatever is being written. */
  private writeLine(line: string): void {
    if (this.outputError === undefined) this.writer.writeLine(line);
  }

  /** Lets the loop turn: the SDK finishes what it was handed (microtasks), then timers and other sessions run. */
  private async yieldToLoop(): Promise<void> {
    await new Promise<void>((r) => setImmediate(r));
    this.sinceDrain = 0;
    this.sliceStart = performance.now();
  }

  /**
   * The SDK finishes what it was handed, without a turn of the loop: Node
   * runs a nextTick queued from a microtask once the microtask queue is empty.
   */
  private async drainMicrotasks(): Promise<void> {
    await new Promise<void>((r) => process.nextTick(r));
    this.sinceDrain = 0;
  }
}

function isBlank(line: Buffer): boolean {
  for (const c of line) if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return false;
  return true;
}

function errorLine(id: JsonRpcId, code: number, message: string): string {
  return `${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`;
}

function refusalLine(id: JsonRpcId, refusal: IntakeRefusal, why: string, limit: number): string {
  return `${JSON.stringify({ jsonrpc: "2.0", id, error: { code: INTAKE_REFUSED_CODE, message: `proclease refused the message: ${why}`, data: { refusal, limit } } })}\n`;
}
