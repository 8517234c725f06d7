/**
 * The controller's `logger` option: where it reports what it decided on its
 * own (a permission answered "cancelled", an fs refusal, a terminal ended, a
 * hook that threw). Any object with these optional methods fits (console,
 * pino, OpenClaw's logger). Absent: nothing is logged. A logger that throws
 * is ignored: logging never changes an outcome.
 */
export interface ControllerLogger {
  debug?(message: string, fields?: Record<string, unknown>): void;
  info?(message: string, fields?: Record<string, unknown>): void;
  warn?(message: string, fields?: Record<string, unknown>): void;
  error?(message: string, fields?: Record<string, unknown>): void;
}

const LEVELS = ["debug", "info", "warn", "error"] as const;

/** The logger with every method guarded (a throwing logger is ignored). */
export function safeLogger(l: ControllerLogger | undefined): ControllerLogger {
  const out: ControllerLogger = {};
  if (l === undefined) return out;
  for (const level of LEVELS) {
    const fn = l[level];
    if (typeof fn !== "function") continue;
    out[level] = (message, fields) => {
      try {
        fn.call(l, message, fields);
      } catch {
        // logging never changes an outcome
      }
    };
  }
  return out;
}

export function assertLogger(v: unknown, name: string): void {
  if (v === undefined) return;
  if (typeof v !== "object" || v === null)
    throw new TypeError(`${name} must be an object with debug/info/warn/error methods`);
  for (const level of LEVELS) {
    const fn = (v as Record<string, unknown>)[level];
    if (fn !== undefined && typeof fn !== "function") throw new TypeError(`${name}.${level} must be a function`);
  }
}

/** The longest message a session's log line keeps; the rest is cut and counted. */
export const MAX_LOG_MESSAGE_CHARS = 1024;
/** The longest string field value a session's log line keeps. */
export const MAX_LOG_FIELD_CHARS = 256;

// C0 and C1 controls (ESC, CSI, newline, …), DEL and the Unicode line separators: nothing the agent sent moves a terminal's cursor or starts a forged line
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** `s` cut to `max` characters (saying how many were cut) with every control character escaped as \uXXXX. */
export function escapeForLog(s: string, max: number): string {
  const cut = s.length > max ? `${s.slice(0, max)}…(+${s.length - max} chars)` : s;
  return cut.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function escapeFields(fields: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (fields === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    const key = escapeForLog(k, 64);
    if (typeof v === "string") out[key] = escapeForLog(v, MAX_LOG_FIELD_CHARS);
    else if (v === null || v === undefined || typeof v === "number" || typeof v === "boolean") out[key] = v;
    else out[key] = escapeForLog(describeValue(v), MAX_LOG_FIELD_CHARS);
  }
  return out;
}

/** A short text of a non-scalar field: never a walk of what the agent sent (it may be deep or huge). */
function describeValue(v: unknown): string {
  if (Array.isArray(v)) return `[array of ${v.length}]`;
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  if (typeof v === "object" && v !== null) return `{object with ${Object.keys(v).length} keys}`;
  return String(v);
}

/**
 * One session's logger: every line escaped and cut (what the agent sent
 * cannot forge a line or flood the gateway's logs), and at most
 * `maxBytesPerSecond` of them per second; past it lines are dropped and
 * counted, and one warning per second that dropped any says how many.
 */
export class SessionLog implements ControllerLogger {
  /** lines dropped over the rate, since the session started */
  dropped = 0;
  private windowStart = 0;
  private used = 0;
  private droppedInWindow = 0;
  private reportTimer: NodeJS.Timeout | undefined;
  debug?: ControllerLogger["debug"];
  info?: ControllerLogger["info"];
  warn?: ControllerLogger["warn"];
  error?: ControllerLogger["error"];

  constructor(
    private readonly base: ControllerLogger,
    private readonly maxBytesPerSecond: number,
    private readonly label: () => string,
  ) {
    for (const level of LEVELS) {
      if (base[level] !== undefined) this[level] = (message, fields) => this.emit(level, message, fields);
    }
  }

  private emit(level: (typeof LEVELS)[number], message: string, fields: Record<string, unknown> | undefined): void {
    const text = escapeForLog(message, MAX_LOG_MESSAGE_CHARS);
    const f = escapeFields(fields);
    let cost = text.length;
    for (const [k, v] of Object.entries(f ?? {})) cost += k.length + (typeof v === "string" ? v.length : 8);
    const now = Date.now();
    if (now - this.windowStart >= 1000) {
      this.report();
      this.windowStart = now;
      this.used = 0;
    }
    if (this.used + cost > this.maxBytesPerSecond) {
      this.dropped++;
      if (this.droppedInWindow++ === 0) {
        this.reportTimer = setTimeout(() => this.report(), 1000 - (now - this.windowStart));
        this.reportTimer.unref();
      }
      return;
    }
    this.used += cost;
    this.base[level]?.(text, f);
  }

  /** The drops of the window that ended, once. */
  private report(): void {
    clearTimeout(this.reportTimer);
    this.reportTimer = undefined;
    const n = this.droppedInWindow;
    if (n === 0) return;
    this.droppedInWindow = 0;
    this.base.warn?.(
      `${n} log line(s) of session ${escapeForLog(JSON.stringify(this.label()), MAX_LOG_FIELD_CHARS)} dropped: over ${this.maxBytesPerSecond} log bytes per second (intakeLimits.maxLogBytesPerSecond); ${this.dropped} in all`,
      { dropped: n },
    );
  }
}
