/**
 * OpenClaw's shutdown as a durable handover. When its gateway shuts down
 * (SIGTERM, `openclaw gateway restart`), OpenClaw's ACP session manager
 * first aborts every turn's signal and cancels it, then closes every cached
 * session, all with the reason "gateway-shutdown", and only then stops the
 * plugin's service. With `durable`, those cancels and closes are the
 * handover itself: the turns run on and the sessions wait for the next
 * gateway (the service's stop detaches them). Any other reason (a user's
 * cancel, `/acp close`, an idle sweep) cancels and closes as always.
 */

/** OpenClaw 2026.9's reason for the cancels and closes of its gateway's shutdown (server-close: "gateway-shutdown"). */
export const GATEWAY_SHUTDOWN_REASON = "gateway-shutdown";

export class ShutdownHandover {
  private on = false;

  constructor(private readonly durable: boolean) {}

  /** True (and the handover begun) when a cancel or close with this reason is the shutdown's, under durable. */
  claims(reason: string | undefined): boolean {
    if (!this.durable || reason !== GATEWAY_SHUTDOWN_REASON) return false;
    this.on = true;
    return true;
  }

  /** Whether the gateway is handing its durable sessions over: an aborted turn signal then leaves the turn running. */
  get active(): boolean {
    return this.on;
  }
}
