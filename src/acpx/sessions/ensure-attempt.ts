/**
 * An ensure attempt and how it fails: every step that can fail holds the
 * attempt, so every failure takes the one path (EnsureAttempt.fail) that
 * settles the attempt's lease through the lifecycle before it throws. An
 * attempt the controller's end aborted (dispose, shutdown) settles the same
 * way and rejects with the disposal's error, whose cause names the lease.
 */
import { checkSignalTarget } from "../../facts/guards.js";
import { settleLease, settleUnstarted } from "../../ownership/index.js";
import type { LeaseCgroupBinding } from "../../ownership/lifecycle/lease-cgroup.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import type { AcpClient } from "../connection/acp-client.js";
import type { SessionConversation } from "../connection/conversation.js";
import type { EnsureInput } from "./ensure-input.js";
import {
  AcpxControllerDisposedError,
  AcpxEnsureError,
  type AcpxEnsureErrorDetails,
  type EnsureFailureCause,
} from "../report/errors.js";
import type { LaunchedWrapper } from "../launch/launch.js";
import { lifecycleDeps, releaseLaunched, type ControllerDeps, type LiveSessions } from "./live-sessions.js";
import type { LimitController } from "../connection/types.js";

/**
 * One ensure attempt: its lease (reassigned as it is recorded), its cgroup,
 * and what was started for it so far. `fail` ends the attempt: it closes what
 * was opened, reads the adapter's last words, settles the lease through the
 * lifecycle, and throws the AcpxEnsureError that names the failure.
 */
export class EnsureAttempt {
  launched: LaunchedWrapper | undefined;
  client: AcpClient | undefined;
  conv: SessionConversation | undefined;
  /** performance.now() at each step's end, for onEnsureTiming */
  readonly t = { start: 0, lease: 0, started: 0, recorded: 0, handshake: 0 };

  constructor(
    readonly d: ControllerDeps,
    readonly live: LiveSessions,
    readonly input: EnsureInput,
    public lease: ProcessLease,
    /** the lease's cgroup binding (ownership/lifecycle/lease-cgroup.ts): its cgroup, or why there is none (what limits need) */
    readonly bound: LeaseCgroupBinding,
    /** the cgroup controllers the input's limits need (none: no limits asked for) */
    readonly limitControllers: readonly LimitController[],
    /** aborted by the controller's end (its reason the disposal's error): the attempt is given up */
    readonly signal: AbortSignal,
  ) {}

  /** The controller ended while the attempt was under way: settled as any failure, rejected with the disposal's error. */
  abandon(during: string): Promise<never> {
    return this.fail("aborted", `the controller ended during ${during}`);
  }

  /** abandon() when the controller has ended; else nothing */
  async checkAborted(during: string): Promise<void> {
    if (this.signal.aborted) await this.abandon(during);
  }

  get cgroup(): LeaseCgroupBinding["cgroup"] {
    return this.bound.cgroup;
  }

  async fail(
    failure: EnsureFailureCause,
    message: string,
    cause?: unknown,
    details?: AcpxEnsureErrorDetails,
  ): Promise<never> {
    const { launched } = this;
    this.client?.close(new Error(`ensureSession failed: ${failure}`));
    await this.conv?.end(`ensureSession failed: ${failure}`);
    // what the adapter said and how it ended, read before the settlement kills it
    const diag: AcpxEnsureErrorDetails = { ...(cause !== undefined ? { cause } : {}), ...details };
    const tail = launched?.stderrTail();
    if (diag.stderrTail === undefined && tail) diag.stderrTail = tail;
    const end = launched?.howEnded();
    if (diag.end === undefined && end) diag.end = end;
    const settled = await settleFailedSpawn(this.d, this.lease, launched);
    this.live.inFlight.delete(this.lease.leaseId);
    const key = this.input.sessionKey;
    const err = new AcpxEnsureError(
      key,
      failure,
      `ensureSession ${JSON.stringify(key)} failed: ${message} (lease ${this.lease.leaseId} ${settled})`,
      this.lease.leaseId,
      settled,
      diag,
    );
    throw this.signal.aborted ? disposalError(this.signal, err) : err;
  }
}

