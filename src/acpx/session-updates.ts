/**
 * Where a session's `session/update` notifications go, in arrival order and
 * unmodified (the SDK's parsed SessionUpdate objects):
 * - while a turn started with startTurn runs, to that turn's events;
 * - otherwise (between turns, during a prompt() turn, the replay of a
 *   session/load) to the session's onUpdate listeners;
 * - with no listener attached yet, into a backlog that the first listener
 *   receives before anything newer (an `available_commands_update` sent
 *   right after session/new is not lost). The backlog holds at most
 *   MAX_BACKLOG updates; past that the oldest are dropped and counted
 *   (`dropped`), so an agent that floods an unwatched session cannot grow
 *   the gateway's memory without bound.
 * Every update is also shown to the session's state tracker first (modes,
 * config options, commands, usage: session-controls.ts), whoever receives it.
 * Delivery is synchronous from the SDK's notification handler: no queue hop
 * is added between the wire and the consumer.
 */
import type { SessionNotification, SessionUpdate } from "@agentclientprotocol/sdk";

/** updates kept for a session nobody listens to yet */
export const MAX_BACKLOG = 10_000;

/** onUpdate's listener: the update, and the notification that carried it (its sessionId and _meta). */
export type SessionUpdateListener = (update: SessionUpdate, notification: SessionNotification) => void;

export interface UpdateRouterOptions {
  /** sees every update first (state tracking); must not throw */
  observe?: (update: SessionUpdate) => void;
  /** a listener threw: reported, never rethrown into the connection */
  onListenerError?: (err: unknown) => void;
}

export class UpdateRouter {
  private sink: { sessionId: string; push: (u: SessionUpdate) => void } | undefined;
  private readonly listeners = new Set<SessionUpdateListener>();
  private backlog: SessionNotification[] = [];
  /** updates dropped from a full backlog */
  dropped = 0;

  constructor(private readonly opts: UpdateRouterOptions = {}) {}

  /** The SDK's session/update handler. */
  readonly deliver = (n: SessionNotification): void => {
    this.opts.observe?.(n.update);
    const sink = this.sink;
    if (sink !== undefined && n.sessionId === sink.sessionId) {
      sink.push(n.update);
      return;
    }
    if (this.listeners.size === 0) {
      if (this.backlog.length >= MAX_BACKLOG) {
        this.backlog.shift();
        this.dropped++;
      }
      this.backlog.push(n);
      return;
    }
    for (const l of this.listeners) this.call(l, n);
  };

  /** Routes the session's updates to a turn until the returned function is called. */
  attachTurn(sessionId: string, push: (u: SessionUpdate) => void): () => void {
    const sink = { sessionId, push };
    this.sink = sink;
    return () => {
      if (this.sink === sink) this.sink = undefined;
    };
  }

  /** Adds a listener; the backlog goes to it first. Returns the unsubscribe. */
  subscribe(listener: SessionUpdateListener): () => void {
    const held = this.backlog;
    this.backlog = [];
    for (const n of held) this.call(listener, n);
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Forgets every listener and the backlog (the session is over). */
  clear(): void {
    this.listeners.clear();
    this.backlog = [];
    this.sink = undefined;
  }

  private call(l: SessionUpdateListener, n: SessionNotification): void {
    try {
      l(n.update, n);
    } catch (err) {
      this.opts.onListenerError?.(err);
    }
  }
}
