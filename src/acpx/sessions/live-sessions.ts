/**
 * Live-session bookkeeping of one controller: which sessions it serves, which
 * leases an ensure or close is working on right now, and the controller's
 * own levers on a wrapper it spawned (the lifeline, and a SIGKILL of its
 * child while Node has not reaped it). Decides nothing about leases: those
 * move only through src/ownership/lifecycle/lifecycle.ts.
 */
import type { ContainmentSupport } from "../../containment/index.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { signalUnreapedChild } from "../../facts/signal.js";
import { escalate, type LeaseStore, type LifecycleDeps, type ReleaseResult } from "../../ownership/index.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import type { AcpClient } from "../connection/acp-client.js";
import { sessionEndedError } from "../connection/prompt-turn.js";
import type { ControlTarget } from "../connection/session-controls.js";
import type { ConversationConfig, SessionConversation } from "../connection/conversation.js";
import { AcpxNoSessionError, AcpxSessionClosedError } from "../report/errors.js";
import { AcpxRawSessionError } from "./raw-session-error.js";
import type { InstalledWrapper } from "../launch/install-wrapper.js";
import type { LaunchedWrapper, SessionPipes } from "../launch/launch.js";
import type { DurableDeps } from "../durable/options.js";
import type { SessionStore } from "./session-store.js";
import type { AcpRuntimeHandle } from "../connection/types.js";
import type { AcpxLifecycleControllerOptions } from "./types.js";

/** What every part of the controller shares. */
export interface ControllerDeps {
  stateDir: string;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  gatewayInstanceId: string;
  leases: LeaseStore;
  sessions: SessionStore;
  wrapper: InstalledWrapper;
  graceMs: number;
  retentionMs: number;
  handshakeTimeoutMs: number;
  startTimeoutMs: number;
  nodePath: string;
  onEnsureTiming: AcpxLifecycleControllerOptions["onEnsureTiming"];
  /** whether each lease gets its own cgroup, and why not (detected once at start) */
  containment: ContainmentSupport;
  /** where the startup reap runs (AcpxLifecycleControllerOptions.startupReconcile) */
  startupReconcile: "auto" | "worker" | "calling-thread";
  /** what every session's conversation shares (permissions, fs, terminals, logger) */
  conversation: ConversationConfig;
  /** durable sessions (durable/options.ts), with where their wrappers listen; undefined: off */
  durable: DurableDeps | undefined;
}

export function lifecycleDeps(d: ControllerDeps): LifecycleDeps {
  return {
    store: d.leases,
    facts: d.facts,
    signaller: d.signaller,
    graceMs: d.graceMs,
    gatewayInstanceId: d.gatewayInstanceId,
  };
}

export interface LiveSession {
  handle: AcpRuntimeHandle;
  /** the wrapper this controller spawned, or one it re-adopted (durable/attached.ts) */
  launched: SessionPipes;
  /** absent for a raw adapter (spawnRawAdapter): its plugin speaks ACP itself */
  client: AcpClient | undefined;
  /** updates, permissions, fs, terminals and what the agent advertised */
  conv: SessionConversation;
  /** the running prompt, if any (one turn at a time per session) */
  turn: Promise<unknown> | undefined;
  closing: boolean;
  closeReason: string | undefined;
  /**
   * A close ran and left the lease open or closing while the wrapper still
   * ran: the session is over (its ACP connection closed), only the handle
   * is kept; the lease is retried by the maintenance timer, the startup
   * reap, or the next close.
   */
  closeSettling?: boolean;
}

export class LiveSessions {
  private readonly byKey = new Map<string, LiveSession>();
  /** lease ids an ensure or close of this controller is working on right now */
  readonly inFlight = new Set<string>();
  /** leases a reconcile on another thread holds (reconcile-away.ts), and when it lets them go */
  private lent: { ids: Set<string>; back: Promise<void> } | undefined;

  constructor(private readonly graceMs: number) {}

  get(key: string): LiveSession | undefined {
    return this.byKey.get(key);
  }

  add(live: LiveSession): void {
    this.byKey.set(live.handle.sessionKey, live);
  }

  /** The live session a handle names, only when the handle is that session's (its lease id): a stale handle never reaches a newer session. */
  forHandle(handle: Pick<AcpRuntimeHandle, "sessionKey" | "leaseId">): LiveSession | undefined {
    const live = this.byKey.get(handle.sessionKey);
    return live && live.handle.leaseId === handle.leaseId ? live : undefined;
  }

