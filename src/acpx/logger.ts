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
