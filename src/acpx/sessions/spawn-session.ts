/**
 * ensureSession's spawn and handshake, as a list of named steps
 * (spawnSession): the lease is written before the wrapper is spawned; the
 * wrapper's "started" report gives the root pid and the adapter's group,
 * whose identity goes into the lease; then ACP `initialize` +
 * `session/new`, and the session record. Every failure settles the
 * attempt's lease through the lifecycle (ensure-attempt.ts) before the error
 * is thrown. With `limits` (session-limits.ts), they are written into the
 * lease's cgroup between its creation and the spawn; when they cannot be,
 * nothing is spawned. The input was parsed at the edge (ensure-input.ts):
 * nothing here checks it again. The controller's end (dispose, shutdown)
 * aborts the attempt at whichever step it is in: its processes are ended
 * and its lease settled as for any failure, and the ensure rejects with
 * the disposal's error; a session is handed out only if it was not.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { computeCommandHash, descriptorShortage, hostFaultNote, recordRootIdentity } from "../../ownership/index.js";
import { hostFaultOfCode, hostResourceError, processLimitError } from "../../ownership/leases/host-faults.js";
import { AcpClient } from "../connection/acp-client.js";
import { explainHandshakeFailure, handshake } from "../connection/handshake.js";
import { AcpxEnsureError } from "../report/errors.js";
import { launchWrapper, rootArgvFor, type LaunchedWrapper } from "../launch/launch.js";
import { describeEarlyExit } from "../launch/early-exit.js";
import { ABORTED, disposalError, EnsureAttempt, errMessage, raceAbort, stderrNote } from "./ensure-attempt.js";
import type { EnsureInput } from "./ensure-input.js";
import type { StartedReport } from "../wrapper/protocol.js";
import { describeEnd } from "../launch/wrapper-end.js";
import { lifecycleDeps, type ControllerDeps, type LiveSessions } from "./live-sessions.js";
import { applyLimits, mountOf, readCgroupOf, removeCgroup } from "../../containment/index.js";
import {
  containmentOffWhy,
  dropLeaseCgroup,
  openLeaseWithCgroup,
  type LeaseCgroupBinding,
} from "../../ownership/lifecycle/lease-cgroup.js";
import {
  controllersFor,
  describeLimits,
  enableLimitControllers,
  rememberLimits,
  type EnforcedLimits,
} from "./session-limits.js";
import { CGROUP_ENV_KEY, CGROUP_MOVE_FAILED, CGROUP_REQUIRED_ENV_KEY, END_DIR_ENV_KEY } from "../wrapper/protocol.js";
import { endRecordsDir } from "../../ownership/leases/end-records.js";
import { newSessionRecord } from "./session-store.js";
import { OnePerTurn } from "../../ownership/verify/waiters.js";
import { keepForAdoption } from "./adopt-record.js";
import { handleFields, handshakeFields, SessionConversation } from "../connection/conversation.js";
import { finishRawSpawn } from "./raw-adapter.js";
import type { AcpRuntimeHandle, LimitController } from "../connection/types.js";

/**
 * A spawn forks the gateway, whose thread pays in proportion to its memory
 * (1-1.5 ms at 50 MB of RSS, 4-6 ms at 150 MB, 13-14 ms at 350 MB on a
 * 2-core host; docs/benchmarks.md): sessions started together spawn one per
 * turn of the event loop, so timers and I/O run between two forks.
 */
const spawnTurns = new OnePerTurn();

/**
 * One ensure, top-down. The order is the ownership guarantee: limits are
 * refused before anything is written; the lease (with its own cgroup) is
 * durable before the spawn; the limits are in that cgroup before anything
 * runs in it; the wrapper joins it before it starts the adapter; the root's
 * identity is recorded before the session is handed out.
 */
export async function spawnSession(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  signal: AbortSignal,
  raw = false,
): Promise<AcpRuntimeHandle> {
  const tStart = performance.now();
  if (signal.aborted) throw disposalError(signal);
  const limitControllers = controllersFor(input.limits);
  await refuseOrEnableLimits(d, input, limitControllers);
  const a = await openLease(d, live, input, limitControllers, tStart, signal, raw);
  await a.checkAborted("the lease's opening");
  await applyAttemptLimits(a);
  const launched = await launch(a);
  // spawnRawAdapter: the plugin speaks ACP itself on the adapter's stdin/stdout (raw-adapter.ts)
  if (raw) return finishRaw(a, launched);
  // The handshake's first bytes wait in the pipe until the adapter reads
  // them, so it runs beside the wrapper's start and the root's record rather
  // than after them; the session is handed out only once both are done, and
  // a failed start or record wins over what the handshake says (its promise
  // never rejects, and the failure closes its client).
  const handshaking = beginAcpSession(a, launched);
  const report = await waitStarted(a, launched);
  await recordRoot(a, launched, report);
  const acp = await finishAcpSession(a, launched, await handshaking);
  return registerSession(a, launched, report, acp);
}

