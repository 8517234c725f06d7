/**
 * One session's budget: everything its agent can make the gateway hold,
 * counted and charged before it is allocated, in one place.
 * - Requests in flight: an agent → client request (fs, permission,
 *   terminal) is admitted while fewer than `maxRequestsInFlight` are
 *   unanswered; past it the agent gets an ACP error at once. Their bytes
 *   (each request's line as read) are charged from admission to answer:
 *   past `maxRequestBytesInFlight` the agent's stdout is held until the
 *   answers bring them down to half. A request holds its parsed message
 *   (and the gateway's work on it) until it is answered, so their count
 *   alone does not bound memory: 64 writes of a few MiB each do not fit.
 * - Answer bytes: every line written to the agent's stdin is charged until
 *   its pipe took it, and an answer that may be large (an fs read, a
 *   terminal's output) reserves its size before it is built (a read
 *   reserves the read limit before reading). Past `maxQueuedAnswerBytes`
 *   the agent's stdout is held (stdout-backpressure.ts): it blocks on its
 *   write and sends nothing more until it reads its stdin, and a reservation
 *   waits until the queue drains (one larger than the whole bound goes
 *   through alone, when nothing else is queued).
 * - Terminals, counted from the moment terminal/create is accepted (a spawn
 *   in flight holds its slot), up to the session's `maxTerminals`.
 * - Refusals: each one (a message too large or too deep, a response to an
 *   id never sent, a request over a bound, …) is counted by kind and
 *   logged through the session's rate-limited log (logger.ts SessionLog).
 *   The per-message bounds are applied where lines are read
 *   (intake-stream.ts), which reports here.
 * At the session's end, and when one of its holds lets go, the C
 * allocator's freed pages go back to the system (trimFreedMemory: glibc
 * keeps an arena's free middle resident after a flood).
 * A session whose agent keeps passing bounds is not ended for it: each
 * excess is refused at its own cost (bounded), the counts are in
 * sessionStatus, and ending the session stays the caller's decision.
 */
import type { ResolvedIntakeLimits } from "./intake-limits.js";
import { SessionLog, type ControllerLogger } from "../report/logger.js";
import { trimFreedMemory } from "../../facts/malloc-threshold.js";

/** Why something the agent sent was refused or dropped (sessionStatus `intake.refused`). */
export type IntakeRefusal =
  | "message-too-large"
  | "json-too-deep"
  | "json-too-many-values"
  | "parse-error"
  | "invalid-message"
  | "invalid-notification"
  | "unknown-response"
  | "too-many-requests"
  | "duplicate-request-id"
  | "id-too-long"
  | "too-many-terminals";

/** What sessionStatus reports of the session's budget. */
export interface IntakeStatus {
  /** agent → client requests unanswered now */
  requestsInFlight: number;
  /** bytes of those requests (their lines as read) */
  requestBytesInFlight: number;
  /** how many times the request bytes passed their bound and held the agent's stdout */
  requestHolds: number;
  /** answer bytes queued for the agent or reserved by answers being built */
  queuedAnswerBytes: number;
  /** how many times the answer queue passed its bound and held the agent's stdout */
  answerHolds: number;
  /** what was refused or dropped, by kind */
  refused: Partial<Record<IntakeRefusal, number>>;
  /** session log lines dropped over `maxLogBytesPerSecond` */
  logLinesDropped: number;
}

/** What the budget holds while the answer queue is over its bound (the session's StdoutGate). */
export interface HoldableStdout {
  hold(holder: object): void;
  release(holder: object): void;
  holds(holder: object): boolean;
}

/** The answer budget of one admitted request, for a handler that builds a large answer. */
export interface AnswerBudget {
  /** Waits until `bytes` fit in the queue, then holds them for this request's answer (replacing what it held). */
  reserve(bytes: number): Promise<void>;
  /** Holds `bytes` now instead of what was reserved (the answer turned out smaller). */
  resize(bytes: number): void;
}

interface Waiter {
  key: string;
  bytes: number;
  resolve: () => void;
  reject: (e: Error) => void;
}

export class SessionBudget {
  readonly log: SessionLog;
  private readonly inFlight = new Map<string, number>();
  private readonly requestBytes = new Map<string, number>();
  private requestBytesHeld = 0;
  /** the gate's holder while the request bytes are over their bound (the budget itself holds it for the answer queue) */
  private readonly requestHolder = {};
  private requestHolds = 0;
  private queued = 0;
  private reserved = 0;
  private waiters: Waiter[] = [];
  private gate: HoldableStdout | undefined;
  private holds = 0;
  private terminals = 0;
  private closedWith: Error | undefined;
  private readonly refusedBy: Partial<Record<IntakeRefusal, number>> = {};

  constructor(
    readonly limits: ResolvedIntakeLimits,
    base: ControllerLogger,
    private readonly label: () => string,
  ) {
    this.log = new SessionLog(base, limits.maxLogBytesPerSecond, label);
  }

  /** The stdout the answer queue holds when it passes its bound. */
  bindStdout(gate: HoldableStdout): void {
    this.gate = gate;
  }

