/**
 * What a session/update costs to hold, in bytes, and the bounds on it.
 *
 * The size is an estimate of the update's JSON text (string lengths plus a
 * few bytes per key, element and scalar), taken by one walk over the parsed
 * object: about 0.1 µs for a chunk of a few hundred bytes and 0.3 ms for
 * 400 KB, where re-serialising (JSON.stringify) costs 0.7 µs and 0.6 ms
 * (measured on the dev box, node 20). It counts UTF-16 code units, so text
 * outside ASCII reads smaller than its UTF-8 line; the bounds are about
 * memory held, where a parsed object costs more than its text anyway.
 */

/** Default bound on a streamed turn's unread updates: past it the adapter's stdout stops being read. */
export const DEFAULT_TURN_BACKLOG_BYTES = 4 * 1024 * 1024;
/** Default bound on the updates held for a session nobody listens to: past it the oldest are dropped. */
export const DEFAULT_SESSION_BACKLOG_BYTES = 4 * 1024 * 1024;
/** Largest accepted bound (the SDK refuses a message over 32 MiB; a bound far past that bounds nothing useful). */
export const MAX_BACKLOG_BYTES = 1024 * 1024 * 1024;

/** The byte bounds a controller applies to every session (controller option `updateLimits`). */
export interface UpdateLimits {
  /**
   * Unread updates a streamed turn holds before the controller stops reading
   * the adapter's stdout (the adapter then blocks on its write); reading
   * resumes once the consumer has drained half of it. Default 4 MiB.
   */
  turnBacklogBytes?: number;
  /**
   * Updates held for a session with no onUpdate listener (outside streamed
   * turns); past it the oldest are dropped and counted. Default 4 MiB.
   */
  sessionBacklogBytes?: number;
}

export interface ResolvedUpdateLimits {
  turnBacklogBytes: number;
  sessionBacklogBytes: number;
}

/** Validates `updateLimits` (a TypeError naming the field) and fills the defaults. */
export function resolveUpdateLimits(
  limits: UpdateLimits | undefined,
  name = "opts.updateLimits",
): ResolvedUpdateLimits {
  if (limits !== undefined && (typeof limits !== "object" || limits === null || Array.isArray(limits))) {
    throw new TypeError(`${name} must be an object { turnBacklogBytes?, sessionBacklogBytes? }`);
  }
  for (const k of Object.keys(limits ?? {})) {
    if (k !== "turnBacklogBytes" && k !== "sessionBacklogBytes")
      throw new TypeError(`${name}.${k} is not a limit (turnBacklogBytes, sessionBacklogBytes)`);
  }
  return {
    turnBacklogBytes: byteBound(limits?.turnBacklogBytes, DEFAULT_TURN_BACKLOG_BYTES, `${name}.turnBacklogBytes`),
    sessionBacklogBytes: byteBound(
      limits?.sessionBacklogBytes,
      DEFAULT_SESSION_BACKLOG_BYTES,
      `${name}.sessionBacklogBytes`,
    ),
  };
}

function byteBound(v: unknown, fallback: number, name: string): number {
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1024 || v > MAX_BACKLOG_BYTES) {
    throw new TypeError(
      `${name} must be an integer number of bytes from 1024 to ${MAX_BACKLOG_BYTES}, got ${String(v)}`,
    );
  }
  return v;
}

/** The estimated JSON size of a parsed value (an explicit stack: no recursion limit on hostile nesting). */
export function estimateJsonBytes(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    switch (typeof v) {
      case "string":
        n += v.length + 2;
        break;
      case "number":
        n += 8;
        break;
      case "boolean":
        n += 5;
        break;
      case "object":
        if (v === null) n += 4;
        else if (Array.isArray(v)) {
          n += 2 + v.length;
          for (const x of v) stack.push(x);
        } else {
          n += 2;
          for (const k in v) {
            n += k.length + 4;
            stack.push((v as Record<string, unknown>)[k]);
          }
        }
        break;
      default:
        n += 4;
    }
  }
  return n;
}