/** A raw adapter's session: started and recorded like any other, then handed over without a handshake. */
async function finishRaw(a: EnsureAttempt, launched: LaunchedWrapper): Promise<AcpRuntimeHandle> {
  const report = await waitStarted(a, launched);
  await recordRoot(a, launched, report);
  await a.checkAborted("the raw adapter's start");
  return finishRawSpawn(a.d, a.live, a.input, a.lease, launched, report.pgid).catch((err: unknown) =>
    a.fail("wrapper-failed", `the session record could not be written: ${errMessage(err)}`, err),
  );
}

/** Limits need containment: refused before any lease is written when it is off; else their controllers are enabled. */
async function refuseOrEnableLimits(
  d: ControllerDeps,
  input: EnsureInput,
  limitControllers: readonly LimitController[],
): Promise<void> {
  if (limitControllers.length === 0) return;
  // refused before any lease is written: without containment there is no cgroup to hold a limit
  if (!d.containment.available) {
    const why = containmentOffWhy(d.containment);
    throw new AcpxEnsureError(
      input.sessionKey,
      "limits-unavailable",
      `ensureSession ${JSON.stringify(input.sessionKey)} refused: limits (${describeLimits(input.limits)}) were asked for but cannot be applied: ${why}; nothing was started`,
      undefined,
      undefined,
      { limitsRefusal: { controller: limitControllers[0]!, why } },
    );
  }
  await enableLimitControllers(d, limitControllers);
}

/** The lease, durable before the wrapper is spawned, with its cgroup (openLeaseWithCgroup). */
async function openLease(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  limitControllers: readonly LimitController[],
  tStart: number,
  signal: AbortSignal,
  raw: boolean,
): Promise<EnsureAttempt> {
  // a raw adapter's ACP is its plugin's: nothing here could re-adopt it, so it is never durable
  const durable = raw ? undefined : d.durable;
  const rootArgv = rootArgvFor(d.nodePath, d.wrapper.wrapperPath, input.command, d.graceMs, durable?.args);
  // in flight from before its file exists: a maintenance reconcile never takes it for a spawn that never came
  const leaseId = randomUUID();
  live.inFlight.add(leaseId);
  // ownership's one opening sequence: the lease, then its own cgroup, recorded before the spawn; the wrapper enters it
  const bound = await openLeaseWithCgroup(lifecycleDeps(d), d.containment, {
    leaseId,
    kind: "acpx",
    gatewayInstanceId: d.gatewayInstanceId,
    sessionKey: input.sessionKey,
    wrapperRoot: d.wrapper.wrapperRoot,
    wrapperPath: d.wrapper.wrapperPath,
    commandHash: computeCommandHash(rootArgv),
    ...(durable !== undefined ? { durable: { reattachWithinMs: durable.reattachWithinMs } } : {}),
  }).catch((err: unknown) => {
    live.inFlight.delete(leaseId);
    throw err;
  });
  const a = new EnsureAttempt(d, live, input, bound.lease, bound, limitControllers, signal);
  a.t.start = tStart;
  a.t.lease = performance.now();
  return a;
}

/** After the cgroup exists, before anything can run in it: the limits, or the attempt fails (nothing was started). */
async function applyAttemptLimits(a: EnsureAttempt): Promise<void> {
  if (a.limitControllers.length === 0) return;
  const limits = a.input.limits;
  const refusal = await applyOrRemove(a.bound, limits);
  if (refusal === null) return;
  await a.fail(
    "limits-unavailable",
    `limits (${describeLimits(limits)}) were asked for but cannot be applied: ${refusal.why}; nothing was started${refusal.removal}`,
    undefined,
    {
      limitsRefusal: {
        ...(refusal.controller !== undefined ? { controller: refusal.controller } : {}),
        why: refusal.why,
      },
    },
  );
}

