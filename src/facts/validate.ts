/**
 * Input validation for everything that names a process. It lives in TS so the
 * native side never sees garbage (serialport/bindings-cpp style).
 */

/** Linux PID_MAX_LIMIT (2^22); no platform we support hands out larger pids. */
export const MAX_PID = 2 ** 22;

/**
 * Throws TypeError for a non-number / non-integer, RangeError for a pid
 * outside 1..2^22. The message names the argument so callers know what to fix.
 */
export function assertPid(value: unknown, name = "pid"): asserts value is number {
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`${name} must be an integer process id, got ${describe(value)}`);
  }
  if (!Number.isInteger(value)) {
    throw new TypeError(`${name} must be an integer process id, got ${value}`);
  }
  if (value < 1 || value > MAX_PID) {
    throw new RangeError(`${name} must be between 1 and ${MAX_PID}, got ${value}`);
  }
}

/** Env keys: non-empty strings without "=" or NUL (they could never match). */
export function assertEnvKeys(value: unknown, name = "envKeys"): asserts value is readonly string[] {
  if (value === undefined) return;
  if (!Array.isArray(value)) throw new TypeError(`${name} must be an array of strings, got ${describe(value)}`);
  value.forEach((k: unknown, i) => {
    if (typeof k !== "string" || k.length === 0 || k.includes("=") || k.includes("\0")) {
      throw new TypeError(`${name}[${i}] must be a non-empty string without '=' or NUL, got ${describe(k)}`);
    }
  });
}

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") return String(v);
  if (v === null) return "null";
  return typeof v;
}

/** An optional duration/count option: undefined → the default; else a finite number >= 0, or a RangeError naming it. */
export function nonNegativeOption(v: number | undefined, dflt: number, name: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
    throw new RangeError(`${name} must be a finite number >= 0, got ${String(v)}`);
  return v;
}

/** Like nonNegativeOption, but 0 is refused too. */
export function positiveOption(v: number | undefined, dflt: number, name: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
    throw new RangeError(`${name} must be a finite number > 0, got ${String(v)}`);
  return v;
}