  /** Like forHandle, but says why there is none. */
  require(handle: Pick<AcpRuntimeHandle, "sessionKey" | "leaseId">): LiveSession {
    const live = this.byKey.get(handle.sessionKey);
    if (!live) {
      throw new AcpxNoSessionError(
        handle.sessionKey,
        "it was closed, or was started by an earlier gateway run; call ensureSession",
      );
    }
    if (live.handle.leaseId !== handle.leaseId) {
      throw new AcpxNoSessionError(
        handle.sessionKey,
        `the handle names lease ${handle.leaseId}, the live session is ${live.handle.leaseId}`,
      );
    }
    return live;
  }

  /** Why a batch reconcile must leave this lease alone now (a session served, or an ensure/close in flight); undefined when it may proceed. */
  busy(lease: Pick<ProcessLease, "leaseId">): string | undefined {
    if (this.inFlight.has(lease.leaseId)) return "an ensure or close of this gateway is working on it";
    for (const s of this.byKey.values())
      if (s.handle.leaseId === lease.leaseId && !s.closeSettling) return "a session this gateway serves";
    return undefined;
  }

  /**
   * Lends leases to a reconcile on another thread until `back` is called:
   * this controller writes none of them meanwhile (`held`), as that thread's
   * store does not serialise its writes with ours.
   */
  lend(): { take(leaseId: string): void; back(): void } {
    let back = () => undefined as void;
    const lent = { ids: new Set<string>(), back: new Promise<void>((r) => (back = r)) };
    this.lent = lent;
    return {
      take: (leaseId) => void lent.ids.add(leaseId),
      back: () => {
        if (this.lent === lent) this.lent = undefined;
        back();
      },
    };
  }

  /** Whether leases are lent out now (lend). */
  get lending(): Promise<void> | undefined {
    return this.lent?.back;
  }

  /**
   * Runs `fn` with `leaseId` in flight: a reconcile that lists it from now on
   * leaves it alone (busy); one on another thread that took it first is
   * waited for.
   */
  async held<T>(leaseId: string, fn: () => Promise<T>): Promise<T> {
    this.inFlight.add(leaseId);
    try {
      while (this.lent?.ids.has(leaseId)) await this.lent.back;
      return await fn();
    } finally {
      this.inFlight.delete(leaseId);
    }
  }

  /** The lease ids busy() names now, for a reconcile on another thread (its leftovers' `isLive`). */
  busyIds(): string[] {
    const known = new Set([...this.inFlight, ...[...this.byKey.values()].map((s) => s.handle.leaseId)]);
    return [...known].filter((leaseId) => this.busy({ leaseId }) !== undefined);
  }

  /** A batch reconcile settled `leaseId`: a closed session still held for it is let go. */
  afterSettled(leaseId: string, state: ProcessLease["state"]): void {
    if (state !== "closed" && state !== "lost") return;
    for (const [key, s] of this.byKey) if (s.handle.leaseId === leaseId && s.closeSettling) this.drop(key, s);
  }

  /** Ends our side of a live session (lifeline, stdin), waits for the wrapper to exit, and says whether it reported the adapter's exit. */
  async release(live: LiveSession): Promise<ReleaseResult> {
    const running = live.launched.howEnded() === undefined;
    askToEnd(live.launched);
    return exitWitnessed(live.launched, running, await live.launched.waitExit(this.graceMs + WRAPPER_EXIT_MARGIN_MS));
  }

  drop(key: string, live: LiveSession | undefined): void {
    if (live && this.byKey.get(key) === live) {
      this.byKey.delete(key);
      live.client?.close(new AcpxSessionClosedError(key, live.closeReason));
      live.launched.endLifeline();
      // terminals end with the session; the router forgets its listeners
      void live.conv.end(live.closeReason ?? "the session was dropped").then(() => live.conv.router.clear());
    }
  }

  /**
   * A durable session let go (detach): our ends of its pipes close, so its
   * wrapper starts its window; its terminals run on with it; this
   * controller no longer speaks for it.
   */
  letGo(live: LiveSession, reason: Error): void {
    if (this.byKey.get(live.handle.sessionKey) !== live) return;
    this.byKey.delete(live.handle.sessionKey);
    // marked first: the end its wrapper may reach later is not this controller's to report
    live.closing = true;
    live.launched.letGo();
    live.client?.close(reason);
    live.conv.permissions.cancelAll(reason.message);
  }