/** Launches the wrapper (its environment names the lease's cgroup, which it joins before it starts the adapter); a spawn that throws fails the attempt. */
async function launch(a: EnsureAttempt): Promise<LaunchedWrapper> {
  await a.checkAborted("the limits' write");
  const { d, input, cgroup } = a;
  await checkWrapper(a);
  await spawnTurns.turn();
  await a.checkAborted("the wrapper's turn to spawn");
  try {
    a.launched = launchWrapper({
      ...(d.wrapper.kind === "native" ? { execFile: d.wrapper.execPath } : {}),
      nodePath: d.nodePath,
      wrapperPath: d.wrapper.wrapperPath,
      command: input.command,
      graceMs: d.graceMs,
      leaseId: a.lease.leaseId,
      gatewayInstanceId: d.gatewayInstanceId,
      cwd: input.cwd,
      env: {
        ...input.env,
        // where the wrapper says it ended its tree when nobody asked (the reconcile names it: end-records.ts)
        [END_DIR_ENV_KEY]: endRecordsDir(d.leases.dir),
        ...(cgroup !== null ? { [CGROUP_ENV_KEY]: cgroup.path } : {}),
        ...(cgroup !== null && a.limitControllers.length > 0 ? { [CGROUP_REQUIRED_ENV_KEY]: "1" } : {}),
      },
      envRemove: input.envRemove,
      ...(cgroup !== null ? { joinCgroup: cgroup.path } : {}),
      ...(a.lease.durable !== undefined && d.durable !== undefined ? { durableArgs: d.durable.args } : {}),
    });
    return a.launched;
  } catch (err) {
    return a.fail("wrapper-failed", `the wrapper could not be spawned: ${errMessage(err)}`, err);
  }
}

/**
 * What is about to run is what was installed (install-wrapper.ts): a sealed
 * copy needs nothing; an installed file that changed is put back, and the
 * change is reported as a warning (an agent of the gateway's uid rewrote
 * it); one that cannot be put back fails the attempt before anything runs.
 */
async function checkWrapper(a: EnsureAttempt): Promise<void> {
  const { d } = a;
  let found: string | null;
  try {
    found = await d.wrapper.check();
  } catch (err) {
    return a.fail("wrapper-failed", `the installed wrapper changed and could not be put back: ${errMessage(err)}`, err);
  }
  if (found !== null)
    d.conversation.log.warn?.(`proclease: ${found} before the start of session ${JSON.stringify(a.input.sessionKey)}`, {
      wrapperPath: d.wrapper.wrapperPath,
    });
}

/** Waits for the wrapper's "started" report; any other first word fails the attempt. */
async function waitStarted(a: EnsureAttempt, launched: LaunchedWrapper): Promise<StartedReport> {
  const { d, input } = a;
  const start = await raceAbort(launched.waitStart(d.startTimeoutMs), a.signal);
  if (start === ABORTED) return a.abandon("the wrapper's start");
  a.t.started = performance.now();
  if (start.kind === "started") return notDurableAfterAll(a, start.report);
  if (start.kind === "spawn-error" && start.report.code === CGROUP_MOVE_FAILED) {
    // the wrapper refused to start the adapter outside the cgroup its limits live in
    return a.fail("limits-unavailable", start.report.message, undefined, {
      limitsRefusal: { why: start.report.message },
    });
  }
  if (start.kind === "spawn-error") return adapterSpawnFailed(a, input.command[0]!, start.report, launched.pid);
  if (start.kind === "error")
    return a.fail("wrapper-failed", `the wrapper could not be spawned: ${start.error.message}`, start.error);
  // classified by its exit (abort, signal, code) and its stderr, in one line (early-exit.ts)
  const early = describeEarlyExit(start.kind === "exited" ? start.exit : null, launched.stderrTail(), launched.pid);
  const late = start.kind === "timeout" ? ` (no "started" report within ${start.ms} ms)` : "";
  return a.fail("wrapper-failed", `${early.cause}${late}`, early.host);
}

/**
 * A durable wrapper whose socket could not listen runs as a plain one (it
 * says why): the lease stops claiming a window, so no reconcile waits for a
 * re-adoption that cannot come, and the gateway is told.
 */
async function notDurableAfterAll(a: EnsureAttempt, report: StartedReport): Promise<StartedReport> {
  if (report.durable !== "unavailable" || a.lease.durable === undefined) return report;
  a.d.conversation.log.warn?.(
    `proclease: session ${JSON.stringify(a.input.sessionKey)} is not durable: its wrapper could not listen (${report.durableWhy ?? "no reason given"})`,
    { leaseId: a.lease.leaseId },
  );
  a.lease = await a.d.leases
    .update(a.lease.leaseId, { durable: undefined })
    .catch((err: unknown) =>
      a.fail("wrapper-failed", `the lease could not drop its durable window: ${errMessage(err)}`, err),
    );
  return report;
}

/**
 * The wrapper could not start the adapter. A host limit (EAGAIN from a pids
 * cgroup, EMFILE, ENOMEM, ...) is named as such, the limit read from the
 * wrapper's own cgroup, as it would be for a spawn the gateway made itself.
 */
