/**
 * A batch reconcile (reconcile.ts) run in a worker thread, so a gateway's
 * event loop keeps its ticks while a thousand leases are verified, killed
 * and settled: the worker runs the same reconcileLeases, on a store of its
 * own over the same state dir, with facts and a signaller of the default
 * kind (a caller's objects cannot cross to another thread). This process
 * keeps the state dir's lock; the worker takes none.
 *
 * What stays on the calling thread is what only it knows: which leases it is
 * using. The worker lists the leases and hands each one over; the calling
 * thread answers, at that moment, either why the lease is left alone (`skip`)
 * or that the worker now holds it (`take`): from then on the calling thread
 * writes that lease only after the worker is done (the two stores would not
 * serialise their writes to one lease). Outcomes and the report come back in
 * small batches, one at a time, each answered before the next is sent, so no
 * message costs the calling thread more than a few hundred records.
 *
 * Anything that stops the worker (it cannot start, its script is missing, it
 * throws) rejects with ReconcileAwayError; the caller then runs the reconcile
 * on its own thread, which reads every record again and verifies every lease
 * again before any signal: what the worker settled is not listed twice.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setImmediate as nextTurn } from "node:timers/promises";
import { SHARE_ENV, Worker } from "node:worker_threads";
import type { LeaseKind, ProcessLease } from "../leases/types.js";
import type { LeaseStore } from "../leases/lease-store.js";
import type { LeaseOutcome } from "./lease-outcome.js";
import { pendingOf } from "./pending-settlements.js";
import type { LeaseReconcileReport } from "./reconcile.js";

/** What a worker's reconcile is asked to do: reconcileLeases's options that are data, and the store and facts to open. */
export interface AwaySpec {
  stateDir: string;
  gatewayInstanceId: string;
  graceMs: number;
  kind: LeaseKind | "all";
  states: readonly ("open" | "closing")[];
  dryRun: boolean;
  skipAttached: boolean;
  retentionMs?: number;
  /** the instance's cgroup folder, for the settled leases' leftovers (reconcile.ts `leftovers`) */
  leftoversFolder?: string;
}

/** A settled lease as the worker reports it: the outcome without the verification (it holds the worker's snapshot). */
export type AwayOutcome = Omit<LeaseOutcome, "verification">;

export interface AwayHooks {
  /** why a listed lease is left alone now, or undefined: the worker then holds it (`take`) */
  skip(lease: ProcessLease): string | undefined;
  /** the worker holds this lease from now until the reconcile ends */
  take(leaseId: string): void;
  /** the leases whose cgroups are in use (reconcile.ts `leftovers.isLive`), read once the listing is handed over */
  live(): string[];
  onSettled(o: AwayOutcome): void;
}

/** How the caller keeps each reported outcome: made into what its report holds as it arrives, not all at once at the end. */
export type AwayEntry<T> = (o: AwayOutcome) => T;

export interface AwayReport<T> extends Omit<LeaseReconcileReport, "entries"> {
  /** each outcome as `entry` made it, when it arrived */
  entries: T[];
}

/** The worker could not run the reconcile to its end: the caller runs it on its own thread. */
export class ReconcileAwayError extends Error {
  override readonly name = "ReconcileAwayError";
  constructor(readonly why: string) {
    super(`the startup reconcile's worker thread stopped: ${why}`);
  }
}

/** One item the worker sends; a message carries a batch of them (AWAY_BATCH). */
export type AwayItem =
  | { t: "listed"; lease: ProcessLease }
  | { t: "listing-end" }
  | { t: "settled"; outcome: AwayOutcome }
  | { t: "entry"; entry: AwayOutcome }
  | { t: "done"; report: Omit<AwayReport<never>, "entries">; pending: [string, PendingMemo][] }
  | { t: "failed"; why: string };

/** The calling thread's answer to the listing, and the batches' acknowledgement. */
export type AwayReply = { t: "skips"; skips: [string, string][]; live: string[] } | { t: "ack" };

