/**
 * The controller's hooks (`onSessionEnd`, `onLeaseSettled`): called after
 * the fact, each guarded, so a hook that throws is logged and can never
 * break a close, an ensure or a reconcile.
 */
import type { LeaseStore } from "../../ownership/index.js";
import type { ControllerLogger } from "../report/logger.js";
import type { AcpRuntimeHandle } from "../connection/types.js";
import type { AcpxLifecycleControllerOptions, LeaseSettledOutcome, SessionEndHow } from "../sessions/types.js";

export class ControllerHooks {
  constructor(
    private readonly opts: Pick<AcpxLifecycleControllerOptions, "onSessionEnd" | "onLeaseSettled">,
    private readonly leases: LeaseStore,
    private readonly log: ControllerLogger,
  ) {}

  sessionEnded(handle: AcpRuntimeHandle, how: SessionEndHow): void {
    const hook = this.opts.onSessionEnd;
    if (hook) this.call(() => hook(handle, how));
  }

  /** whether there is an onLeaseSettled to call: without one, a reconcile keeps no list of what it settled */
  get wantsSettled(): boolean {
    return this.opts.onLeaseSettled !== undefined;
  }

  /** onLeaseSettled with the lease as recorded now (a settled state only), and how it ended as the record says. */
  async leaseSettled(leaseId: string, outcome: LeaseSettledOutcome): Promise<void> {
    const hook = this.opts.onLeaseSettled;
    if (hook === undefined) return;
    const lease = await this.leases.get(leaseId).catch(() => null);
    if (lease) this.call(() => hook(lease, lease.settledAs ? { ...outcome, settledAs: lease.settledAs } : outcome));
  }

  /** A failed ensure whose error names a settled lease. */
  ensureFailed(err: unknown): void {
    const e = err as { leaseId?: unknown; leaseState?: unknown; message?: unknown } | null;
    if (typeof e?.leaseId !== "string" || (e.leaseState !== "closed" && e.leaseState !== "lost")) return;
    void this.leaseSettled(e.leaseId, { via: "ensure-failed", state: e.leaseState, detail: String(e.message) });
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error?.(`a controller hook threw: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
