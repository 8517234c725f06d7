/**
 * The controller's reconciles: its own ACPX leases (the startup reap, and
 * maintenance for the ones left closing), and the ACP terminals no live
 * session holds. Live and in-flight sessions are skipped; each lease that
 * settles is reported to the hooks once the pass is over.
 */
import { reconcileLeases, type LeaseOutcome } from "../ownership/index.js";
import { summarize } from "./close-session.js";
import type { ControllerHooks } from "./controller-hooks.js";
import { reconcileLeftTerminals } from "./conversation-options.js";
import { lifecycleDeps, type ControllerDeps, type LiveSessions } from "./live-sessions.js";
import type { ReapReport, ReapReportEntry } from "./types.js";

/** ACP terminals no live session holds, through their supervisor leases (conversation-options.ts). */
export async function reconcileTerminals(
  d: ControllerDeps,
  live: LiveSessions,
  hooks: ControllerHooks,
  states: readonly ("open" | "closing")[] = ["open", "closing"],
): Promise<void> {
  const held = new Set(live.all().flatMap((s) => s.conv.terminals?.runIds() ?? []));
  const r = await reconcileLeftTerminals(d.leases, d.conversation.supervisor, d, {
    states,
    held: (runId) => held.has(runId),
  });
  for (const run of r?.runs ?? []) {
    if (run.state === "closed" || run.state === "lost")
      await hooks.leaseSettled(run.leaseId, { via: "reap", state: run.state, detail: run.why });
  }
}

/** This instance's ACPX leases in `states`, through the lifecycle (reconcileLeases); each settled lease reported to the hooks. */
export async function reconcileOwnLeases(
  d: ControllerDeps,
  live: LiveSessions,
  hooks: ControllerHooks,
  states: readonly ("open" | "closing")[],
  dryRun: boolean,
  skipAttached = false,
): Promise<ReapReport> {
  const settled: { leaseId: string; state: "closed" | "lost"; why: string }[] = [];
  const r = await reconcileLeases(lifecycleDeps(d), {
    // the process supervisor's runs share the store and the instance id; they are its to settle
    kind: "acpx",
    states,
    dryRun,
    skipAttached,
    skip: (l) => live.busy(l),
    ...(d.containment.available
      ? {
          leftovers: {
            instanceFolder: `${d.containment.root}/${d.gatewayInstanceId}`,
            isLive: (leaseId: string) => live.busy({ leaseId }) !== undefined,
          },
        }
      : {}),
    retentionMs: d.retentionMs,
    onSettled: (o) => {
      live.afterSettled(o.leaseId, o.stateAfter);
      if (o.stateAfter === "closed" || o.stateAfter === "lost")
        settled.push({ leaseId: o.leaseId, state: o.stateAfter, why: o.why });
    },
  });
  for (const s of settled) await hooks.leaseSettled(s.leaseId, { via: "reap", state: s.state, detail: s.why });
  return { ...r, entries: r.entries.map(toEntry) };
}

/** The controller's report rows: the lifecycle's outcome, with the kill summarised. */
function toEntry(o: LeaseOutcome): ReapReportEntry {
  const { verification: _v, kill, ...rest } = o;
  return { ...rest, ...(kill ? { kill: summarize(kill) } : {}) };
}
