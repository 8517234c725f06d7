/**
 * The containment layer's errors: its one errno → outcome map (faultOf) and
 * the one error it throws. Nothing else in src/containment compares errno
 * names: each caller reads the Fault and decides what it means there (a
 * missing file is "gone" for a read, "no cgroup" for a join, "already
 * removed" for an rmdir).
 */

/**
 * - missing: ENOENT, ENOTDIR, ENODEV (a removed cgroup's interface files read ENODEV)
 * - no-process: ESRCH
 * - denied: EACCES, EPERM
 * - busy: EBUSY, ENOTEMPTY (a populated cgroup's rmdir; a cgroup that hands out controllers taking a process)
 * - exists: EEXIST
 * - limit: EAGAIN (cgroup.max.descendants or cgroup.max.depth)
 * - read-only: EROFS
 * - unsupported: EOPNOTSUPP, EINVAL
 * - other: anything else (said with its errno name)
 */
export type Fault =
  "missing" | "no-process" | "denied" | "busy" | "exists" | "limit" | "read-only" | "unsupported" | "other";

const BY_ERRNO: Readonly<Record<string, Fault>> = Object.freeze({
  ENOENT: "missing",
  ENOTDIR: "missing",
  ENODEV: "missing",
  ESRCH: "no-process",
  EACCES: "denied",
  EPERM: "denied",
  EBUSY: "busy",
  ENOTEMPTY: "busy",
  EEXIST: "exists",
  EAGAIN: "limit",
  EROFS: "read-only",
  EOPNOTSUPP: "unsupported",
  EINVAL: "unsupported",
});

export interface FaultReading {
  fault: Fault;
  /** the errno name ("ENOENT"), or the error as text when it has none */
  code: string;
}

export function faultOf(e: unknown): FaultReading {
  const code = (e as NodeJS.ErrnoException | null)?.code ?? String(e);
  return { fault: BY_ERRNO[code] ?? "other", code };
}

/** A malformed argument (a pid, a cgroup id, a limit): a programming error, thrown, never an outcome. */
export class ContainmentArgumentError extends TypeError {
  override readonly name = "ContainmentArgumentError";
  constructor(
    readonly argument: "pid" | "cgroup id" | "limit",
    message: string,
  ) {
    super(message);
  }
}

export function assertPidArg(pid: number): void {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0)
    throw new ContainmentArgumentError("pid", `pid must be a positive integer, got ${String(pid)}`);
}
