/**
 * The wrapper contract, shared by the wrapper (which writes reports) and the
 * lifecycle controller (which spawns the wrapper and reads them). Kept free
 * of I/O so both sides import the same constants and the same parser.
 *
 * Invocation:
 *   node <wrapperPath> [--grace-ms N] -- <adapter argv...>
 * stdio: [pipe, pipe, pipe, pipe]
 *   fd 0/1/2  the adapter's stdin/stdout/stderr. The wrapper hands its own
 *             fds to the adapter ("inherit"): it never copies a byte.
 *   fd 3      the lifeline, a socket pair end. The wrapper writes one JSON
 *             report per line to it and reads it only to see EOF, which means
 *             "the gateway is gone". The adapter never inherits it.
 * env: OPENCLAW_ACPX_LEASE_ID and OPENCLAW_GATEWAY_INSTANCE_ID (the adapter
 *      inherits both; the wrapper finds escaped descendants during cleanup
 *      by BOTH, through ownership's markerVerdict; without either in its own
 *      environment it finds none by marker).
 *
 * Reports, in the order they can appear:
 *   started      right after the adapter was spawned (pgid == adapterPid:
 *                the adapter leads its own session and process group);
 *                with a lease cgroup, cgroupNamespace says whether the
 *                adapter got its own cgroup namespace rooted there
 *   spawn-error  the adapter could not be started; the wrapper exits 127
 *                (ENOENT), 126 (any other spawn errno) or 2 (bad arguments)
 *   exit         the adapter exited (code or signal, exactly one non-null)
 *   cleanup      the wrapper's own tree cleanup finished: reason
 *                "parent-gone" (lifeline EOF or the parent-death signal) or
 *                "signal" (a forwarded termination signal, swept after the
 *                adapter exited) or "adapter-exit" (the adapter ended on its
 *                own: whatever it left behind is swept, since the tree is the
 *                wrapper's and the session is over); ended = pids of the wrapper's tree (the
 *                adapter included) that a group or per-pid signal of this
 *                shutdown reached and that are gone now
 *
 * Exit status: the adapter's exit code; when the adapter was killed by a
 * signal, 128 + the signal number (tini's convention: a re-raise could be
 * swallowed by Node's own handlers, and the exact signal is in the "exit"
 * report anyway).
 */

// The marker keys and the default grace are ownership's (one definition each);
// re-exported here so both sides of the wrapper contract read them from one place.
export { DEFAULT_GRACE_MS, INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../../ownership/leases/types.js";

export const LIFELINE_FD = 3;
/**
 * The lease's cgroup v2 directory, when the controller made one
 * (docs/containment.md): the wrapper enters it before the adapter exists, and drops
 * the variable so the adapter does not inherit it.
 */
export const CGROUP_ENV_KEY = "PROCLEASE_CGROUP";
/**
 * Set (to "1") when the session asked for limits: they hold only inside the
 * lease cgroup, so a wrapper that cannot enter it must not start the adapter
 * at all. It reports a spawn error with CGROUP_MOVE_FAILED instead.
 */
export const CGROUP_REQUIRED_ENV_KEY = "PROCLEASE_CGROUP_REQUIRED";
export const CGROUP_MOVE_FAILED = "ECGROUPMOVE";
/**
 * Where the wrapper writes its end record when it ends its tree with nobody
 * asking (src/ownership/leases/end-records.ts): `<stateDir>/acpx/ends`. The
 * wrapper drops the variable, so the adapter does not inherit it. A gateway
 * that ends a session writes "end" on the lifeline before it closes it.
 */
export const END_DIR_ENV_KEY = "PROCLEASE_END_DIR";
/** Upper bound for --grace-ms: a typo must not keep a stubborn tree alive for days. */
export const MAX_GRACE_MS = 600_000;
/**
 * The signal PR_SET_PDEATHSIG delivers on Linux. Not SIGTERM, so a parent
 * death can never be mistaken for a forwarded SIGTERM (which only forwards).
 */
export const PARENT_DEATH_SIGNAL = "SIGUSR2" as const;
/** Termination signals the wrapper forwards to the adapter's process group. */
export const FORWARDED_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;
export type ForwardedSignal = (typeof FORWARDED_SIGNALS)[number];

/** Exit statuses of the wrapper when the adapter never ran. */
export const EXIT_USAGE = 2;
export const EXIT_NOT_FOUND = 127;
export const EXIT_CANNOT_EXECUTE = 126;

export interface StartedReport {
  type: "started";
  wrapperPid: number;
  adapterPid: number;
  pgid: number;
  /**
   * The adapter's cgroup namespace, set only when the wrapper was given a
   * lease cgroup (docs/containment.md): "entered" (its root is the lease
   * cgroup: on a cgroup2 mounted with nsdelegate nothing of the adapter's
   * tree can move a process across it), "not-in-cgroup" (the adapter runs
   * outside the lease cgroup, so none was made), "no-addon" (the Node
   * wrapper without the addon cannot make one), or the errno name of the
   * refused unshare ("EPERM": a gateway that is not root).
   */
  cgroupNamespace?: string;
  /**
   * Durable mode only (the native wrapper, docs/wrapper.md "Durable
   * sessions"): "listening" (it relays the adapter's pipes and waits for a
   * re-adoption when the gateway goes), or "unavailable" with `durableWhy`
   * (its socket could not listen: it runs as a plain wrapper).
   */
  durable?: "listening" | "unavailable";
  durableWhy?: string;
}

export interface SpawnErrorReport {
  type: "spawn-error";
  /** errno name from the failed spawn ("ENOENT", "EACCES", …) or "EUSAGE" for bad wrapper arguments */
  code: string;
  message: string;
}

export interface ExitReport {
  type: "exit";
  code: number | null;
  signal: string | null;
}

export type CleanupReason = "parent-gone" | "signal" | "adapter-exit";

export interface CleanupReport {
  type: "cleanup";
  reason: CleanupReason;
  /** pids of the wrapper's tree (adapter included) reached by this shutdown's signals and gone now; ascending */
  ended: number[];
  durationMs: number;
}

export type WrapperReport = StartedReport | SpawnErrorReport | ExitReport | CleanupReport;

export function formatReport(report: WrapperReport): string {
  return `${JSON.stringify(report)}\n`;
}

/**
 * Parses one lifeline line. Returns null for anything that is not a
 * well-formed report (the controller treats the lifeline as untrusted input:
 * a malformed line is ignored, never guessed at).
 */
export function parseReportLine(line: string): WrapperReport | null {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null) return null;
  const r = v as Record<string, unknown>;
  switch (r.type) {
    case "started":
      return isPid(r.wrapperPid) && isPid(r.adapterPid) && isPid(r.pgid)
        ? {
            type: "started",
            wrapperPid: r.wrapperPid,
            adapterPid: r.adapterPid,
            pgid: r.pgid,
            ...(typeof r.cgroupNamespace === "string" && NS_STATE_RE.test(r.cgroupNamespace)
              ? { cgroupNamespace: r.cgroupNamespace }
              : {}),
            ...(r.durable === "listening" || r.durable === "unavailable" ? { durable: r.durable } : {}),
            ...(typeof r.durableWhy === "string" ? { durableWhy: r.durableWhy.slice(0, 256) } : {}),
          }
        : null;
    case "spawn-error":
      return typeof r.code === "string" && typeof r.message === "string"
        ? { type: "spawn-error", code: r.code, message: r.message }
        : null;
    case "exit": {
      const codeOk = r.code === null || (typeof r.code === "number" && Number.isInteger(r.code));
      const signalOk = r.signal === null || typeof r.signal === "string";
      return codeOk && signalOk
        ? { type: "exit", code: r.code as number | null, signal: r.signal as string | null }
        : null;
    }
    case "cleanup":
      return (r.reason === "parent-gone" || r.reason === "signal" || r.reason === "adapter-exit") &&
        Array.isArray(r.ended) &&
        r.ended.every(isPid) &&
        typeof r.durationMs === "number" &&
        Number.isFinite(r.durationMs)
        ? { type: "cleanup", reason: r.reason, ended: [...(r.ended as number[])], durationMs: r.durationMs }
        : null;
    default:
      return null;
  }
}

