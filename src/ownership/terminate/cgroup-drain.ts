/**
 * Draining a lease's own cgroup in the lifecycle (docs/containment.md).
 * When the lease records one, it holds every process the lease ever
 * started, whatever they did to their environment, parent or session; so
 * once the kill of the verified tree (or remnants) is done, what the cgroup
 * still holds is ended: each member the attribution rule says is the
 * lease's own (cgroup-attribution.ts) gets SIGTERM, the grace, then SIGKILL,
 * judged on a frozen cgroup and signalled by pid and start time
 * (cgroup-judge.ts says why nothing foreign can be killed); every other
 * member (another session's process, the gateway, anything older than the
 * lease) is moved out instead. "Nothing left" is then the kernel's
 * `populated 0`, not a search, and the directory is removed. The cgroup is
 * opened first (containment's openLeaseCgroup: its path and identity checked
 * once): a directory re-created under the same name is not ours and is
 * never touched. What the drain found is an input of the settlement table
 * (settle.ts).
 */
import {
  isPopulated,
  listLeaseCgroups,
  listMembers,
  membersOf,
  openLeaseCgroup,
  readOwnMount,
  removeCgroup,
  removeEmptyInstanceFolder,
  removeForeignLeaf,
  type LeaseCgroup,
} from "../../containment/index.js";
import { ancestorsOfThisProcess } from "../../facts/guards.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { evidence } from "../verify/evidence.js";
import { readStartClock } from "../verify/start-clock.js";
import type { EvidenceCode, OwnershipEvidence, ProcessLease } from "../leases/types.js";
import { attributeMember, type AttributionOwner } from "./cgroup-attribution.js";
import {
  drainContext,
  endOwnMembers,
  judgeRound,
  leftInside,
  stillAlive,
  type DrainContext,
  type RefusedMember,
} from "./cgroup-judge.js";

export type { RefusedMember };

export interface CgroupDrain {
  /**
   * empty: populated 0 and removed (or already gone); left: populated 0 but
   * the host refused the removal for now (no descriptor, a busy rmdir), so
   * the lease stays closing and the next reconcile drains and removes it
   * again (a settled lease has nobody left to remove its folder);
   * foreign-left: nothing of the lease's own is left, but members that are
   * not its own (cgroup-attribution.ts) could not be moved out, so the
   * cgroup stays, with them, for an operator; survivors: members of its own
   * still alive; unknown: could not tell or not ours
   */
  state: "empty" | "left" | "foreign-left" | "survivors" | "unknown";
  /** the lease's own processes found alive in it and ended by the drain */
  members: number;
  evidence: OwnershipEvidence;
  /** members found in it that were not the lease's: never signalled; moved out, or left in place */
  refused: readonly RefusedMember[];
}

/**
 * What a dry run would end: the pids in the lease's cgroup that are its own
 * by the attribution rule (null when there is none, or it is not ours).
 * Nothing is frozen, moved or signalled.
 */
export async function cgroupMembers(lease: Contained, deps: DrainDeps): Promise<number[] | null> {
  if (!lease.cgroup) return null;
  const o = await openLeaseCgroup(lease.cgroup);
  if (o.state !== "open") return null;
  const listed = await listMembers(o.cgroup);
  if (listed.state !== "ok") return null;
  const ctx = await contextFor(o.cgroup, lease, deps);
  const input = {
    owner: ctx.owner,
    members: new Set(listed.members.map((m) => m.pid)),
    readers: ctx.readers,
    ancestors: ancestorsOfThisProcess(),
  };
  const own: number[] = [];
  for (const m of listed.members) if ((await attributeMember(m, input)).own) own.push(m.pid);
  return own;
}

/** What the drain reads besides the cgroup: the facts (markers), this instance's leases (where another lease's member goes back to). */
export interface DrainDeps {
  facts: ProcessFacts;
  /** this instance's lease by id; without it no member is recognised as another lease's */
  leaseOf?: (leaseId: string) => Promise<ProcessLease | null>;
}

/** A lease's identity as the attribution rule reads it; null without a lease (a supervisor run without one). */
function ownerOf(lease: Contained): AttributionOwner | null {
  if (
    typeof lease.leaseId !== "string" ||
    typeof lease.gatewayInstanceId !== "string" ||
    typeof lease.startedAt !== "number" ||
    typeof lease.rootPid !== "number"
  )
    return null;
  return {
    leaseId: lease.leaseId,
    gatewayInstanceId: lease.gatewayInstanceId,
    rootPid: lease.rootPid,
    startedAt: lease.startedAt,
    ...(lease.rootStartTime !== undefined ? { rootStartTime: lease.rootStartTime } : {}),
  };
}