function adapterSpawnFailed(
  a: EnsureAttempt,
  file: string,
  report: { code: string; message: string },
  wrapperPid: number | undefined,
): Promise<never> {
  const what = `the adapter ${JSON.stringify(file)} could not be started`;
  const host =
    hostFaultOfCode(report.code) === "try-again"
      ? processLimitError(what, undefined, wrapperPid)
      : hostResourceError({ code: report.code }, what);
  if (host !== null) return a.fail("spawn-error", host.message, host);
  return a.fail("spawn-error", `${what}: ${report.code} ${report.message}`);
}

/** The identity of the live root in the lease; the group is the adapter group the wrapper reported. */
async function recordRoot(
  a: EnsureAttempt,
  launched: LaunchedWrapper,
  { wrapperPid: rootPid, pgid }: StartedReport,
): Promise<void> {
  const recorded = await recordRootIdentity(
    a.d.leases,
    a.lease.leaseId,
    { rootPid, processGroupId: pgid },
    a.d.facts,
  ).catch((err: unknown) =>
    a.fail("wrapper-failed", `the wrapper's identity could not be recorded: ${errMessage(err)}`, err),
  );
  a.lease = recorded.lease;
  if (recorded.identity === "gone") return rootGone(a, launched, rootPid);
  if (recorded.identity === "unknown")
    return a.fail(
      "adapter-exited",
      `the wrapper's identity could not be recorded: ${recorded.detail}${stderrNote(launched)}`,
    );
  await keepCgroupIfRootInside(a, rootPid);
  a.t.recorded = performance.now();
}

/** The root read as gone right after it started: an adapter that exits at once takes its wrapper along; a killed wrapper is named as such. */
async function rootGone(a: EnsureAttempt, launched: LaunchedWrapper, rootPid: number): Promise<never> {
  const end = await Promise.race([
    launched.ended,
    new Promise<undefined>((r) => setTimeout(() => r(undefined), 500).unref()),
  ]);
  const failure = end === undefined || end.kind === "adapter-exited" ? "adapter-exited" : "wrapper-failed";
  // our child has not exited, so it runs: the read that found it gone was refused by the host (a /proc read with no descriptor left reads as "gone")
  if (end === undefined) {
    const short = descriptorShortage(`the wrapper (pid ${rootPid}) runs`);
    return a.fail(
      "wrapper-failed",
      `the wrapper (pid ${rootPid}) runs (our child has not exited) but the facts backend read it as gone, so its identity could not be recorded${short ? `: ${short.message}` : ""}`,
      short ?? undefined,
    );
  }
  return a.fail(
    failure,
    `the wrapper (pid ${rootPid}) was gone right after it started${end ? `: ${describeEnd(end)}` : ""}${stderrNote(launched)}`,
  );
}

/** The ACP connection the session is served on, once its handshake succeeded. */
interface AcpSession {
  acpSessionId: string;
  client: AcpClient;
  conv: SessionConversation;
}

/** How the handshake went: the session, or what it threw (explained only once the start and record are known to be sound). */
type Handshaken = { ok: true; session: AcpSession } | { ok: false; err: unknown };

/**
 * initialize → protocol version check → authenticate (input.auth) →
 * session/new (acp-client.ts). Never rejects: a failure is judged by
 * finishAcpSession, after the start and the record.
 */
async function beginAcpSession(a: EnsureAttempt, launched: LaunchedWrapper): Promise<Handshaken> {
  const { d, input } = a;
  const conv = new SessionConversation(d.conversation, input);
  a.conv = conv;
  const client = new AcpClient({ input: launched.stdout, output: launched.stdin, ...conv.clientOptions() });
  a.client = client;
  try {
    const hs = await handshake(client, {
      cwd: input.cwd ?? process.cwd(),
      timeoutMs: d.handshakeTimeoutMs,
      signal: a.signal,
      ended: launched.ended,
      ...(input.auth !== undefined ? { auth: input.auth } : {}),
      ...handshakeFields(input),
    });
    conv.opened(hs);
    return { ok: true, session: { acpSessionId: hs.sessionId, client, conv } };
  } catch (err) {
    return { ok: false, err };
  }
}

/** The session, or the attempt failed with who ended and how (a killed wrapper as such), the ACP error data, stderr tail and auth methods. */
async function finishAcpSession(a: EnsureAttempt, launched: LaunchedWrapper, r: Handshaken): Promise<AcpSession> {
  await a.checkAborted("the ACP handshake");
  if (r.ok) {
    a.t.handshake = performance.now();
    return r.session;
  }
  const f = await explainHandshakeFailure(r.err, launched, 500, {
    client: a.client!,
    stderrInMessage: a.d.conversation.stderrInMessages,
  });
  return a.fail(f.cause, f.message, undefined, f.details);
}

