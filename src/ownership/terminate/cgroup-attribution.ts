/**
 * The one rule for "is this member of a lease's cgroup the lease's own?",
 * asked by the drain (cgroup-drain.ts) before it signals anything in the
 * cgroup, and by a dry run to say what it would kill.
 *
 * Every process of a contained lease is born in its cgroup, so membership is
 * the proof of ownership, as it always was. What a cgroup holds can also
 * have been MOVED in: a root agent on a host where its cgroup namespace does
 * not hold (docs/containment.md) can write any pid into its own lease's
 * cgroup.procs: another session's wrapper, the gateway itself, anybody's
 * process. So a member is the lease's unless positive evidence, which the
 * agent cannot forge, says it was not born there:
 *
 * | # | evidence (in this order)                                          | the member is | goes to |
 * |---|-------------------------------------------------------------------|---------------|---------|
 * | 1 | this process, its parent or an ancestor, pid <= 1 (the guards)     | this-process / gateway-side | the gateway's cgroup |
 * | 2 | its parent links reach the lease's root (pid AND start time)       | the lease's   | killed |
 * | 3 | they reach the verified root of another live lease of this instance (a child of this process whose pid and start time are that lease's root's) | another-lease | that lease's cgroup |
 * | 4 | in this process's process group (after rows 2-3: a lease's root, spawned by the gateway, may share it) | gateway-side | the gateway's cgroup |
 * | 5 | they reach this process through a child that is no lease's root (the keeper, a probe) | gateway-side | the gateway's cgroup |
 * | 6 | they pass a live process outside the cgroup before init (or a subreaper above this process) adopted the chain | born-outside | _foreign |
 * | 7 | (an orphan line) its markers name another live lease of this instance, whose cgroup it may have been born in (started no earlier than that root) | another-lease-markers | that lease's cgroup |
 * | 8 | (an orphan line) it started before the lease                     | started-before-lease | _foreign |
 * | 9 | anything else (an orphan line started after the lease: a setsid escapee whose wrapper died) | the lease's | killed |
 *
 * Why each cannot be forged: a process cannot choose its parent (only its
 * parent's death re-parents it, to init or a subreaper above it) nor its
 * start time; a lease root is matched by pid AND start time. Markers (row 7)
 * CAN be forged, so they never spare a process: they only choose where a
 * process goes that ends with another lease's cgroup anyway, so a forger
 * gains nothing. Markers of another gateway instance decide nothing here
 * (their lease cannot be checked from this store).
 *
 * What the table cannot see, without the namespace: a process of somebody
 * else started after the lease, whose line goes straight to init, moved in by
 * a root agent (row 9 takes it for the lease's). With the cgroup namespace
 * on a host mounted `nsdelegate`, no agent can move anything across its
 * lease's boundary, so nothing foreign gets in but through the host's root.
 *
 * Without a lease (a supervisor's run without one) rows 3, 4, 7 and 8 have
 * nothing to compare with, and row 5 is left out: the run's root is this
 * process's child.
 */
import { checkSignalTarget, ownProcessGroupId } from "../../facts/guards.js";
import { sameProcess } from "../../facts/identity.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY, type ProcessLease } from "../leases/types.js";

/** What the rule knows of the lease whose cgroup is drained. */
export type AttributionOwner = Pick<ProcessLease, "leaseId" | "gatewayInstanceId" | "rootPid" | "startedAt"> &
  Partial<Pick<ProcessLease, "rootStartTime">>;

/** Why a member is not the lease's (the table's rows 1, 3-8). */
export type MemberRefusal =
  "this-process" | "gateway-side" | "another-lease" | "another-lease-markers" | "born-outside" | "started-before-lease";

/** Where a refused member is moved: the gateway's cgroup, another lease's, or the `_foreign` leaf. */
export type MemberDestination =
  { kind: "home" } | { kind: "lease"; leaseId: string; cgroup: { path: string; id: string } } | { kind: "foreign" };

export type Attribution =
  | { pid: number; startTime: string; own: true }
  | {
      pid: number;
      startTime: string;
      own: false;
      code: MemberRefusal;
      /** for people: what the evidence was */
      detail: string;
      to: MemberDestination;
    };

/** A process as the rule reads it: /proc/PID/stat's links and start time; null when it is gone. */
export interface LinkFacts {
  ppid: number;
  pgid: number;
  startTime: string;
}

/** What the rule reads, injected (the drain passes /proc and the lease store). */
export interface AttributionReaders {
  stat(pid: number): LinkFacts | null;
  /** the two marker values of `pid` (it still has `startTime`); null: unreadable or gone */
  markers(pid: number, startTime: string): Promise<Record<string, string | null> | null>;
  /** this instance's lease by id; null when there is none */
  lease(leaseId: string): Promise<ProcessLease | null>;
  /** did a process with this start time start before the lease? null: cannot be compared */
  startedBeforeLease(startTime: string): boolean | null;
}

export interface AttributionInput {
  owner: AttributionOwner | null;
  /** every pid in the cgroup's subtree now */
  members: ReadonlySet<number>;
  readers: AttributionReaders;
  /** this process's ancestors (the guards' cache) */
  ancestors: ReadonlySet<number>;
}

/** Longest parent chain followed: beyond it the line counts as adopted (row 9's orphan line). */
const MAX_CHAIN = 256;

type Lineage =
  | { kind: "root" }
  | { kind: "lease"; lease: ProcessLease; via: number }
  | { kind: "gateway"; via: number }
  | { kind: "orphan"; outside: number | null };