export type PendingMemo = ReturnType<typeof pendingOf> extends Map<string, infer V> ? V : never;

/** Items per message: the records one event of the calling thread deserialises (a few hundred objects). */
export const AWAY_BATCH = 16;

/**
 * Runs the reconcile in a worker thread (module comment). `pendingTo` is the
 * calling thread's store: the settlements the worker could not write are
 * kept there, for its next reconcile. A store with settlements already
 * pending is not for a worker: their records may be held only in that
 * store's memory (a lease folder removed under the gateway).
 */
export async function reconcileInWorker<T>(
  spec: AwaySpec,
  hooks: AwayHooks,
  entry: AwayEntry<T>,
  pendingTo: LeaseStore,
): Promise<AwayReport<T>> {
  const script = workerScript();
  if (script === null)
    throw new ReconcileAwayError("its script is not built (dist/ownership/lifecycle/reconcile-worker.js)");
  const pending = pendingOf(pendingTo);
  if (pending.size > 0)
    throw new ReconcileAwayError(`${pending.size} settlement(s) are pending in this process's store`);
  // a worker's start is the calling thread's longest step here (the first one in a process loads Node's worker
  // internals): it gets an event-loop turn of its own, and the worker's output is not piped to ours
  await nextTurn();
  let worker: Worker;
  try {
    worker = new Worker(script, { workerData: spec, env: SHARE_ENV, stdout: true, stderr: true });
  } catch (e) {
    throw new ReconcileAwayError(`it could not start (${e instanceof Error ? e.message : String(e)})`);
  }
  try {
    await nextTurn();
    const { report, entries, left } = await converse(worker, hooks, entry);
    for (const [id, memo] of left) pending.set(id, memo);
    return { ...report, entries };
  } finally {
    await worker.terminate();
  }
}

type Conversation<T> = { report: Omit<AwayReport<T>, "entries">; entries: T[]; left: [string, PendingMemo][] };

/** The calling thread's side of the conversation (module comment): resolves with the worker's report, rejects if it stops first. */
function converse<T>(worker: Worker, hooks: AwayHooks, entry: AwayEntry<T>): Promise<Conversation<T>> {
  return new Promise((resolve, reject) => {
    const entries: T[] = [];
    const skips: [string, string][] = [];
    let finished = false;
    const fail = (why: string) => {
      if (!finished) reject(new ReconcileAwayError(why));
      finished = true;
    };
    const answer = (reply: AwayReply) => worker.postMessage(reply);
    worker.on("message", (items: AwayItem[]) => {
      for (const item of items) {
        switch (item.t) {
          case "listed": {
            const why = hooks.skip(item.lease);
            if (why !== undefined) skips.push([item.lease.leaseId, why]);
            else hooks.take(item.lease.leaseId);
            break;
          }
          case "listing-end":
            answer({ t: "skips", skips, live: hooks.live() });
            break;
          case "settled":
            hooks.onSettled(item.outcome);
            break;
          case "entry":
            entries.push(entry(item.entry));
            break;
          case "done":
            finished = true;
            resolve({ report: item.report, entries, left: item.pending });
            return;
          case "failed":
            return fail(item.why);
        }
      }
      answer({ t: "ack" });
    });
    worker.on("error", (e) => fail(e.message));
    worker.on("exit", (code) => fail(`it exited (code ${code}) before its report`));
  });
}

/** The worker's script beside this module; run from the sources (tests), the built one under dist/. */
function workerScript(): URL | null {
  const here = new URL("./reconcile-worker.js", import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  const built = join(
    dirname(fileURLToPath(import.meta.url)),
    "..",
    "..",
    "..",
    "dist",
    "ownership",
    "lifecycle",
    "reconcile-worker.js",
  );
  return existsSync(built) ? pathToFileURL(built) : null;
}
