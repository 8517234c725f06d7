/**
 * What a controller does once dispose() or shutdown() was called, in one
 * place: every method refuses at once with AcpxControllerDisposedError
 * (a promise-returning one rejects, startTurn and onUpdate throw), through
 * one proxy in front of the controller, so no method can forget the check.
 * The controller's own calls to itself (shutdown closing its sessions) go
 * to the object behind the proxy and are not refused.
 *
 * The calls that write lease files are tracked: dispose waits for the ones
 * already under way before it gives the state dir's lock back, so no lease
 * changes after the lock is released. An ensure under way is aborted
 * (`signal`) rather than waited out: it ends its processes, settles its
 * lease and rejects with the same error, so an adapter that dawdles through
 * its handshake cannot hold dispose() for the handshake timeout. Turns running at dispose settle with
 * the same error (settleOnDispose): their sessions keep running, but this
 * controller no longer speaks for them.
 */
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { AcpxControllerDisposedError } from "../report/errors.js";
import type { TurnStream } from "../connection/turn-stream.js";
import type { AcpxLifecycleController } from "./types.js";

type Method = {
  [K in keyof AcpxLifecycleController]: AcpxLifecycleController[K] extends (...args: never[]) => unknown ? K : never;
}[keyof AcpxLifecycleController];

/**
 * How each method meets a disposed controller: "reject" (it returns a
 * promise), "throw" (it returns at once), "track" (like "reject"; while the
 * controller lives, the call writes leases and dispose waits for it), "pass"
 * (dispose itself: idempotent). A method added to the interface must be
 * listed here, or this does not compile.
 */
const AFTER_DISPOSE = {
  ensureSession: "track",
  spawnRawAdapter: "track",
  closeSession: "track",
  reapStartupOrphans: "track",
  prompt: "reject",
  startTurn: "throw",
  onUpdate: "throw",
  cancelTurn: "reject",
  setMode: "reject",
  setConfigOption: "reject",
  sessionStatus: "reject",
  listSessions: "reject",
  verifyOwnedTree: "reject",
  listLeases: "reject",
  shutdown: "reject",
  detach: "reject",
  dispose: "pass",
} as const satisfies Record<Method, "track" | "reject" | "throw" | "pass">;

type Mode = (typeof AFTER_DISPOSE)[Method];

export type EndedAs = "disposed" | "shut down" | "detached";

/** A controller's end: whether and how it ended, the lease-writing calls under way, and who is told when it ends. */
export class ControllerEnd {
  /** set, synchronously, by the first dispose() or shutdown() (finish) */
  endedAs: EndedAs | undefined;
  private readonly aborter = new AbortController();

  /** aborted by finish(), its reason the disposal's error: the ensures under way give up */
  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  /** The controller ends: every later call is refused, and the ensures under way are aborted. Idempotent. */
  finish(how: EndedAs): void {
    this.endedAs ??= how;
    if (!this.aborter.signal.aborted) this.aborter.abort(new AcpxControllerDisposedError(this.endedAs));
  }
  private readonly writing = new Set<Promise<unknown>>();
  private readonly listeners = new Set<(err: AcpxControllerDisposedError) => void>();

  /** a lease-writing call under way: the lock is kept until it settles */
  track(call: Promise<unknown>): void {
    this.writing.add(call);
    const done = (): void => void this.writing.delete(call);
    call.then(done, done);
  }

  /** the lease-writing calls under way now, settled (never rejects) */
  async writesSettled(): Promise<void> {
    await Promise.allSettled([...this.writing]);
  }

  /** `fail` is called with the disposal's error when the controller ends; the returned function unregisters it */
  onEnd(fail: (err: AcpxControllerDisposedError) => void): () => void {
    this.listeners.add(fail);
    return () => void this.listeners.delete(fail);
  }

  /** the turns still running settle with the disposal's error */
  failRunningTurns(): void {
    const err = new AcpxControllerDisposedError(this.endedAs ?? "disposed");
    for (const fail of [...this.listeners]) fail(err);
    this.listeners.clear();
  }
}

/** The controller as callers see it: every method refused once it ended. */
export function guardAfterDispose(ctl: AcpxLifecycleController, end: ControllerEnd): AcpxLifecycleController {
  // one wrapper per method function, so `ctl.prompt === ctl.prompt` holds
  const wrapped = new WeakMap<object, unknown>();
  return new Proxy<AcpxLifecycleController>(ctl, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof prop !== "string" || typeof value !== "function" || !Object.hasOwn(AFTER_DISPOSE, prop)) return value;
      const mode: Mode = AFTER_DISPOSE[prop as Method];
      let fn = wrapped.get(value);
      if (fn === undefined) {
        const method = value as (...args: unknown[]) => unknown;
        fn = mode === "pass" ? method.bind(target) : refuseOnceEnded(target, method, mode, end);
        wrapped.set(value, fn);
      }
      return fn;
    },
  });
}

function refuseOnceEnded(
  ctl: AcpxLifecycleController,
  method: (...args: unknown[]) => unknown,
  mode: Exclude<Mode, "pass">,
  end: ControllerEnd,
): (...args: unknown[]) => unknown {
  return (...args: unknown[]): unknown => {
    const how = end.endedAs;
    if (how !== undefined) {
      const err = new AcpxControllerDisposedError(how);
      if (mode === "throw") throw err;
      return Promise.reject(err);
    }
    const result = method.apply(ctl, args);
    if (mode === "track") end.track(result as Promise<unknown>);
    return result;
  };
}

/**
 * A turn that also settles when the controller ends: `result` rejects with
 * the disposal's error, and `events` throws it once the updates that arrived
 * before it are read (as for any other end of a turn). While the controller
 * lives this costs one registration per turn, none per update.
 */
export function settleOnDispose(turn: TurnStream, end: ControllerEnd): TurnStream {
  let failResult: (err: unknown) => void = () => undefined;
  const disposed = new Promise<never>((_resolve, reject) => {
    failResult = reject;
  });
  disposed.catch(() => undefined);
  /** the events' next() waiting now (one consumer), and the error once the controller ended */
  let waiting: ((err: unknown) => void) | undefined;
  let failed: Promise<never> | undefined;
  const unregister = end.onEnd((err) => {
    failed = Promise.reject(err);
    failed.catch(() => undefined);
    failResult(err);
    waiting?.(err);
  });
  turn.result.then(unregister, unregister);
  const result = Promise.race([turn.result, disposed]);
  result.catch(() => undefined);
  const events: AsyncIterable<SessionUpdate> = {
    [Symbol.asyncIterator]() {
      const inner = turn.events[Symbol.asyncIterator]();
      const next = (): Promise<IteratorResult<SessionUpdate>> => {
        // after the end: what was buffered first (an already settled next() wins the race), then the error
        if (failed !== undefined) return Promise.race([inner.next(), failed]);
        return new Promise((resolve, reject) => {
          waiting = reject;
          const done = (): void => {
            if (waiting === reject) waiting = undefined;
          };
          inner.next().then(
            (r) => {
              done();
              resolve(r);
            },
            (e: unknown) => {
              done();
              reject(e);
            },
          );
        });
      };
      return {
        next,
        return: (value?: unknown) =>
          inner.return?.(value) ?? Promise.resolve({ value: undefined, done: true as const }),
      };
    },
  };
  return { ...turn, result, events };
}
