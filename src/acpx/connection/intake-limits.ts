/**
 * The bounds on what one session's agent can make the gateway hold or do
 * (controller option `intakeLimits`), with their defaults and valid ranges.
 * session-budget.ts enforces them; intake-stream.ts applies the per-message
 * ones to every line the agent writes. The user doc is docs/bounds.md.
 */

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * Default bound on one message from the agent (one JSON-RPC line, UTF-8,
 * its newline excluded), 12 MiB. What ACP messages legitimately carry at
 * their largest: an fs/write_text_file's content (client fs writes default
 * to 10 MiB of content, which JSON escaping of newlines and quotes grows by
 * a few percent in source code and up to ~20% in a JSON file) and a tool
 * call's diff (old and new text of one file). What a line costs the event
 * loop before anything can refuse it by content: joining its chunks,
 * scanning it (json-scan.ts), decoding it and JSON.parse, all synchronous.
 * Measured on the 2-core dev box (node 20): 12 MiB of source code as a
 * string took 70–135 ms end to end, 16 MiB 65–100 ms on a good run but
 * more under load, and the SDK's own 32 MiB line of tiny values blocked
 * the loop 1.1 s. 12 MiB keeps the worst single line under the 250 ms the
 * gateway allows itself on a loaded machine while a default-sized write
 * still fits.
 */
const DEFAULT_MAX_MESSAGE_BYTES = 12 * MiB;
/** Default bound on nesting (objects and arrays) in one message: ACP's own shapes nest under 10; tool inputs and `_meta` a little more. */
const DEFAULT_MAX_JSON_DEPTH = 64;
/**
 * Default bound on the JSON values of one message (each object and array
 * counts twice, each `,` once): JSON.parse plus the SDK's schema check cost
 * about 0.4 µs a value (a 100,000-entry plan: 120 ms to parse and 75 ms to
 * check), where a string costs its bytes. The largest legitimate lists are
 * a few thousand commands or plan entries.
 */
const DEFAULT_MAX_JSON_VALUES = 100_000;
/** Default bound on agent → client requests (fs, permission, terminal) unanswered at once. */
const DEFAULT_MAX_REQUESTS_IN_FLIGHT = 64;
/**
 * Default bound on the bytes of agent → client requests unanswered at once
 * (their lines as read). An admitted request's message stays alive until it
 * is answered, and a gateway holds a few copies of it while it works (the
 * parsed content, the bytes it writes), so 64 unanswered writes of a few MiB
 * each cost hundreds of MB; a fuzzed agent reached 257 MB of RSS with 42.
 * 16 MiB lets a default-sized write through alone and several small ones
 * beside it.
 */
const DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT = 16 * MiB;
/** Default bound on answer bytes queued for the agent (written, not yet taken by its stdin pipe) and being built. */
const DEFAULT_MAX_QUEUED_ANSWER_BYTES = 16 * MiB;
/** Default bound on the log bytes one session may produce per second; past it lines are dropped and counted. */
const DEFAULT_MAX_LOG_BYTES_PER_SECOND = 64 * KiB;

/** The ACP SDK's own limit on one line (an SDK-built agent cannot send or read a longer one). */
const SDK_MAX_MESSAGE_BYTES = 32 * MiB;

/** The controller option `intakeLimits`: each bound applies to every session on its own. */
export interface IntakeLimits {
  /** one message from the agent, in bytes (default 12 MiB; 64 KiB to 32 MiB) */
  maxMessageBytes?: number;
  /** nesting depth of one message (default 64; 8 to 1000) */
  maxJsonDepth?: number;
  /** JSON values of one message (default 100,000; 1,000 to 10,000,000) */
  maxJsonValues?: number;
  /** agent → client requests unanswered at once (default 64; 1 to 4096) */
  maxRequestsInFlight?: number;
  /** bytes of agent → client requests unanswered at once (default 16 MiB; 64 KiB to 1 GiB) */
  maxRequestBytesInFlight?: number;
  /** answer bytes queued for an agent that does not read, and being built (default 16 MiB; 64 KiB to 1 GiB) */
  maxQueuedAnswerBytes?: number;
  /** log bytes per second for one session (default 64 KiB; 1 KiB to 64 MiB) */
  maxLogBytesPerSecond?: number;
}

export type ResolvedIntakeLimits = Required<IntakeLimits>;

/** Every intake bound at its default (docs/bounds.md). */
export const DEFAULT_INTAKE_LIMITS: Readonly<ResolvedIntakeLimits> = Object.freeze({
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  maxJsonDepth: DEFAULT_MAX_JSON_DEPTH,
  maxJsonValues: DEFAULT_MAX_JSON_VALUES,
  maxRequestsInFlight: DEFAULT_MAX_REQUESTS_IN_FLIGHT,
  maxRequestBytesInFlight: DEFAULT_MAX_REQUEST_BYTES_IN_FLIGHT,
  maxQueuedAnswerBytes: DEFAULT_MAX_QUEUED_ANSWER_BYTES,
  maxLogBytesPerSecond: DEFAULT_MAX_LOG_BYTES_PER_SECOND,
});

interface Range {
  min: number;
  max: number;
  unit: string;
}

/** Each bound's valid range: below it a legitimate agent stops working, above it the bound bounds nothing useful. */
const RANGES: Readonly<Record<keyof IntakeLimits, Range>> = Object.freeze({
  maxMessageBytes: { min: 64 * KiB, max: SDK_MAX_MESSAGE_BYTES, unit: "bytes" },
  // past ~2,000 levels a recursive walk (structuredClone, JSON.stringify) overflows the stack
  maxJsonDepth: { min: 8, max: 1000, unit: "levels" },
  maxJsonValues: { min: 1000, max: 10_000_000, unit: "values" },
  maxRequestsInFlight: { min: 1, max: 4096, unit: "requests" },
  maxRequestBytesInFlight: { min: 64 * KiB, max: 1024 * MiB, unit: "bytes" },
  maxQueuedAnswerBytes: { min: 64 * KiB, max: 1024 * MiB, unit: "bytes" },
  maxLogBytesPerSecond: { min: KiB, max: 64 * MiB, unit: "bytes" },
});

const KEYS = Object.keys(RANGES) as (keyof IntakeLimits)[];

/** Validates `intakeLimits` (a TypeError naming the field) and fills the defaults. */
export function resolveIntakeLimits(limits: unknown, name = "opts.intakeLimits"): ResolvedIntakeLimits {
  if (limits !== undefined && (typeof limits !== "object" || limits === null || Array.isArray(limits))) {
    throw new TypeError(`${name} must be an object { ${KEYS.map((k) => `${k}?`).join(", ")} }`);
  }
  const given = (limits ?? {}) as Record<string, unknown>;
  for (const k of Object.keys(given)) {
    if (!(KEYS as string[]).includes(k)) throw new TypeError(`${name}.${k} is not a limit (${KEYS.join(", ")})`);
  }
  const out = {} as ResolvedIntakeLimits;
  for (const k of KEYS) {
    const r = RANGES[k];
    const v = given[k];
    if (v === undefined) {
      out[k] = DEFAULT_INTAKE_LIMITS[k];
      continue;
    }
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < r.min || v > r.max) {
      throw new TypeError(
        `${name}.${k} must be an integer number of ${r.unit} from ${r.min} to ${r.max}, got ${String(v)}`,
      );
    }
    out[k] = v;
  }
  return out;
}