  /**
   * detach(), before letGoDurable: everything each durable session's SDK
   * queued (a turn started, an answer given) reaches its wrapper (at most
   * `ms`), so a turn its caller was told goes on is in flight when the pipes
   * close, and an answer the agent waits for is with it, not lost. A
   * second bounds it: a pipe that takes nothing (a stopped wrapper) must not
   * hold the detach.
   */
  async flushDurableWrites(ms = 1000): Promise<void> {
    await Promise.all(this.all().map((l) => (l.launched.durable ? l.client?.writesFlushed(ms) : undefined)));
  }

  /** detach(): every running durable session let go (letGo); the keys of the others, to be closed. */
  letGoDurable(reason: Error): string[] {
    const others: string[] = [];
    for (const l of this.all()) {
      if (l.launched.durable && !l.closing && l.launched.howEnded() === undefined) this.letGo(l, reason);
      else others.push(l.handle.sessionKey);
    }
    return others;
  }

  /** Sessions keep running; only their hold on our event loop is released. */
  unrefAll(): void {
    for (const s of this.byKey.values()) s.launched.unref();
  }

  all(): LiveSession[] {
    return [...this.byKey.values()];
  }
}

/** The first close to reach a live session marks it, with its reason; a later one keeps that reason. */
export function markSessionClosing(live: LiveSession | undefined, reason: string | undefined): void {
  if (live && !live.closing) {
    live.closing = true;
    live.closeReason = reason;
  }
}

/** How long past the wrapper's own grace its exit is waited for (it runs the kill order on its adapter's group first), and again after a KILL. */
const WRAPPER_EXIT_MARGIN_MS = 2000;

/** A wrapper's TERM: its lifeline's end and stdin's EOF; it then ends its adapter's group itself, within the grace. */
function askToEnd(launched: SessionPipes): void {
  launched.endLifeline();
  launched.stdin.destroy();
}

/**
 * Our lever on a wrapper we spawned and that is not (or no longer) a live
 * session, through the one kill order (escalate): its TERM is askToEnd, its
 * KILL a SIGKILL to our child while unreaped.
 */
export async function releaseLaunched(launched: LaunchedWrapper, graceMs: number): Promise<ReleaseResult> {
  const running = launched.howEnded() === undefined;
  const how = await escalate(
    {
      term: () => {
        askToEnd(launched);
        return true;
      },
      ended: (ms) => launched.waitExit(ms),
      force: (sig) => signalUnreapedChild(launched.child, sig, launched.exitStatus() !== undefined),
    },
    graceMs + WRAPPER_EXIT_MARGIN_MS,
  );
  return exitWitnessed(
    launched,
    running,
    how === "ended-after-term" || (await launched.waitExit(WRAPPER_EXIT_MARGIN_MS)),
  );
}

/**
 * The adapter is the wrapper's child and the wrapper reaps it: an exit the
 * wrapper reported (read once its lifeline is drained) is the lease root's
 * exit seen through our own child. It counts as ended at our request only
 * when nothing had told us of an end before the release (`running`): the
 * lifeline's end and stdin's EOF are both our levers, and an adapter that
 * answers either (the wrapper's sweep, or its own exit on EOF, whichever
 * comes first) ended under our eyes. One that had ended on its own before
 * stays the table's to judge (lost, ended-on-its-own); one whose report was
 * still in the pipe at that moment reads closed, not lost, and no signal
 * rests on either. A wrapper that did not exit, or exited without that
 * report, witnessed nothing.
 */
async function exitWitnessed(launched: SessionPipes, running: boolean, exited: boolean): Promise<ReleaseResult> {
  return { rootExitObserved: running && exited && (await launched.ended).kind === "adapter-exited" };
}

export function assertHandle(handle: AcpRuntimeHandle): void {
  if (
    typeof handle !== "object" ||
    handle === null ||
    typeof handle.sessionKey !== "string" ||
    typeof handle.leaseId !== "string"
  ) {
    throw new TypeError("handle must be an AcpRuntimeHandle from ensureSession");
  }
}

/** A live session's controls (setMode, setConfigOption): refused typed while it closes, after its processes ended, or for a raw adapter. */
export function controlTargetOf(live: LiveSession, timeoutMs: number): ControlTarget {
  const key = live.handle.sessionKey;
  if (live.closing) throw new AcpxSessionClosedError(key, live.closeReason);
  const ended = sessionEndedError(key, live.launched);
  if (ended) throw ended;
  if (live.client === undefined) throw new AcpxRawSessionError(key);
  return {
    sessionKey: key,
    acpSessionId: live.handle.acpSessionId,
    client: live.client,
    state: live.conv.state,
    timeoutMs,
  };
}
