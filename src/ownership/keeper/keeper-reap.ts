/**
 * What a keeper does once its gateway is gone (keeper.ts): the startup
 * reap's reconcile (reconcile.ts reconcileLeases, the one verified
 * lifecycle), run early, by the keeper, under the state dir's lock.
 *
 * - The lock: the gateway's flock went with it; the keeper takes it over
 *   as "keeper" (state-lock.ts), so a gateway started meanwhile waits for it
 *   instead of reaping the same leases at once. When another gateway got
 *   there first, the keeper leaves everything to that one's startup reap.
 * - The supervisor runs: the keeper first takes over the dead gateway's
 *   supervisor holder lock (supervisor-holders.ts), so any other process's
 *   reconcile (a new gateway's startup reap of terminals included) leaves
 *   them to the keeper, and a run is the keeper's only when its lease names
 *   that holder: a live supervisor in another process keeps its runs. They
 *   are reconciled whether or not the state-dir lock was had (supervisors
 *   take none).
 * - Which leases: this instance's open and closing ones. ACPX leases only
 *   under the state-dir lock (then they are all the dead gateway's);
 *   without it they are the new gateway's startup reap's.
 * - Fail closed: whatever does not verify stays open or closing for the next
 *   startup reap, exactly as that reap would leave it. Nothing here decides
 *   what is killed; reconcileLeases does.
 * - Nothing is created: a state dir removed since (its lease store gone) is
 *   left alone, and a state dir no controller ever used (no gateway.lock: a
 *   supervisor's alone) gets no state-dir lock; its runs are reconciled under
 *   the holder lock alone.
 */
import { existsSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { join } from "node:path";
import { createSignaller } from "../../facts/signal.js";
import type { ProcessFacts } from "../../facts/types.js";
import { checkInstanceFolder, readContainmentRecord, rootShapeProblem } from "../host/containment-record.js";
import { atomicWrite } from "../leases/fs-safe.js";
import type { KeeperConfig } from "./keeper.js";
import { openLeaseStore } from "../leases/lease-store.js";
import { reconcileLeases, type LeaseReconcileReport } from "../lifecycle/reconcile.js";
import { takeOverHolderLock } from "../host/supervisor-holders.js";
import {
  acquireStateDirLock,
  KEEPER_BEAT_MS,
  StateDirLockedError,
  STATE_LOCK_FILE,
  type StateDirLock,
} from "../host/state-lock.js";
import type { ProcessLease } from "../leases/types.js";

/** The keeper's last word, written to `<stateDir>/acpx/keeper-report.json` when it reaped (for an operator, and the tests). */
export interface KeeperReport {
  gatewayPid: number;
  keeperPid: number;
  /** reaped: the reconcile ran; left: nothing was touched, for `why` */
  outcome: "reaped" | "left";
  why: string;
  entries: { leaseId: string; sessionKey: string; action: string; stateAfter: string; code: string }[];
  /** from the gateway's death being seen to the report */
  elapsedMs: number;
}

export const KEEPER_REPORT_FILE = "keeper-report.json";
/** how long the keeper waits for the dead gateway's lock to be dropped by the kernel */
const LOCK_TAKEOVER_MS = 5_000;

export async function keeperReap(cfg: KeeperConfig, facts: ProcessFacts): Promise<KeeperReport> {
  const t0 = Date.now();
  const report = (
    outcome: KeeperReport["outcome"],
    why: string,
    entries: KeeperReport["entries"] = [],
  ): KeeperReport => ({
    gatewayPid: cfg.gatewayPid,
    keeperPid: process.pid,
    outcome,
    why,
    entries,
    elapsedMs: Date.now() - t0,
  });
  // without its lease store the state dir was removed: nothing to keep, nothing to create
  if (!existsSync(join(cfg.stateDir, "acpx", "leases")))
    return report("left", `${cfg.stateDir} has no lease store (removed?)`);
  const id = cfg.gatewayInstanceId;
  // the holder first: from then on no other process's reconcile touches the dead gateway's runs
  const holder = await takeOverHolderLock(cfg.stateDir, cfg.holder, LOCK_TAKEOVER_MS);
  const lock = existsSync(join(cfg.stateDir, STATE_LOCK_FILE))
    ? await takeOver(cfg, facts)
    : { why: "no gateway ever held this state dir" };
  // a gateway started meanwhile waits as long as this keeps beating (state-lock.ts), whatever the grace makes the reap take
  const beat = "release" in lock ? setInterval(() => void lock.progress(), KEEPER_BEAT_MS) : undefined;
  try {
    if (!("release" in lock) && holder === null)
      return report("left", `${lock.why}; the gateway's supervisor holder lock could not be taken`);
    const store = await openLeaseStore(cfg.stateDir);
    const deps = { store, facts, signaller: createSignaller(facts), graceMs: cfg.graceMs, gatewayInstanceId: id };
    const folder = "release" in lock ? await instanceFolder(cfg.stateDir, id) : null;
    const r = await reconcileLeases(deps, {
      kind: "release" in lock ? "all" : "supervisor",
      states: ["open", "closing"],
      // a durable session's wrapper keeps its tree for a new gateway to re-adopt, and ends it when nobody does
      spareDurable: true,
      skip: (l) => skipReason(l, holder === null ? null : cfg.holder),
      ...(folder !== null ? { leftovers: { instanceFolder: folder } } : {}),
    });
    // the instance's folder goes once no lease cgroup is left in it (rmdir refuses one that holds any)
    if (folder !== null) await rmdir(folder).catch(() => undefined);
    const out = report(
      "reaped",
      `${"release" in lock ? "" : `${lock.why}; only the gateway's supervisor runs: `}${summary(r)}`,
      entriesOf(r),
    );
    await atomicWrite(join(cfg.stateDir, "acpx"), KEEPER_REPORT_FILE, JSON.stringify(out) + "\n", false).catch(
      () => undefined,
    );
    return out;
  } finally {
    clearInterval(beat);
    if ("release" in lock) await lock.release();
    await holder?.release();
  }
}

function entriesOf(r: LeaseReconcileReport): KeeperReport["entries"] {
  return (
    r.entries
      .filter((e) => e.action !== "skipped-live")
      // the report names a waiting session: it is still there, on purpose
      .map((e) => ({
        leaseId: e.leaseId,
        sessionKey: e.sessionKey,
        action: e.action,
        stateAfter: e.stateAfter,
        code: e.code,
      }))
  );
}

function summary(r: LeaseReconcileReport): string {
  return `${entriesOf(r).length} of ${r.examined} open/closing lease(s) of instance ${r.gatewayInstanceId} reconciled`;
}

/** Supervisor runs are the keeper's only when their lease names the dead gateway's holder (and the keeper holds it); every ACPX lease it is given is. */
function skipReason(l: ProcessLease, holder: string | null): string | undefined {
  if (l.kind !== "supervisor" || (holder !== null && l.holder === holder)) return undefined;
  return `a supervisor run of holder ${l.holder ?? "(none recorded)"}, not one this keeper holds`;
}

/**
 * The state dir's lock, from the dead gateway: its flock is released with its
 * last descriptor, possibly a moment after the lifeline's EOF, so a refusal
 * naming the gateway (or nobody) is retried for a while. Any other holder is
 * a gateway started since: its startup reap takes over.
 */
async function takeOver(cfg: KeeperConfig, facts: ProcessFacts): Promise<StateDirLock | { why: string }> {
  const deadline = Date.now() + LOCK_TAKEOVER_MS;
  for (;;) {
    try {
      return await acquireStateDirLock(cfg.stateDir, facts, { role: "keeper" });
    } catch (e) {
      if (!(e instanceof StateDirLockedError))
        return { why: `the state dir's lock could not be taken: ${(e as Error).message}` };
      const gatewayOrNobody = e.holderPid === null || e.holderPid === cfg.gatewayPid;
      if (!gatewayOrNobody || Date.now() > deadline) {
        return {
          why: `${e.holderPid === null ? "an unnamed holder" : `pid ${e.holderPid}`} holds the state dir: its startup reap settles these leases`,
        };
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

/** This instance's cgroup folder under the newest recorded proclease root, or null (no containment, or a record refused). */
async function instanceFolder(stateDir: string, id: string): Promise<string | null> {
  const rec = await readContainmentRecord(stateDir).catch(() => null);
  const root = rec?.kind === "ok" ? rec.record.roots[0] : undefined;
  if (root === undefined || rootShapeProblem(root) !== null) return null;
  const folder = `${root}/${id}`;
  return (await checkInstanceFolder(folder).catch(() => "unreadable")) === null ? folder : null;
}
