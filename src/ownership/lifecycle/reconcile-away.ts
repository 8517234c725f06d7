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
 * serialise their writes to one lease). The report's entries come back in
 * small batches, one at a time, each answered before the next is sent, so no
 * message costs the calling thread more than a few hundred records.
 *
 * Anything that stops the worker (it cannot start, its script is missing, it
 * throws) rejects with ReconcileAwayError; the caller then runs the reconcile
 * on its own thread, which reads every record again and verifies every lease
 * again before any signal: what the worker settled is not listed twice.
 */
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setTimeout as afterTimers } from "node:timers/promises";
import { Readable } from "node:stream";
import { MessageChannel, SHARE_ENV, Worker } from "node:worker_threads";
import type { LeaseKind, ProcessLease } from "../leases/types.js";
import type { LeaseStore } from "../leases/lease-store.js";
import { isLeaseFileName } from "../leases/lease-store-read.js";
import type { OutcomeRow } from "./lease-outcome.js";
import { pendingOf } from "./pending-settlements.js";
import { ADMIT_AT_ONCE, type LeaseReconcileReport } from "./reconcile.js";

/** What a worker's reconcile is asked to do: reconcileLeases's options that are data, and the store and facts to open. */
export interface AwaySpec {
  stateDir: string;
  gatewayInstanceId: string;
  graceMs: number;
  kind: LeaseKind | "all";
  states: readonly ("open" | "closing")[];
  dryRun: boolean;
  skipAttached: boolean;
  /** reconcile.ts `spareDurable` */
  spareDurable?: boolean;
  retentionMs?: number;
  /** the instance's cgroup folder, for the settled leases' leftovers (reconcile.ts `leftovers`) */
  leftoversFolder?: string;
}

export interface AwayHooks {
  /** why a listed lease is left alone now, or undefined: the worker then holds it (`take`) */
  skip(lease: Pick<ProcessLease, "leaseId">): string | undefined;
  /** the worker holds this lease from now until the reconcile ends */
  take(leaseId: string): void;
  /** the leases whose cgroups are in use (reconcile.ts `leftovers.isLive`), read once the listing is handed over */
  live(): string[];
  /** reconcileLeases's `onSettled`, with the same contract (every row, never in a dry run), called as each batch arrives */
  onSettled(row: OutcomeRow): void;
}

export interface AwayReport extends Omit<LeaseReconcileReport, "entries"> {
  /** each outcome as the worker made it into a report's row (outcomeRow): the calling thread keeps the object it receives */
  entries: OutcomeRow[];
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
  | { t: "listed"; leaseId: string }
  | { t: "listing-end" }
  | { t: "entry"; entry: OutcomeRow }
  | { t: "done"; report: Omit<AwayReport, "entries">; pending: [string, PendingMemo][] }
  | { t: "failed"; why: string };

/** The calling thread's answer to the listing, and the batches' acknowledgement. */
export type AwayReply = { t: "skips"; skips: [string, string][]; live: string[] } | { t: "ack" };

export type PendingMemo = ReturnType<typeof pendingOf> extends Map<string, infer V> ? V : never;

/**
 * Below this many lease files in the live folder (open and closing leases),
 * the calling thread reconciles: a worker's start (a thread, an isolate, the
 * library's modules loaded again) costs 100-300 ms of wall time, more than a
 * handful of leases take, and a batch this small is one admission of the
 * calling thread's settlements (reconcile.ts ADMIT_AT_ONCE).
 */
export const WORKER_MIN_LEASES = ADMIT_AT_ONCE;

/** Whether the store's live folder holds enough leases for a worker (WORKER_MIN_LEASES); a folder that cannot be read says no. */
export async function worthAWorker(store: LeaseStore): Promise<boolean> {
  const names = await readdir(store.dir).catch(() => [] as string[]);
  let n = 0;
  for (const name of names) if (isLeaseFileName(name) && ++n >= WORKER_MIN_LEASES) return true;
  return false;
}

/** Items per message: the records one event of the calling thread deserialises (a few hundred objects). */
export const AWAY_BATCH = 16;

/**
 * Runs the reconcile in a worker thread (module comment). `pendingTo` is the
 * calling thread's store: the settlements the worker could not write are
 * kept there, for its next reconcile. A store with settlements already
 * pending is not for a worker: their records may be held only in that
 * store's memory (a lease folder removed under the gateway).
 */
export async function reconcileInWorker(spec: AwaySpec, hooks: AwayHooks, pendingTo: LeaseStore): Promise<AwayReport> {
  const script = workerScript();
  if (script === null)
    throw new ReconcileAwayError("its script is not built (dist/ownership/lifecycle/reconcile-worker.js)");
  const pending = pendingOf(pendingTo);
  if (pending.size > 0)
    throw new ReconcileAwayError(`${pending.size} settlement(s) are pending in this process's store`);
  // A worker's start is this thread's longest step here: Node's first worker in a process runs its port and
  // stream code for the first time, about 2 ms of this thread's CPU at once on a 2-core host. A channel and a
  // stream made beforehand take most of that. Each of the three steps waits for the loop's due timers first
  // (a millisecond's timer), so the gateway's own timers run between them, not only its I/O.
  for (const warm of WARM_WORKER_PATHS) {
    await afterTimers(1);
    warm();
  }
  await afterTimers(1);
  let worker: Worker;
  try {
    // the worker's output is not piped to ours: it writes nothing, and the pipe's streams cost this thread
    worker = new Worker(script, { workerData: spec, env: SHARE_ENV, stdout: true, stderr: true });
  } catch (e) {
    throw new ReconcileAwayError(`it could not start (${e instanceof Error ? e.message : String(e)})`);
  }
  try {
    await afterTimers(1);
    const { report, entries, left } = await converse(worker, hooks, spec.dryRun);
    // the report's last batch was read in this turn: what the caller does next waits for the loop's timers
    await afterTimers(1);
    for (const [id, memo] of left) pending.set(id, memo);
    // it ends on its own once its report is sent (its exit is handled in a turn of its own); it never holds the gateway
    worker.unref();
    return { ...report, entries };
  } catch (e) {
    await worker.terminate();
    throw e;
  }
}

/** The port and stream code a worker's start runs, run once beforehand (reconcileInWorker says why). */
const WARM_WORKER_PATHS: readonly (() => void)[] = [
  () => {
    const { port1, port2 } = new MessageChannel();
    port1.on("message", () => undefined);
    port1.close();
    port2.close();
  },
  () => new Readable({ read: () => undefined }).destroy(),
];

type Conversation = { report: Omit<AwayReport, "entries">; entries: OutcomeRow[]; left: [string, PendingMemo][] };

/** The calling thread's side of the conversation (module comment): resolves with the worker's report, rejects if it stops first. */
function converse(worker: Worker, hooks: AwayHooks, dryRun: boolean): Promise<Conversation> {
  return new Promise((resolve, reject) => {
    const entries: OutcomeRow[] = [];
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
            const why = hooks.skip(item);
            if (why !== undefined) skips.push([item.leaseId, why]);
            else hooks.take(item.leaseId);
            break;
          }
          case "listing-end":
            answer({ t: "skips", skips, live: hooks.live() });
            break;
          case "entry":
            entries.push(item.entry);
            if (!dryRun) hooks.onSettled(item.entry);
            break;
          case "done":
            finished = true;
            resolve({ report: item.report, entries, left: item.pending });
            return;
          case "failed":
            return fail(item.why);
        }
      }
      // the loop's due timers run between two batches: the worker answers an ack at once, and a port's messages
      // that arrive while it is being read are read in the same turn
      setTimeout(() => answer({ t: "ack" }), 1);
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
