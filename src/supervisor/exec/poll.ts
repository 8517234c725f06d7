/** What poll and log read from a session: the output since the last poll (after an optional wait), and lines of the log. */
import { truncationMarker } from "../shared/output.js";
import type { Session } from "./table.js";
import { DEFAULT_LOG_LINES, type LogResult, type PollResult } from "./types.js";

/**
 * Waits up to `waitMs` for output or the exit, unless some is already
 * pending or the session has exited. An abort of `signal` ends the wait at
 * once and rejects with its reason; the output stays pending.
 */
export function waitForOutput(s: Session, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
  if (s.pending !== "" || s.info.status !== "running" || waitMs <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const finish = (aborted: boolean) => {
      clearTimeout(t);
      s.waiters.delete(wake);
      signal?.removeEventListener("abort", onAbort);
      if (aborted) reject(signal!.reason);
      else resolve();
    };
    const wake = () => finish(false);
    const onAbort = () => finish(true);
    const t = setTimeout(wake, waitMs);
    s.waiters.add(wake);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Hands out what arrived since the previous poll, and the exit once there is one. */
export function takePending(s: Session): PollResult {
  const output = s.pending;
  s.pending = "";
  return { status: s.info.status, output, ...(s.info.exit ? { exit: s.info.exit } : {}) };
}

/** Lines of the log (a truncation marker first when its front was cut): the last `limit` by default, else from `offset`. */
export function logOf(s: Session, o: { offset?: number; limit?: number }): LogResult {
  const text = (s.dropped > 0 ? truncationMarker(s.dropped) : "") + s.output;
  const all = text.split(/\r?\n/);
  if (all.length > 0 && all[all.length - 1] === "") all.pop();
  const limit = o.limit ?? DEFAULT_LOG_LINES;
  if (!Number.isInteger(limit) || limit < 0) throw new RangeError(`limit must be an integer >= 0, got ${limit}`);
  let offset: number;
  if (o.offset === undefined) offset = Math.max(0, all.length - limit);
  else {
    if (!Number.isInteger(o.offset) || o.offset < 0)
      throw new RangeError(`offset must be an integer >= 0, got ${o.offset}`);
    offset = o.offset;
  }
  return { lines: all.slice(offset, offset + limit), totalLines: all.length, offset };
}