  /** Counts a refusal and logs it (rate-limited, escaped). */
  refuse(kind: IntakeRefusal, why: string): void {
    this.refusedBy[kind] = (this.refusedBy[kind] ?? 0) + 1;
    this.log.warn?.(`${JSON.stringify(this.label())}: ${why} (${kind})`, { sessionKey: this.label(), refusal: kind });
  }

  // ── requests in flight ──

  /**
   * Admits an agent request of `bytes` by its id key, synchronously: "full"
   * past the count bound, "duplicate" for an id already unanswered. Its
   * bytes are charged even past their bound (the line is already read): the
   * bound holds stdout, so what is admitted past it is what was read before
   * the hold took effect.
   */
  admitRequest(key: string, bytes: number): "ok" | "full" | "duplicate" {
    if (this.inFlight.has(key)) return "duplicate";
    if (this.inFlight.size >= this.limits.maxRequestsInFlight) return "full";
    this.inFlight.set(key, 0);
    this.requestBytes.set(key, bytes);
    this.requestBytesHeld += bytes;
    this.settle();
    return "ok";
  }

  /** The request's answer is being written: it leaves the flight, and its reservation the budget (the bytes are queued instead). */
  answered(key: string): void {
    const held = this.inFlight.get(key);
    if (held === undefined) return;
    this.inFlight.delete(key);
    this.requestBytesHeld -= this.requestBytes.get(key) ?? 0;
    this.requestBytes.delete(key);
    this.waiters = this.waiters.filter((w) => {
      if (w.key !== key) return true;
      w.reject(new Error("the request was answered while its answer waited for room"));
      return false;
    });
    this.reserved -= held;
    this.settle();
  }

  /** The answer budget of an admitted request (a no-op for one that is not in flight). */
  answerBudget(key: string): AnswerBudget {
    return {
      reserve: (bytes) => this.reserve(key, bytes),
      resize: (bytes) => this.resize(key, bytes),
    };
  }

  private reserve(key: string, bytes: number): Promise<void> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (!this.inFlight.has(key)) return Promise.resolve();
    this.resize(key, 0);
    if (this.fits(bytes)) {
      this.take(key, bytes);
      this.settle();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => this.waiters.push({ key, bytes, resolve, reject }));
  }

  private resize(key: string, bytes: number): void {
    const held = this.inFlight.get(key);
    if (held === undefined) return;
    this.inFlight.set(key, bytes);
    this.reserved += bytes - held;
    this.settle();
  }

  private take(key: string, bytes: number): void {
    this.inFlight.set(key, bytes);
    this.reserved += bytes;
  }

  private fits(bytes: number): boolean {
    const used = this.queued + this.reserved;
    return used === 0 || used + bytes <= this.limits.maxQueuedAnswerBytes;
  }

  // ── answer bytes queued ──

  /** A line of `bytes` was handed to the agent's stdin. */
  queue(bytes: number): void {
    this.queued += bytes;
    this.settle();
  }

  /** The agent's stdin pipe took `bytes` (or they were dropped with it). */
  drained(bytes: number): void {
    this.queued -= bytes;
    this.settle();
  }

  /** Admits the reservations that fit, in order, then holds or lets go of stdout by the bytes used now. */
  private settle(): void {
    while (this.waiters.length > 0 && this.fits(this.waiters[0]!.bytes)) {
      const w = this.waiters.shift()!;
      this.take(w.key, w.bytes);
      w.resolve();
    }
    if (this.holdWhileOver(this, this.queued + this.reserved, this.limits.maxQueuedAnswerBytes)) this.holds++;
    if (this.holdWhileOver(this.requestHolder, this.requestBytesHeld, this.limits.maxRequestBytesInFlight))
      this.requestHolds++;
  }

  /** Holds stdout for `holder` once `used` passes `max`, lets go at half; true when a hold began. */
  private holdWhileOver(holder: object, used: number, max: number): boolean {
    const gate = this.gate;
    if (gate === undefined || this.closedWith !== undefined) return false;
    if (used > max && !gate.holds(holder)) {
      gate.hold(holder);
      return true;
    }
    if (used <= max / 2 && gate.holds(holder)) {
      gate.release(holder);
      void trimFreedMemory();
    }
    return false;
  }

  // ── terminals ──

  /** Takes a terminal slot at acceptance, synchronously; false when `max` are taken (counted as a refusal by the caller). */
  takeTerminal(max: number): boolean {
    if (this.terminals >= max) return false;
    this.terminals++;
    return true;
  }

  /** A terminal (or a spawn that made none) gave its slot back. */
  returnTerminal(): void {
    if (this.terminals > 0) this.terminals--;
  }

  /** The connection is over: reservations waiting fail, stdout is let go. */
  close(reason: Error): void {
    if (this.closedWith) return;
    this.closedWith = reason;
    for (const w of this.waiters.splice(0)) w.reject(reason);
    for (const holder of [this, this.requestHolder]) if (this.gate?.holds(holder)) this.gate.release(holder);
    void trimFreedMemory();
  }

  status(): IntakeStatus {
    return {
      requestsInFlight: this.inFlight.size,
      requestBytesInFlight: this.requestBytesHeld,
      requestHolds: this.requestHolds,
      queuedAnswerBytes: this.queued + this.reserved,
      answerHolds: this.holds,
      refused: { ...this.refusedBy },
      logLinesDropped: this.log.dropped,
    };
  }
}