/** The session record written, the handle made and the session live; the attempt's timings reported. */
async function registerSession(
  a: EnsureAttempt,
  launched: LaunchedWrapper,
  report: StartedReport,
  { acpSessionId, client, conv }: AcpSession,
): Promise<AcpRuntimeHandle> {
  const { d, live, input, lease } = a;
  const { owner, record } = newSessionRecord(input, d.gatewayInstanceId, lease.leaseId, acpSessionId);
  // what a later controller needs to speak to this session without a handshake (durable/adopt.ts)
  if (lease.durable !== undefined && launched.durable) keepForAdoption(record, conv, d.conversation.log);
  try {
    await d.sessions.put(record);
  } catch (err) {
    return a.fail(
      "wrapper-failed",
      `the session record could not be written: ${errMessage(err)}${hostFaultNote(err, d.stateDir)}`,
      err,
    );
  }
  // the last point the controller's end can give the attempt up: from here to the handle nothing waits
  await a.checkAborted("the session record's write");
  const handle: AcpRuntimeHandle = {
    sessionKey: input.sessionKey,
    leaseId: lease.leaseId,
    rootPid: report.wrapperPid,
    processGroupId: report.pgid,
    acpSessionId,
    owner,
    ...handleFields(conv),
  };
  rememberLimits(handle, input.limits);
  conv.bind(handle, lease.rootStartTime);
  live.add({ handle, launched, client, conv, turn: undefined, closing: false, closeReason: undefined });
  live.inFlight.delete(lease.leaseId);
  const t = a.t;
  d.onEnsureTiming?.({
    sessionKey: input.sessionKey,
    leaseMs: t.lease - t.start,
    wrapperSpawnMs: t.started - t.lease,
    recordRootMs: t.recorded - t.started,
    handshakeMs: t.handshake - t.recorded,
    totalMs: performance.now() - t.start,
  });
  return handle;
}

/**
 * The lease's cgroup binding, once the root is known: the cgroup is evidence
 * only when the root is in it (the wrapper's move can fail); else it leaves
 * the lease and is removed, or, with limits (which hold only inside it), the
 * attempt fails and the settlement kills the tree and drains the cgroup.
 */
async function keepCgroupIfRootInside(a: EnsureAttempt, rootPid: number): Promise<void> {
  const { d, cgroup } = a;
  // the cgroup is evidence only when the root is in it (the wrapper's move can fail): else it is dropped
  const rootCgroup =
    cgroup !== null && d.containment.available ? await readCgroupOf(rootPid, mountOf(d.containment)) : null;
  if (cgroup !== null && rootCgroup !== cgroup.path) {
    if (a.limitControllers.length > 0) {
      // limits hold only inside the cgroup: the settlement kills the tree and drains the cgroup
      const why = `the wrapper (pid ${rootPid}) is in ${rootCgroup ?? "an unreadable cgroup"}, not in its lease cgroup ${cgroup.path}, so the limits would not hold`;
      return a.fail("limits-unavailable", `${why}; its tree was killed`, undefined, { limitsRefusal: { why } });
    }
    a.lease = await dropLeaseCgroup(d.leases, a.lease.leaseId, cgroup).catch((err: unknown) =>
      a.fail("wrapper-failed", `the lease could not drop its unused cgroup: ${errMessage(err)}`, err),
    );
  }
}

/**
 * Writes the limits into the lease's fresh, empty cgroup. On a refusal the
 * cgroup is removed (nothing is in it) and the result says why and how the
 * removal went; null = applied.
 */
async function applyOrRemove(
  bound: LeaseCgroupBinding,
  limits: EnforcedLimits,
): Promise<{ controller?: string; why: string; removal: string } | null> {
  if (bound.cgroup === null) return { why: bound.why, removal: "" };
  const cgroup = bound.cgroup;
  const r = await applyLimits(cgroup, limits);
  if (r.ok) return null;
  const rm = await removeCgroup(cgroup, { waitMs: 1000 });
  const removal =
    rm.outcome === "removed" || rm.outcome === "gone"
      ? `; its cgroup ${cgroup.path} was removed`
      : `; its empty cgroup ${cgroup.path} could not be removed (${rm.outcome}: ${"why" in rm ? rm.why : rm.detail})`;
  return { controller: r.controller, why: r.why, removal };
}