async function contextFor(cg: LeaseCgroup, lease: Contained, deps: DrainDeps): Promise<DrainContext> {
  const clock = await readStartClock().catch(() => null);
  return drainContext(cg, await readOwnMount(), ownerOf(lease), { ...deps, clock });
}

/**
 * The drain's evidence rows: what it found in the cgroup, then, when it met
 * members that were not the lease's, which ones, why, and where each went
 * (or that it could not be moved and was left, never signalled).
 */
export function drainEvidence(d: Pick<CgroupDrain, "evidence" | "refused">): OwnershipEvidence[] {
  if (d.refused.length === 0) return [d.evidence];
  const each = d.refused.map(
    (r) =>
      `${r.pid} (${r.code}: ${r.detail}) ${r.movedTo !== null ? `moved to ${r.movedTo}` : `left in place: ${r.notMoved}`}`,
  );
  return [
    d.evidence,
    evidence(
      "cgroup",
      "mismatch",
      "members-refused",
      `${d.refused.length} member(s) of the cgroup are not the lease's and were not signalled: ${each.join("; ")}`,
    ),
  ];
}

/** What holds a cgroup: a lease (whose identity the attribution rule reads), or a cgroup of its own without a lease. */
export type Contained = Pick<ProcessLease, "cgroup"> &
  Partial<Pick<ProcessLease, "leaseId" | "gatewayInstanceId" | "rootPid" | "rootStartTime" | "startedAt">>;

type Evidence = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) => OwnershipEvidence;

/**
 * The lease's cgroup opened (path and identity checked, with the evidence
 * maker for it), or the drain's answer when it cannot be touched: gone (a
 * populated cgroup cannot be removed, so nothing of the lease was left in
 * it), another cgroup under its name, not a lease cgroup, or an identity that
 * cannot be read. null: no cgroup.
 */
async function openForDrain(lease: Contained): Promise<CgroupDrain | { cg: LeaseCgroup; ev: Evidence } | null> {
  const ref = lease.cgroup;
  if (!ref) return null;
  const ev: Evidence = (result, code, detail) => evidence("cgroup", result, code, `${ref.path}: ${detail}`);
  const o = await openLeaseCgroup(ref);
  switch (o.state) {
    case "open":
      return { cg: o.cgroup, ev };
    case "gone":
      return {
        state: "empty",
        members: 0,
        refused: [],
        evidence: ev("match", "cgroup-gone", "already removed (nothing can have been left in it)"),
      };
    case "mismatch":
      return {
        state: "unknown",
        members: 0,
        refused: [],
        evidence: ev("unknown", "cgroup-replaced", "another cgroup now has this name; not touched"),
      };
    case "refused":
      return {
        state: "unknown",
        members: 0,
        refused: [],
        evidence: ev("unknown", "not-a-lease-cgroup", `not a lease cgroup (${o.why}); not touched`),
      };
    case "unknown":
      return {
        state: "unknown",
        members: 0,
        refused: [],
        evidence: ev("unknown", "identity-unreadable", "its identity cannot be read; not touched"),
      };
  }
}

/**
 * Ends the lease's own members of its cgroup (cgroup-judge.ts: judged by the
 * attribution rule on a frozen cgroup, signalled by pid and start time, in
 * the one kill order) and moves every other member out; then says what is
 * left: populated 0 (removed), only members that are not its own and could
 * not be moved (foreign-left), or members of its own still alive.
 */
export async function drainLeaseCgroup(
  lease: Contained,
  opts: DrainDeps & { graceMs: number; signaller: ProcessSignaller },
): Promise<CgroupDrain | null> {
  const opened = await openForDrain(lease);
  if (opened === null || "state" in opened) return opened;
  const { cg, ev } = opened;
  // the usual case after a tree kill: nothing left to judge
  const first = await isPopulated(cg);
  if (first === "empty" || first === "gone") return removeEmpty(cg, 0, [], ev, "populated 0");
  const ctx = await contextFor(cg, lease, opts);
  const done = await endOwnMembers(ctx, opts.graceMs, opts.signaller);
  const members = done.ended;
  const refused = [...ctx.refused.values()];
  await removeForeignLeaf(cg.path);
  if (done.unknown !== null)
    return { state: "unknown", members, refused, evidence: ev("unknown", "populated-unknown", done.unknown) };
  const populated = await isPopulated(cg);
  const ended = members > 0 ? ` after ending ${members} process(es) of its own in it` : "";
  if (populated === "empty" || populated === "gone")
    return removeEmpty(cg, members, refused, ev, `populated 0${ended}`);
  if (populated === "unknown")
    return { state: "unknown", members, refused, evidence: ev("unknown", "populated-unknown", "populated: unknown") };
  const again = await stillAlive((await judgeRound(ctx, false)).own);
  const left = await leftInside(ctx);
  if (again.length === 0 && left.length > 0)
    return {
      state: "foreign-left",
      members,
      refused: [...ctx.refused.values()],
      evidence: ev(
        "match",
        "foreign-left",
        `nothing of the lease's own is left${ended}; ${left.length} process(es) that are not its own could not be moved out (${left.map((r) => r.pid).join(" ")}) and were not signalled: the cgroup stays with them`,
      ),
    };
  return {
    state: "survivors",
    members,
    refused: [...ctx.refused.values()],
    evidence: ev(
      "unknown",
      "kill-left-survivors",
      `still populated after the kill${again.length > 0 ? ` (its own: ${again.map((m) => m.pid).join(" ")})` : ""}; retried later`,
    ),
  };
}

