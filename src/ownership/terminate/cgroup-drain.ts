/**
 * Draining a lease's own cgroup in the lifecycle (docs/containment.md).
 * When the lease records one, it holds every process the lease ever
 * started, whatever they did to their environment, parent or session; so
 * once the kill of the verified tree (or remnants) is done, the cgroup is
 * emptied as a unit: SIGTERM to what is left, the grace, then one write to
 * cgroup.kill. "Nothing left" is then the kernel's `populated 0`, not a
 * search, and the directory is removed. The cgroup is opened first
 * (containment's openLeaseCgroup: its path and identity checked once): a
 * directory re-created under the same name is not ours and is never touched.
 * What the drain found is an input of the settlement table (settle.ts).
 */
import {
  isPopulated,
  killCgroup,
  listLeaseCgroups,
  membersOf,
  openLeaseCgroup,
  removeCgroup,
  removeEmptyInstanceFolder,
  signalMembers,
  waitUntilEmpty,
  type LeaseCgroup,
} from "../../containment/index.js";
import { isAlive } from "../../facts/liveness.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { evidence } from "../verify/evidence.js";
import type { EvidenceCode, OwnershipEvidence, ProcessLease } from "../leases/types.js";

export interface CgroupDrain {
  /**
   * empty: populated 0 and removed (or already gone); left: populated 0 but
   * the host refused the removal for now (no descriptor, a busy rmdir), so
   * the lease stays closing and the next reconcile drains and removes it
   * again (a settled lease has nobody left to remove its folder); survivors:
   * still populated; unknown: could not tell or not ours
   */
  state: "empty" | "left" | "survivors" | "unknown";
  /** processes found in it before the drain */
  members: number;
  evidence: OwnershipEvidence;
}

/** What a dry run would find: the pids in the lease's cgroup (null when there is none, or it is not ours). */
export async function cgroupMembers(lease: Contained): Promise<number[] | null> {
  if (!lease.cgroup) return null;
  const o = await openLeaseCgroup(lease.cgroup);
  if (o.state !== "open") return null;
  const m = await membersOf(o.cgroup);
  return m.state === "ok" ? m.pids : null;
}

/** What holds a cgroup: a lease, or a cgroup of its own without a lease. */
export type Contained = Pick<ProcessLease, "cgroup">;

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
        evidence: ev("match", "cgroup-gone", "already removed (nothing can have been left in it)"),
      };
    case "mismatch":
      return {
        state: "unknown",
        members: 0,
        evidence: ev("unknown", "cgroup-replaced", "another cgroup now has this name; not touched"),
      };
    case "refused":
      return {
        state: "unknown",
        members: 0,
        evidence: ev("unknown", "not-a-lease-cgroup", `not a lease cgroup (${o.why}); not touched`),
      };
    case "unknown":
      return {
        state: "unknown",
        members: 0,
        evidence: ev("unknown", "identity-unreadable", "its identity cannot be read; not touched"),
      };
  }
}

export async function drainLeaseCgroup(
  lease: Contained,
  opts: { graceMs: number; signaller: ProcessSignaller; facts: ProcessFacts },
): Promise<CgroupDrain | null> {
  const opened = await openForDrain(lease);
  if (opened === null || "state" in opened) return opened;
  const { cg, ev } = opened;

  const before = await membersOf(cg);
  // what the drain ends: members alive by the one liveness rule (an unreaped zombie is listed until its parent waits, and was ended by nobody here)
  const members = before.state === "ok" ? await countAlive(opts.facts, before.pids) : 0;
  if ((await isPopulated(cg)) === "populated") {
    await signalMembers(cg, "SIGTERM", { signaller: opts.signaller });
    if ((await waitUntilEmpty(cg, opts.graceMs)) !== "empty") {
      const k = await killCgroup(cg, { signaller: opts.signaller });
      if (k.outcome !== "empty" && k.outcome !== "gone") {
        return {
          state: "survivors",
          members,
          evidence: ev(
            "unknown",
            "kill-left-survivors",
            `still populated after cgroup.kill (${k.outcome}); retried later`,
          ),
        };
      }
    }
  }
  const populated = await isPopulated(cg);
  if (populated !== "empty" && populated !== "gone")
    return {
      state: populated === "populated" ? "survivors" : "unknown",
      members,
      evidence: ev("unknown", "populated-unknown", `populated: ${populated}`),
    };
  return removeEmpty(cg, members, ev, `populated 0${members > 0 ? ` after ending ${members} process(es) in it` : ""}`);
}

/** An emptied lease cgroup removed, with its instance folder once that is empty too. */
async function removeEmpty(cg: LeaseCgroup, members: number, ev: Evidence, found: string): Promise<CgroupDrain> {
  const rm = await removeCgroup(cg);
  if (rm.outcome === "removed" || rm.outcome === "gone") {
    // the instance's folder goes with its last cgroup (another one of it may be made in it right now: then it stays)
    await removeEmptyInstanceFolder(cg.path);
    return {
      state: "empty",
      members,
      evidence: ev("match", "emptied-and-removed", `${found}, removed: nothing of the lease is left`),
    };
  }
  if (rm.outcome === "refused")
    return { state: "unknown", members, evidence: ev("unknown", "not-removed", `${found}, not removed: ${rm.why}`) };
  const why = rm.outcome === "busy" ? rm.detail : rm.why;
  return {
    state: "left",
    members,
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
      evidence: ev(
        "match",
        "still-populated",
        `still populated${pids.length > 0 ? ` (${pids.join(" ")})` : ""}: left running, for the next reconcile to kill`,
      ),
    };
  }
  if (populated !== "empty" && populated !== "gone")
    return { state: "unknown", members: 0, evidence: ev("unknown", "populated-unknown", `populated: ${populated}`) };
  return removeEmpty(cg, 0, ev, "populated 0");
}

/** How many of `pids` are alive (liveness.ts); one that cannot be read counts as alive (a drain never understates what it ended). */
async function countAlive(facts: ProcessFacts, pids: readonly number[]): Promise<number> {
  let n = 0;
  for (const pid of pids) {
    const d = await facts.inspect(pid).catch(() => undefined);
    if (d === undefined || (d !== null && isAlive(d))) n++;
  }
  return n;
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