/** The table above, for one member (its pid and start time as listed). */
export async function attributeMember(
  m: { pid: number; startTime: string },
  input: AttributionInput,
): Promise<Attribution> {
  const refuse = (code: MemberRefusal, detail: string, to: MemberDestination): Attribution => ({
    ...m,
    own: false,
    code,
    detail,
    to,
  });
  const guard = checkSignalTarget(m.pid);
  if (!guard.allowed)
    return refuse(m.pid === process.pid ? "this-process" : "gateway-side", guard.reason, { kind: "home" });
  const line = await lineageOf(m, input);
  if (line.kind === "root") return { ...m, own: true };
  if (line.kind === "lease")
    return refuse(
      "another-lease",
      `descends from ${line.via}, the root of lease ${line.lease.leaseId}`,
      line.lease.cgroup
        ? { kind: "lease", leaseId: line.lease.leaseId, cgroup: line.lease.cgroup }
        : { kind: "foreign" },
    );
  // after the lease roots: a wrapper the gateway spawned stays in the gateway's process group
  const group = ownProcessGroupId();
  if (group !== null && input.readers.stat(m.pid)?.pgid === group)
    return refuse("gateway-side", `in the gateway's process group ${group}`, { kind: "home" });
  switch (line.kind) {
    case "gateway":
      return refuse("gateway-side", `descends from the gateway through ${line.via}, which is no lease's root`, {
        kind: "home",
      });
    case "orphan":
      return orphanLine(m, line.outside, input, refuse);
  }
}

/** Rows 6-9: a line that reached neither the lease's root, another lease's, nor the gateway. */
async function orphanLine(
  m: { pid: number; startTime: string },
  outside: number | null,
  input: AttributionInput,
  refuse: (code: MemberRefusal, detail: string, to: MemberDestination) => Attribution,
): Promise<Attribution> {
  if (outside !== null)
    return refuse("born-outside", `its parent line passes ${outside}, a live process outside the cgroup`, {
      kind: "foreign",
    });
  if (input.owner === null) return { ...m, own: true };
  const other = await markedLease(m, input);
  if (other !== null)
    return refuse(
      "another-lease-markers",
      `an orphan carrying the markers of lease ${other.leaseId}, started after its root`,
      other.cgroup ? { kind: "lease", leaseId: other.leaseId, cgroup: other.cgroup } : { kind: "foreign" },
    );
  if (input.readers.startedBeforeLease(m.startTime) === true)
    return refuse("started-before-lease", `started before lease ${input.owner.leaseId}`, { kind: "foreign" });
  return { ...m, own: true };
}

/** Row 7: the live lease of this instance an orphan's markers name, when it may have been born in its cgroup. */
async function markedLease(
  m: { pid: number; startTime: string },
  input: AttributionInput,
): Promise<ProcessLease | null> {
  const owner = input.owner!;
  const env = await input.readers.markers(m.pid, m.startTime);
  const id = env?.[LEASE_ENV_KEY];
  if (env === null || typeof id !== "string" || id === owner.leaseId) return null;
  if (env[INSTANCE_ENV_KEY] !== owner.gatewayInstanceId) return null;
  const other = await input.readers.lease(id).catch(() => null);
  if (other === null || other.gatewayInstanceId !== owner.gatewayInstanceId || !other.cgroup) return null;
  if (other.state !== "open" && other.state !== "closing") return null;
  const root = Number(other.rootStartTime);
  return Number.isFinite(root) && Number(m.startTime) >= root ? other : null;
}

/** Follows the parent links from `m` (rows 2, 3, 5, 6). */
async function lineageOf(m: { pid: number; startTime: string }, input: AttributionInput): Promise<Lineage> {
  const { owner, readers, members, ancestors } = input;
  let pid = m.pid;
  let start = m.startTime;
  let outside: number | null = null;
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    const here = { pid, startTime: start };
    if (owner !== null && sameProcess(here, { pid: owner.rootPid, startTime: owner.rootStartTime }))
      return { kind: "root" };
    if (pid <= 1 || ancestors.has(pid)) return { kind: "orphan", outside };
    const st = readers.stat(pid);
    // gone mid-walk: the line was cut there, as for an orphan
    if (st === null || !sameProcess({ pid, startTime: st.startTime }, here)) return { kind: "orphan", outside };
    if (pid !== m.pid && !members.has(pid)) outside ??= pid;
    if (st.ppid === process.pid) {
      const other = await leaseRooted(pid, start, input);
      if (other !== null) return { kind: "lease", lease: other, via: pid };
      return owner === null ? { kind: "orphan", outside } : { kind: "gateway", via: pid };
    }
    const parent = st.ppid > 0 ? readers.stat(st.ppid) : null;
    // a parent started after its child is a pid reused since: the line was cut
    if (parent === null || Number(parent.startTime) > Number(start)) return { kind: "orphan", outside };
    pid = st.ppid;
    start = parent.startTime;
  }
  return { kind: "orphan", outside };
}

/** The live lease of this instance whose root is this child of the gateway (pid and start time), found through its markers. */
async function leaseRooted(pid: number, startTime: string, input: AttributionInput): Promise<ProcessLease | null> {
  const env = await input.readers.markers(pid, startTime);
  const id = env?.[LEASE_ENV_KEY];
  if (typeof id !== "string" || (input.owner !== null && id === input.owner.leaseId)) return null;
  const l = await input.readers.lease(id).catch(() => null);
  if (l === null || (l.state !== "open" && l.state !== "closing")) return null;
  if (input.owner !== null && l.gatewayInstanceId !== input.owner.gatewayInstanceId) return null;
  return sameProcess({ pid, startTime }, { pid: l.rootPid, startTime: l.rootStartTime }) ? l : null;
}
