/**
 * Errors the controller throws. Each names its cause in the message and
 * carries it as a typed field, so callers can branch without parsing text.
 */

/** Why ensureSession failed. */
export type EnsureFailureCause =
  | "spawn-error" // the wrapper could not start the adapter (missing executable, EACCES, …)
  | "wrapper-failed" // the wrapper itself could not be started or died before reporting
  | "adapter-exited" // the adapter exited during the ACP handshake
  | "handshake-timeout" // the adapter never answered initialize / session/new in time
  | "handshake-error"; // the adapter answered the handshake with an error

export class AcpxEnsureError extends Error {
  override name = "AcpxEnsureError";
  constructor(
    readonly sessionKey: string,
    readonly failure: EnsureFailureCause,
    message: string,
    /** the lease that was written for the attempt, settled before this was thrown */
    readonly leaseId: string | undefined,
    /**
     * its state then: "closed" (a verified reap completed), "lost" (nothing of
     * it alive), or "closing" when something may still run or the facts could
     * not tell (the maintenance timer and startup reaping retry it)
     */
    readonly leaseState: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A prompt that was running when its session was closed. */
export class AcpxSessionClosedError extends Error {
  override name = "AcpxSessionClosedError";
  constructor(
    readonly sessionKey: string,
    readonly reason: string | undefined,
  ) {
    super(`ACP session ${JSON.stringify(sessionKey)} was closed while a prompt was running${reason ? ` (${reason})` : ""}`);
  }
}

/** prompt on a handle this controller has no live connection for. */
export class AcpxNoSessionError extends Error {
  override name = "AcpxNoSessionError";
  constructor(
    readonly sessionKey: string,
    detail: string,
  ) {
    super(`no live ACP session for ${JSON.stringify(sessionKey)}: ${detail}`);
  }
}
