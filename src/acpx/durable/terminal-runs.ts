/**
 * A durable session's terminal as a supervisor run under the terminal
 * holder (durable/terminals.ts), and the terminals an earlier gateway left,
 * taken back when their session is re-adopted.
 */
import type { WaitForTerminalExitResponse } from "@agentclientprotocol/sdk";
import { sameProcess } from "../../facts/identity.js";
import { readStatSync } from "../../facts/procfs.js";
import type { ProcessFacts } from "../../facts/types.js";
import { verifyOwnedTree } from "../../ownership/index.js";
import type { LeaseStore } from "../../ownership/leases/lease-store.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import { SUPERVISOR_SESSION_PREFIX, type ProcessSupervisor, type RunExit } from "../../supervisor/index.js";
import {
  filesOf,
  forgetFiles,
  holderArgv,
  readOutput,
  readStatus,
  terminalsOf,
  watchExit,
  writeMeta,
  type DurableTerminals,
  type OutputRead,
  type TerminalFiles,
} from "./terminals.js";

/** One terminal of a session, however its output is kept (client-terminal.ts). */
export interface Terminal {
  runId: string;
  pid: number | undefined;
  read(): Promise<OutputRead>;
  exit: WaitForTerminalExitResponse | undefined;
  exited: Promise<WaitForTerminalExitResponse>;
  /** taken back from an earlier gateway: this supervisor never ran it, so it is ended through its lease (a reconcile) */
  retaken: boolean;
  /** the holder's files (durable terminals), removed once the terminal is released */
  files: TerminalFiles | undefined;
}

export function exitStatusOf(x: RunExit): WaitForTerminalExitResponse {
  return { exitCode: x.exitCode, signal: x.exitSignal };
}

function track(t: Terminal): Terminal {
  void t.exited.then((x) => {
    t.exit = x;
  });
  return t;
}

export interface HeldSpawn {
  terminalId: string;
  sessionKey: string;
  session: { leaseId: string; pid: number; startTicks: string };
  command: readonly string[];
  cwd: string;
  env: Record<string, string | undefined>;
  limit: number;
  backendId: string;
  scopeKey: string;
}

/** The terminal spawned under the holder, its lease durable, its files named by the session's lease. */
export async function spawnHeld(sup: ProcessSupervisor, dt: DurableTerminals, x: HeldSpawn): Promise<Terminal> {
  const files = filesOf(dt.dir, x.terminalId);
  // before the spawn: a gateway that dies right after it leaves a terminal the next one can find
  await writeMeta(files, { terminalId: x.terminalId, sessionLeaseId: x.session.leaseId, limit: x.limit });
  const run = await sup
    .spawn({
      mode: "child",
      runId: x.terminalId,
      sessionId: x.sessionKey,
      backendId: x.backendId,
      scopeKey: x.scopeKey,
      argv: holderArgv(dt, files, x.limit, x.session, x.command),
      cwd: x.cwd,
      env: x.env,
      background: true,
      captureOutput: false,
      durable: { reattachWithinMs: dt.reattachWithinMs },
    })
    .catch(async (e: unknown) => {
      await forgetFiles(files);
      throw e;
    });
  let ended: RunExit | undefined;
  const waited = run.wait().then((r) => {
    ended = r;
  });
  return track({
    runId: x.terminalId,
    pid: run.pid,
    read: () => readOutput(files.out, x.limit),
    exit: undefined,
    // the holder's status is the command's; the run's own exit only when the holder wrote none (killed outright)
    exited: watchExit(
      files,
      () => ended !== undefined,
      () => exitStatusOf(ended!),
      waited,
    ),
    retaken: false,
    files,
  });
}

export interface RetakeDeps {
  store: Pick<LeaseStore, "list">;
  facts: ProcessFacts;
  gatewayInstanceId: string;
  dt: DurableTerminals;
}

/**
 * The terminals recorded for the session's lease: those that ended while
 * nobody was attached (their status written), and those still running whose
 * own lease is this instance's open durable run and whose tree verifies.
 * The files of any other (its lease settled without a status: nothing to
 * answer with) are removed.
 */
export async function retakeTerminals(d: RetakeDeps, sessionLeaseId: string, prefix: string): Promise<Terminal[]> {
  const metas = await terminalsOf(d.dt.dir, sessionLeaseId, prefix);
  if (metas.length === 0) return [];
  const { leases } = await d.store.list({ gatewayInstanceId: d.gatewayInstanceId, states: ["open", "closing"] });
  const byKey = new Map(leases.filter((l) => l.kind === "supervisor").map((l) => [l.sessionKey, l]));
  const out: Terminal[] = [];
  for (const m of metas) {
    const files = filesOf(d.dt.dir, m.terminalId);
    const lease = byKey.get(`${SUPERVISOR_SESSION_PREFIX}${m.terminalId}`);
    const status = await readStatus(files.status);
    const read = () => readOutput(files.out, m.limit);
    const base = { runId: m.terminalId, pid: lease?.rootPid, read, retaken: true, files };
    if (status !== null) {
      out.push({ ...base, exit: status, exited: Promise.resolve(status) });
      continue;
    }
    const running = lease !== undefined ? await runningHolder(d, lease) : null;
    if (running === null) {
      await forgetFiles(files);
      continue;
    }
    const gone = () => !sameProcess(readStatSync(running.pid), { pid: running.pid, startTime: running.ticks });
    // a holder killed outright wrote no status: nothing tells how the command ended
    out.push(
      track({ ...base, exit: undefined, exited: watchExit(files, gone, () => ({ exitCode: null, signal: null })) }),
    );
  }
  return out;
}

/** The lease's holder, when the lease is an open durable run and its tree verifies. */
async function runningHolder(d: RetakeDeps, lease: ProcessLease): Promise<{ pid: number; ticks: string } | null> {
  if (lease.state !== "open" || lease.durable === undefined || lease.rootPid <= 0) return null;
  const tree = await verifyOwnedTree(lease, d.facts, { gatewayInstanceId: d.gatewayInstanceId });
  // the start time the verification just checked the root against
  return tree === null || lease.rootStartTime === undefined ? null : { pid: lease.rootPid, ticks: lease.rootStartTime };
}
