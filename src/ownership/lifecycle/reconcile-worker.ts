/**
 * The worker thread of reconcile-away.ts: the same reconcileLeases, on a
 * store of its own over the caller's state dir, with the default facts and
 * signaller. It sends what it has to say in batches, one message at a time,
 * each acknowledged before the next, and asks the calling thread which
 * listed leases it may touch.
 */
import { parentPort, workerData } from "node:worker_threads";
import { getProcessFacts } from "../../facts/get.js";
import { createSignaller } from "../../facts/signal.js";
import { openLeaseStore } from "../leases/lease-store.js";
import type { OwnershipEvidence, ProcessLease } from "../leases/types.js";
import { outcomeRow, type LeaseOutcome, type OutcomeRow } from "./lease-outcome.js";
import { pendingOf } from "./pending-settlements.js";
import { AWAY_BATCH, type AwayItem, type AwayReply, type AwaySpec } from "./reconcile-away.js";
import { reconcileLeases } from "./reconcile.js";

/** Items go out AWAY_BATCH at a time, the next batch only once the calling thread acknowledged the last. */
class Outbox {
  private readonly queue: AwayItem[] = [];
  private inFlight = false;
  private idle: (() => void)[] = [];

  constructor(private readonly port: NonNullable<typeof parentPort>) {}

  push(item: AwayItem): void {
    this.queue.push(item);
    if (!this.inFlight) this.post();
  }

  acked(): void {
    this.inFlight = false;
    if (this.queue.length > 0) this.post();
    else for (const done of this.idle.splice(0)) done();
  }

  /** resolves once everything pushed so far was acknowledged */
  drained(): Promise<void> {
    return this.inFlight || this.queue.length > 0 ? new Promise((r) => this.idle.push(r)) : Promise.resolve();
  }

  private post(): void {
    this.inFlight = true;
    this.port.postMessage(this.queue.splice(0, AWAY_BATCH));
  }
}

/**
 * An outcome as it crosses: the report's row (outcomeRow: no verification,
 * the kill summarised), made here so the calling thread keeps the objects it
 * receives instead of copying each, and with each piece of evidence one
 * shared object per distinct value. A message keeps shared objects shared,
 * so the calling thread makes one object for what a batch's leases have in
 * common (most of their evidence), not one per lease: the report it keeps is
 * about half the objects its collector must copy.
 */
function light(o: LeaseOutcome, seen: Map<string, OwnershipEvidence>): OutcomeRow {
  const evidence = o.evidence.map((e) => {
    const key = `${e.check}\0${e.result}\0${e.code}\0${e.detail ?? ""}`;
    const known = seen.get(key);
    if (known !== undefined) return known;
    seen.set(key, e);
    return e;
  });
  return { ...outcomeRow(o), evidence };
}

async function run(port: NonNullable<typeof parentPort>, spec: AwaySpec): Promise<void> {
  const out = new Outbox(port);
  let skipsArrived: (reply: Extract<AwayReply, { t: "skips" }>) => void = () => undefined;
  const skips = new Promise<Extract<AwayReply, { t: "skips" }>>((r) => (skipsArrived = r));
  port.on("message", (reply: AwayReply) => (reply.t === "ack" ? out.acked() : skipsArrived(reply)));
  const facts = getProcessFacts();
  const store = await openLeaseStore(spec.stateDir);
  let live = new Set<string>();
  const report = await reconcileLeases(
    {
      store,
      facts,
      signaller: createSignaller(facts),
      graceMs: spec.graceMs,
      gatewayInstanceId: spec.gatewayInstanceId,
    },
    {
      kind: spec.kind,
      states: spec.states,
      dryRun: spec.dryRun,
      skipAttached: spec.skipAttached,
      spareDurable: spec.spareDurable === true,
      ...(spec.retentionMs !== undefined ? { retentionMs: spec.retentionMs } : {}),
      skipListed: async (leases: readonly ProcessLease[]) => {
        for (const lease of leases) out.push({ t: "listed", leaseId: lease.leaseId });
        out.push({ t: "listing-end" });
        const reply = await skips;
        live = new Set(reply.live);
        return new Map(reply.skips);
      },
      ...(spec.leftoversFolder !== undefined
        ? { leftovers: { instanceFolder: spec.leftoversFolder, isLive: (id: string) => live.has(id) } }
        : {}),
    },
  );
  const { entries, ...rest } = report;
  const seen = new Map<string, OwnershipEvidence>();
  for (const e of entries) out.push({ t: "entry", entry: light(e, seen) });
  await out.drained();
  port.postMessage([{ t: "done", report: rest, pending: [...pendingOf(store)] } satisfies AwayItem]);
  // nothing is left to say: the thread ends once the report is sent
  port.close();
}

if (parentPort !== null) {
  const port = parentPort;
  run(port, workerData as AwaySpec).catch((e: unknown) => {
    port.postMessage([
      { t: "failed", why: e instanceof Error ? `${e.name}: ${e.message}` : String(e) } satisfies AwayItem,
    ]);
  });
}