/** An emptied lease cgroup removed, with its instance folder once that is empty too. */
async function removeEmpty(
  cg: LeaseCgroup,
  members: number,
  refused: readonly RefusedMember[],
  ev: Evidence,
  found: string,
): Promise<CgroupDrain> {
  const rm = await removeCgroup(cg);
  if (rm.outcome === "removed" || rm.outcome === "gone") {
    // the instance's folder goes with its last cgroup (another one of it may be made in it right now: then it stays)
    await removeEmptyInstanceFolder(cg.path);
    return {
      state: "empty",
      members,
      refused,
      evidence: ev("match", "emptied-and-removed", `${found}, removed: nothing of the lease is left`),
    };
  }
  if (rm.outcome === "refused")
    return {
      state: "unknown",
      members,
      refused,
      evidence: ev("unknown", "not-removed", `${found}, not removed: ${rm.why}`),
    };
  const why = rm.outcome === "busy" ? rm.detail : rm.why;
  return {
    state: "left",
    members,
    refused,
    evidence: ev(
      "match",
      "folder-left",
      `${found}, but its folder could not be removed yet (${why}); the next reconcile removes it`,
    ),
  };
}

/**
 * The lease's cgroup looked at without a signal, for a lease settled on the
 * facts alone (a supervised run that ended on its own: what it left running
 * is reconcile's). populated 0: nothing of the lease is left and the
 * directory is removed ("empty"); still populated: "survivors", which keeps
 * the lease closing for the next reconcile, whatever the search found
 * (an env-scrubbed setsid grandchild carries no marker, but it is in there).
 */
export async function lookIntoLeaseCgroup(lease: Contained): Promise<CgroupDrain | null> {
  const opened = await openForDrain(lease);
  if (opened === null || "state" in opened) return opened;
  const { cg, ev } = opened;
  const populated = await isPopulated(cg);
  if (populated === "populated") {
    const m = await membersOf(cg);
    const pids = m.state === "ok" ? m.pids : [];
    // members 0: nothing was ended here (the count is in the evidence)
    return {
      state: "survivors",
      members: 0,
      refused: [],
      evidence: ev(
        "match",
        "still-populated",
        `still populated${pids.length > 0 ? ` (${pids.join(" ")})` : ""}: left running, for the next reconcile to kill`,
      ),
    };
  }
  if (populated !== "empty" && populated !== "gone")
    return {
      state: "unknown",
      members: 0,
      refused: [],
      evidence: ev("unknown", "populated-unknown", `populated: ${populated}`),
    };
  return removeEmpty(cg, 0, [], ev, "populated 0");
}

/**
 * The lease cgroups a settled lease left in its instance folder: a settled
 * lease (closed or lost) has nothing left to remove its folder, and a lease
 * whose cgroup could not be recorded (the host refused the write right after
 * the mkdir) never named it. A cgroup is removed only when a lease file of
 * that name says the lease is settled, it is empty, and, where the lease
 * recorded a cgroup, it has the identity recorded; anything else (a live
 * lease, no lease file, a populated or re-created cgroup) is left for an
 * operator to judge. Returns the paths removed.
 */
export async function removeSettledLeftovers(
  instanceFolder: string,
  lease: { isLive(leaseId: string): boolean; get(leaseId: string): Promise<ProcessLease | null> },
): Promise<string[]> {
  const listed = await listLeaseCgroups(instanceFolder);
  if (listed.state !== "ok") return [];
  const removed: string[] = [];
  for (const c of listed.cgroups) {
    if (c.populated !== "empty" || lease.isLive(c.name)) continue;
    const l = await lease.get(c.name).catch(() => null);
    if (l === null || (l.state !== "closed" && l.state !== "lost")) continue;
    if (l.cgroup !== undefined && (l.cgroup.path !== c.path || l.cgroup.id !== c.id)) continue;
    const drained = await lookIntoLeaseCgroup({ cgroup: { path: c.path, id: c.id } });
    if (drained?.state === "empty") removed.push(c.path);
  }
  return removed;
}
