// The raw session's error, apart from raw-adapter.ts: the live table throws
// it, and the raw adapter imports the live table.
/** A conversation call on a raw session. */
export class AcpxRawSessionError extends Error {
  override name = "AcpxRawSessionError";
  readonly code = "raw-session";
  constructor(readonly sessionKey: string) {
    super(
      `session ${JSON.stringify(sessionKey)} was started with spawnRawAdapter: its plugin speaks ACP on the adapter's stdin/stdout, the controller does not`,
    );
  }
}