/** What raceAbort resolves with when the signal aborted first. */
export const ABORTED: unique symbol = Symbol("aborted");

/** `p`'s value, or ABORTED as soon as `signal` aborts (at once when it already has); `p`'s rejection passes through. */
export function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T | typeof ABORTED> {
  if (signal.aborted) return Promise.resolve(ABORTED);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => resolve(ABORTED);
    signal.addEventListener("abort", onAbort, { once: true });
    const off = (): void => signal.removeEventListener("abort", onAbort);
    p.then(
      (v) => {
        off();
        resolve(v);
      },
      (e: unknown) => {
        off();
        reject(e);
      },
    );
  });
}

/** The error an ensure the controller's end aborted rejects with: the disposal's, its cause what the ensure's settlement said. */
export function disposalError(signal: AbortSignal, cause?: unknown): AcpxControllerDisposedError {
  const how = signal.reason instanceof AcpxControllerDisposedError ? signal.reason.how : "disposed";
  return new AcpxControllerDisposedError(how, cause === undefined ? undefined : { cause });
}

/**
 * Cleanup after a failed ensure, through the one lifecycle: verify and kill
 * whatever the lease owns, break the lifeline (the wrapper then cleans its
 * own tree; SIGKILL of our child while it is unreaped if it does not exit),
 * verify again when that was all that ran, and settle. A wrapper that never
 * reported its pid is still our child: its pid (without an identity, see
 * recordChildPid) lets the verification search for what carries the lease's
 * markers; no process at all = nothing started. Returns the lease state.
 */
async function settleFailedSpawn(
  d: ControllerDeps,
  lease: ProcessLease,
  launched: LaunchedWrapper | undefined,
): Promise<string> {
  try {
    return await settleFailedSpawnNow(d, lease, launched);
  } catch (err) {
    // the host failing the settlement (a read refused): our wrapper is still told to clean up, and the lease is the next reconcile's
    if (launched) await releaseLaunched(launched, d.graceMs).catch(() => undefined);
    return `not settled (${errMessage(err)}); the next reconcile settles it`;
  }
}

async function settleFailedSpawnNow(
  d: ControllerDeps,
  lease: ProcessLease,
  launched: LaunchedWrapper | undefined,
): Promise<string> {
  let current = (await d.leases.get(lease.leaseId)) ?? lease;
  if (current.state === "closed" || current.state === "lost") return current.state;
  if (current.rootPid <= 0 && launched?.pid !== undefined) current = await recordChildPid(d, current, launched.pid);
  // no process of it was ever known: the one unstarted sequence (drains and removes its cgroup)
  if (current.rootPid <= 0 && launched?.pid === undefined)
    return (await settleUnstarted(lifecycleDeps(d), { ...lease, ...current })).state;
  const o = await settleLease(
    lifecycleDeps(d),
    current,
    launched ? { release: () => releaseLaunched(launched, d.graceMs) } : {},
  );
  return o.stateAfter;
}

/**
 * Records the pid of our own wrapper child in a lease that has none (it
 * never reported): the pid only, never an identity read now (the child
 * may have exited and been reaped, so the pid may name another process).
 * Verification then needs the lease id in the root's environment plus one
 * more positive check to call a live pid ours, and a gone pid starts the
 * remnant search (dated against the lease's startedAt).
 */
async function recordChildPid(d: ControllerDeps, lease: ProcessLease, pid: number): Promise<ProcessLease> {
  if (!checkSignalTarget(pid).allowed) return lease;
  return d.leases.update(lease.leaseId, { rootPid: pid }).catch(() => lease);
}

/** The last lines of the adapter's stderr, as a note for a message. */
export function stderrNote(l: LaunchedWrapper): string {
  const t = l.stderrTail();
  if (!t) return "";
  const last = t.split("\n").slice(-3).join(" | ");
  return `; stderr: ${last.slice(-300)}`;
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
