/**
 * Where a session's `session/update` notifications go, in arrival order and
 * unmodified (the SDK's parsed SessionUpdate objects):
 * - while a turn started with startTurn runs, to that turn's events (with
 *   the update's estimated size: the turn bounds its unread bytes by
 *   holding the adapter's stdout, turn-stream.ts);
 * - otherwise (between turns, during a prompt() turn, the replay of a
 *   session/load) to the session's onUpdate listeners, synchronously;
 * - with no listener attached yet, into a backlog that the first listener
 *   receives before anything newer (an `available_commands_update` sent
 *   right after session/new is not lost). Nobody may ever read it, so it is
 *   not backpressured (that would stall the session's answers) but bounded:
 *   at most `sessionBacklogBytes` (update-bytes.ts) and MAX_BACKLOG
 *   updates; past either the oldest are dropped (an update larger than the
 *   whole bound is dropped itself). Drops are never silent: they are
 *   counted (`dropped`, `droppedBytes`), and the first update a listener
 *   receives after a gap carries it as the listener's third argument.
 * Every update is also shown to the session's state tracker first (modes,
 * config options, commands, usage: session-controls.ts), whoever receives it.
 * Delivery is synchronous from the SDK's notification handler: no queue hop
 * is added between the wire and the consumer.
 */
import type { SessionNotification, SessionUpdate } from "@agentclientprotocol/sdk";
import { DEFAULT_SESSION_BACKLOG_BYTES, estimateJsonBytes } from "./update-bytes.js";

/** updates kept for a session nobody listens to yet (beside the byte bound) */
export const MAX_BACKLOG = 10_000;

/** Updates the session dropped right before the one that carries this (nobody listened and the backlog was full). */
export interface DroppedUpdates {
  count: number;
  /** their estimated JSON size */
  bytes: number;
}

/**
 * onUpdate's listener: the update, the notification that carried it (its
 * sessionId and _meta), and, when updates were dropped just before it,
 * how many.
 */
export type SessionUpdateListener = (
  update: SessionUpdate,
  notification: SessionNotification,
  dropped?: DroppedUpdates,
) => void;

/** A turn's sink: the update and its estimated size. */
export type TurnSink = (update: SessionUpdate, bytes: number) => void;

export interface UpdateRouterOptions {
  /** sees every update first (state tracking); must not throw */
  observe?: (update: SessionUpdate) => void;
  /** a listener threw: reported, never rethrown into the connection */
  onListenerError?: (err: unknown) => void;
  /** the backlog started dropping (once until a listener attaches) */
  onBacklogFull?: (boundBytes: number) => void;
  /** bound of the backlog in estimated bytes; default DEFAULT_SESSION_BACKLOG_BYTES */
  backlogBytes?: number;
}

interface Held {
  n: SessionNotification;
  bytes: number;
  gap: DroppedUpdates | undefined;
}

export class UpdateRouter {
  private sink: { sessionId: string; push: TurnSink } | undefined;
  private readonly listeners = new Set<SessionUpdateListener>();
  private backlog: Held[] = [];
  private head = 0;
  private backlogBytes = 0;
  /** dropped after the last held update (or with nothing held): goes with the next delivered one */
  private pendingGap: DroppedUpdates | undefined;
  private warned = false;
  private readonly bound: number;
  /** updates dropped from a full backlog */
  dropped = 0;
  /** their estimated JSON size */
  droppedBytes = 0;

  constructor(private readonly opts: UpdateRouterOptions = {}) {
    this.bound = opts.backlogBytes ?? DEFAULT_SESSION_BACKLOG_BYTES;
  }

  /** The SDK's session/update handler. */
  readonly deliver = (n: SessionNotification): void => {
    this.opts.observe?.(n.update);
    const sink = this.sink;
    if (sink !== undefined && n.sessionId === sink.sessionId) {
      sink.push(n.update, estimateJsonBytes(n));
      return;
    }
    if (this.listeners.size === 0) return this.hold(n);
    const gap = this.pendingGap;
    this.pendingGap = undefined;
    for (const l of this.listeners) this.call(l, n, gap);
  };

  /** Routes the session's updates to a turn until the returned function is called. */
  attachTurn(sessionId: string, push: TurnSink): () => void {
    const sink = { sessionId, push };
    this.sink = sink;
    return () => {
      if (this.sink === sink) this.sink = undefined;
    };
  }

  /** No turn receives updates any more (the session is closing). */
  detachTurn(): void {
    this.sink = undefined;
  }

  /** Adds a listener; the backlog goes to it first. Returns the unsubscribe. */
  subscribe(listener: SessionUpdateListener): () => void {
    const held = this.backlog.slice(this.head);
    this.backlog = [];
    this.head = 0;
    this.backlogBytes = 0;
    this.warned = false;
    for (const h of held) this.call(listener, h.n, h.gap);
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Forgets every listener and the backlog (the session is over). */
  clear(): void {
    this.listeners.clear();
    this.backlog = [];
    this.head = 0;
    this.backlogBytes = 0;
    this.sink = undefined;
  }

  /** Into the backlog, the oldest out while it is over either bound. */
  private hold(n: SessionNotification): void {
    const bytes = estimateJsonBytes(n);
    if (bytes > this.bound) {
      this.pendingGap = addGap(this.pendingGap, bytes);
      this.countDrop(bytes);
      return;
    }
    this.backlog.push({ n, bytes, gap: this.pendingGap });
    this.pendingGap = undefined;
    this.backlogBytes += bytes;
    while (this.backlogBytes > this.bound || this.backlog.length - this.head > MAX_BACKLOG) this.dropOldest();
    if (this.head > 1024 && this.head * 2 > this.backlog.length) {
      this.backlog = this.backlog.slice(this.head);
      this.head = 0;
    }
  }

  private dropOldest(): void {
    const old = this.backlog[this.head]!;
    this.backlog[this.head++] = undefined as unknown as Held;
    this.backlogBytes -= old.bytes;
    this.countDrop(old.bytes);
    // the gap before the dropped one, and the dropped one, now lie before the next held update
    const gap = addGap(old.gap, old.bytes);
    const next = this.backlog[this.head]!;
    next.gap = next.gap === undefined ? gap : { count: gap.count + next.gap.count, bytes: gap.bytes + next.gap.bytes };
  }

  private countDrop(bytes: number): void {
    this.dropped++;
    this.droppedBytes += bytes;
    if (this.warned) return;
    this.warned = true;
    this.opts.onBacklogFull?.(this.bound);
  }

  private call(l: SessionUpdateListener, n: SessionNotification, gap: DroppedUpdates | undefined): void {
    try {
      if (gap === undefined) l(n.update, n);
      else l(n.update, n, { ...gap });
    } catch (err) {
      this.opts.onListenerError?.(err);
    }
  }
}

function addGap(gap: DroppedUpdates | undefined, bytes: number): DroppedUpdates {
  return gap === undefined ? { count: 1, bytes } : { count: gap.count + 1, bytes: gap.bytes + bytes };
}