/**
 * Incremental line splitter for the lifeline's read side: feed it chunks as
 * they arrive, it calls `onReport` once per well-formed line (partial lines
 * are kept until their newline). `end()` flushes a final unterminated line.
 */
export function createReportReader(onReport: (r: WrapperReport) => void): {
  push(chunk: Buffer | string): void;
  end(): void;
} {
  let pending = "";
  const emit = (line: string): void => {
    const t = line.trim();
    if (t === "") return;
    const r = parseReportLine(t);
    if (r) onReport(r);
  };
  return {
    push(chunk) {
      pending += typeof chunk === "string" ? chunk : chunk.toString("utf8");
      let nl = pending.indexOf("\n");
      while (nl !== -1) {
        emit(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
        nl = pending.indexOf("\n");
      }
    },
    end() {
      emit(pending);
      pending = "";
    },
  };
}

/**
 * Arguments for `spawn(process.execPath, wrapperArgs(...))`. Validates what
 * the wrapper would refuse anyway, so the controller fails before spawning.
 */
export function wrapperArgs(
  wrapperPath: string,
  command: readonly string[],
  opts?: { graceMs?: number; extra?: readonly string[] },
): string[] {
  if (typeof wrapperPath !== "string" || wrapperPath === "") {
    throw new TypeError("wrapperPath must be a non-empty string");
  }
  if (!Array.isArray(command) || command.length === 0 || command.some((a) => typeof a !== "string")) {
    throw new TypeError("command must be a non-empty array of strings");
  }
  if (command[0] === "") throw new TypeError("command[0] must be a non-empty string");
  const args = [wrapperPath];
  if (opts?.graceMs !== undefined) {
    assertGraceMs(opts.graceMs);
    args.push("--grace-ms", String(opts.graceMs));
  }
  // the native wrapper's durable options (durable/protocol.ts), which the Node wrapper refuses
  if (opts?.extra !== undefined) args.push(...opts.extra);
  args.push("--", ...command);
  return args;
}

export function assertGraceMs(value: unknown, name = "graceMs"): asserts value is number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new TypeError(`${name} must be an integer number of milliseconds, got ${String(value)}`);
  }
  if (value < 0 || value > MAX_GRACE_MS) {
    throw new RangeError(`${name} must be between 0 and ${MAX_GRACE_MS}, got ${value}`);
  }
}

/** StartedReport.cgroupNamespace as the wrappers write it: a short token, never free text. */
const NS_STATE_RE = /^[a-zA-Z][a-zA-Z0-9-]{0,31}$/;

function isPid(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v > 0;
}
