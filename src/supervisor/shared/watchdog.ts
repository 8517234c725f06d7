/**
 * The single source of watchdog defaults (one source, as in OpenClaw). Every
 * consumer that needs a no-output deadline imports the resolver from here;
 * nothing else in the package may restate these numbers.
 */

/** No timeout the resolver returns is shorter than this. */
export const WATCHDOG_MIN_TIMEOUT_MS = 1_000;

export interface WatchdogProfile {
  /** share of the overall timeout given to the no-output watchdog */
  readonly noOutputTimeoutRatio: number;
  readonly minMs: number;
  readonly maxMs: number;
}

/** A fresh run may think for a long time before its first output. */
export const FRESH_WATCHDOG_DEFAULTS: WatchdogProfile = Object.freeze({
  noOutputTimeoutRatio: 0.8,
  minMs: 180_000,
  maxMs: 600_000,
});

/** A resumed run already has context: silence means trouble sooner. */
export const RESUME_WATCHDOG_DEFAULTS: WatchdogProfile = Object.freeze({
  noOutputTimeoutRatio: 0.3,
  minMs: 60_000,
  maxMs: 180_000,
});

export interface ResolveNoOutputTimeoutInput {
  /** the run's overall timeout in ms */
  timeoutMs: number;
  resumed?: boolean;
  /**
   * What started the run (OpenClaw's run trigger: "user", "cron", …). Only
   * "cron" changes anything: a resumed run started by a cron job gets the
   * fresh profile instead of the resume one, unless the backend configured
   * its resume watchdog (any field of `override`). A scheduled job resumes a
   * session nobody is watching, so it may think as long as a fresh run
   * before its first output; the resume ceiling (RESUME_WATCHDOG_DEFAULTS.maxMs)
   * would otherwise kill it after 3 minutes of silence.
   */
  trigger?: string;
  /** per-backend overrides; an explicit `noOutputTimeoutMs` wins over the ratio */
  override?: Partial<WatchdogProfile> & { noOutputTimeoutMs?: number };
}

const PROFILE_FIELDS = ["noOutputTimeoutRatio", "minMs", "maxMs", "noOutputTimeoutMs"] as const;

/**
 * The no-output deadline for a run: ratio × overall timeout, clamped to the
 * profile's [min, max], then kept below the overall timeout (1 s of headroom,
 * so the more specific `no-output-timeout` reason can fire first) and never
 * under WATCHDOG_MIN_TIMEOUT_MS.
 */
export function resolveNoOutputTimeoutMs(input: ResolveNoOutputTimeoutInput): number {
  const { timeoutMs } = input;
  if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive finite number, got ${String(timeoutMs)}`);
  }
  const o = input.override ?? {};
  const configured = PROFILE_FIELDS.some((f) => o[f] !== undefined);
  // OpenClaw: a resumed cron run without a configured resume watchdog is watched like a fresh one
  const base =
    input.resumed && !(input.trigger === "cron" && !configured) ? RESUME_WATCHDOG_DEFAULTS : FRESH_WATCHDOG_DEFAULTS;
  const cap = Math.max(WATCHDOG_MIN_TIMEOUT_MS, Math.floor(timeoutMs) - WATCHDOG_MIN_TIMEOUT_MS);
  if (o.noOutputTimeoutMs !== undefined) {
    return Math.max(WATCHDOG_MIN_TIMEOUT_MS, Math.min(Math.floor(o.noOutputTimeoutMs), cap));
  }
  const ratio = o.noOutputTimeoutRatio ?? base.noOutputTimeoutRatio;
  const minMs = o.minMs ?? base.minMs;
  const maxMs = o.maxMs ?? base.maxMs;
  const bounded = Math.min(maxMs, Math.max(minMs, Math.floor(timeoutMs * ratio)));
  return Math.max(WATCHDOG_MIN_TIMEOUT_MS, Math.min(bounded, cap));
}

/**
 * The no-output deadline the supervisor arms for one run, from its SpawnInput:
 * undefined when disabled (absent, 0, negative or not finite); with an
 * overall timeout, `resolveNoOutputTimeoutMs` with the explicit value as its
 * override (so it is clamped below the overall deadline); without one, the
 * explicit value, never under WATCHDOG_MIN_TIMEOUT_MS.
 */
export function resolveRunNoOutputTimeoutMs(input: {
  noOutputTimeoutMs?: number;
  timeoutMs?: number;
}): number | undefined {
  const quiet = input.noOutputTimeoutMs;
  if (typeof quiet !== "number" || !Number.isFinite(quiet) || quiet <= 0) return undefined;
  const overall = input.timeoutMs;
  if (typeof overall === "number" && Number.isFinite(overall) && overall > 0) {
    return resolveNoOutputTimeoutMs({ timeoutMs: overall, override: { noOutputTimeoutMs: quiet } });
  }
  return Math.max(WATCHDOG_MIN_TIMEOUT_MS, Math.floor(quiet));
}
