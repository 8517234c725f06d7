/**
 * The controller's reconciles: its own ACPX leases (the startup reap, on a
 * worker thread by default, and maintenance for the ones left closing), and
 * the ACP terminals no live session holds. Live and in-flight sessions are
 * skipped; each lease that settles is reported to the hooks once the pass is
 * over.
 */
import { Turns } from "../../facts/turns.js";
import {
  reconcileInWorker,
  reconcileLeases,
  ReconcileAwayError,
  outcomeRow,
  type OutcomeRow,
  type AwayReport,
  type AwaySpec,
} from "../../ownership/index.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import type { ControllerHooks } from "./controller-hooks.js";
import { reconcileLeftTerminals } from "../sessions/conversation-options.js";
import { lifecycleDeps, type ControllerDeps, type LiveSessions } from "../sessions/live-sessions.js";
import type { ReapReport } from "./types.js";
import { forgetAttach } from "../durable/waiting.js";
import { forgetUnawaited, TERMINALS_DIR } from "../durable/terminals.js";
import { TERMINAL_RUN_PREFIX } from "../connection/client-terminal.js";
import { join } from "node:path";

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
  // at the start: the kept output of durable terminals whose session can no longer come back goes
  if (states.includes("open"))
    await forgetUnawaited(join(d.stateDir, "acpx", TERMINALS_DIR), TERMINAL_RUN_PREFIX, async (id) => {
      const l = await d.leases.get(id);
      return l !== null && (l.state === "open" || l.state === "closing");
    });
}

type Settled = Pick<OutcomeRow, "leaseId" | "stateAfter" | "why">;

type OwnSpec = Pick<AwaySpec, "kind" | "states" | "dryRun" | "skipAttached" | "spareDurable" | "retentionMs">;

/**
 * This instance's ACPX leases in `states`, through the lifecycle
 * (reconcileLeases), on a worker thread when `onWorker` says so and the
 * worker runs to its end; each settled lease reported to the hooks.
 */
export async function reconcileOwnLeases(
  d: ControllerDeps,
  live: LiveSessions,
  hooks: ControllerHooks,
  states: readonly ("open" | "closing")[],
  dryRun: boolean,
  skipAttached = false,
  onWorker = false,
): Promise<ReapReport> {
  const settled: { leaseId: string; state: "closed" | "lost"; why: string }[] = [];
  const onSettled = (o: Settled) => {
    live.afterSettled(o.leaseId, o.stateAfter);
    // what a durable wrapper killed outright left in the attach folder goes with its lease
    if (o.stateAfter === "closed" || o.stateAfter === "lost") void forgetAttach(d.stateDir, o.leaseId);
    if ((o.stateAfter === "closed" || o.stateAfter === "lost") && hooks.wantsSettled)
      settled.push({ leaseId: o.leaseId, state: o.stateAfter, why: o.why });
  };
  // the process supervisor's runs share the store and the instance id; they are its to settle
  // a durable session waiting for a re-adoption is left to its wrapper's window (whatever this controller's own option)
  const spec: OwnSpec = { kind: "acpx", states, dryRun, skipAttached, spareDurable: true, retentionMs: d.retentionMs };
  // the rows and the hooks of a thousand settled leases are made a slice of the event loop at a time
  const turns = new Turns();
  const folder = d.containment.available ? `${d.containment.root}/${d.gatewayInstanceId}` : undefined;
  // a worker's settlements go through onSettled as its entries arrive, a batch at a time (every final one is in its report)
  const away = onWorker ? await reconcileOnWorker(d, live, spec, folder, onSettled) : undefined;
  const r: Omit<ReapReport, "reconciledOn"> =
    away ??
    (await reconcileLeases(lifecycleDeps(d), {
      ...spec,
      skip: (l) => live.busy(l),
      ...(folder !== undefined
        ? { leftovers: { instanceFolder: folder, isLive: (leaseId: string) => live.busy({ leaseId }) !== undefined } }
        : {}),
      onSettled,
    }).then(async (here) => ({ ...here, entries: await turns.map(here.entries, outcomeRow) })));
  // the first hook and the step after the last in turns of their own
  if (settled.length > 0) await turns.yield();
  for (const s of settled) {
    await hooks.leaseSettled(s.leaseId, { via: "reap", state: s.state, detail: s.why });
    if (turns.due()) await turns.yield();
  }
  if (settled.length > 0) await turns.yield();
  return { ...r, reconciledOn: away ? "worker-thread" : "calling-thread" };
}

/**
 * The reconcile on a worker thread (reconcile-away.ts), the leases it takes
 * lent to it meanwhile; undefined when the worker stopped: the calling
 * thread then reconciles from the records, verifying every lease again.
 */
async function reconcileOnWorker(
  d: ControllerDeps,
  live: LiveSessions,
  spec: OwnSpec,
  leftoversFolder: string | undefined,
  onSettled: (o: Settled) => void,
): Promise<AwayReport | undefined> {
  // one lender at a time: a second reap waits for the first to give its leases back
  for (let lending = live.lending; lending !== undefined; lending = live.lending) await lending;
  const lent = live.lend();
  const where = {
    stateDir: d.stateDir,
    gatewayInstanceId: d.gatewayInstanceId,
    graceMs: d.graceMs,
    ...(leftoversFolder !== undefined ? { leftoversFolder } : {}),
  };
  try {
    const hooks = {
      skip: (l: Pick<ProcessLease, "leaseId">) => live.busy(l),
      take: lent.take,
      live: () => live.busyIds(),
      onSettled,
    };
    return await reconcileInWorker({ ...spec, ...where }, hooks, d.leases);
  } catch (e) {
    if (!(e instanceof ReconcileAwayError)) throw e;
    d.conversation.log.warn?.(`${e.message}; reconciling on the calling thread`);
    return undefined;
  } finally {
    lent.back();
  }
}
