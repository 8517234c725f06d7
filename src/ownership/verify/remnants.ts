/**
 * Remnants: what is left of a lease's tree when its root is gone (the wrapper
 * was SIGKILLed together with the gateway, so its parent-death cleanup never
 * ran). Verification alone would say "gone" and leave the adapter and its
 * children running forever. Only a "gone" verdict (root absent, or a zombie,
 * on the same boot) is searched: when the root pid names a live process with
 * another start time (pid reused) nothing is searched and nothing is
 * signalled, whatever that process carries (verify.ts).
 *
 * A remnant is accepted only on live evidence, all of it required (fail closed):
 * (a) markerVerdict (markers.ts) is "match": its environment is readable and
 *     carries this lease id AND this gateway instance id;
 * (b) the same boot id as the lease, when the lease recorded one, and this
 *     gateway still sees the pid namespace the lease was written in (recorded
 *     but unknown now → no remnants);
 * (c) it started no earlier than the lease: against the root's recorded start
 *     time (same clock, when the boot id matched) and/or against `startedAt`
 *     through startTimeToEpochMs; when neither can be computed the carrier is
 *     refused (its start cannot be compared with the lease);
 * (d) this process's uid;
 * (e) it passes checkSignalTarget and is not an ancestor of this process.
 * Only exact-identity backends that read environments can prove (a): the ps
 * and none backends never yield remnants.
 *
 * The env reads themselves happen in verify.ts's one shared pass; this module
 * judges what that pass read and builds the kill target. Pure: no I/O.
 */
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { collectTree } from "./collect.js";
import { checkSignalTarget } from "../../facts/guards.js";
import type { KillTarget, RemnantRefusal } from "./verify-state.js";
import { START_CLOCK_SLACK_MS, startTimeToEpochMs, type StartClock } from "./start-clock.js";
import { markerVerdict } from "./markers.js";
import { evidence } from "./evidence.js";
import type { ProcessLease, OwnershipEvidence } from "../leases/types.js";

/** What every judgement of a batch shares. */
export interface RemnantContext {
  facts: Pick<ProcessFacts, "backend" | "identityStrength">;
  myUid: number | null;
  hostBootId: string | undefined;
  hostPidNamespace: string | undefined;
  /** this process and its ancestors */
  ancestors: ReadonlySet<number>;
  clock: StartClock | null;
}

type StartHow = "ticks" | "epoch" | "both";

const REFUSAL_TEXT: Record<RemnantRefusal, string> = {
  markers: "lease id or gateway instance marker differs or is absent",
  "env-unreadable": "environment not readable",
  "inspect-failed": "could not be inspected",
  "boot-id": "boot id differs or is unknown",
  "pid-namespace": "seen from another pid namespace than the lease's, or unknown",
  uid: "another uid",
  guard: "refused by guard or an ancestor of this process",
  "started-early": "started before the lease",
  "start-unknown": "start time not comparable with the lease (no recorded root start on this boot, no boot clock)",
  "env-hidden":
    "hides its environment (non-dumpable: its /proc files belong to another uid), so no read can judge it while it lives; never signalled, left running",
};

/** Why a lease cannot have remnants at all in this context, or null when a search makes sense. */
export function remnantSearchBlocked(lease: ProcessLease, ctx: RemnantContext): string | null {
  if (ctx.facts.backend === "ps" || ctx.facts.backend === "none")
    return `environments not readable on the ${ctx.facts.backend} backend`;
  if (ctx.facts.identityStrength !== "exact") return "identity is not exact";
  if (ctx.myUid === null) return "this process's uid is unknown";
  if (lease.bootId !== undefined && ctx.hostBootId === undefined) return "the current boot id is unknown";
  if (lease.pidNamespace !== undefined && ctx.hostPidNamespace === undefined)
    return "the current pid namespace is unknown";
  if (lease.pidNamespace !== undefined && ctx.hostPidNamespace !== lease.pidNamespace)
    return "this gateway sees another pid namespace than at spawn";
  return null;
}

/**
 * Lowest raw start time a remnant of this lease can have, in the backend's
 * own unit, for pre-filtering the env pass; -Infinity when not comparable.
 * Only the root's recorded start time is on the same clock, and only on the
 * same boot.
 */
export function remnantStartBound(lease: ProcessLease, ctx: RemnantContext): number {
  const root = Number(lease.rootStartTime);
  if (
    lease.bootId === undefined ||
    lease.bootId !== ctx.hostBootId ||
    lease.rootStartTime === undefined ||
    !Number.isFinite(root)
  )
    return -Infinity;
  return root;
}

/**
 * Could `p` be a carrier of this lease, judged on what is known WITHOUT its
 * environment (our uid, the guards, not an ancestor, not started before the
 * lease on a comparable clock)? The env pass asks it for a process whose
 * environment could not be read or that could not be inspected: when the
 * answer is yes, that process is counted as a carrier the search could not
 * clear (the search is then "inconclusive", never "none-found").
 */
export function couldCarry(lease: ProcessLease, p: ProcessInfo, ctx: RemnantContext): boolean {
  if (ctx.myUid === null || p.uid !== ctx.myUid) return false;
  if (!checkSignalTarget(p.pid).allowed || ctx.ancestors.has(p.pid)) return false;
  const bound = remnantStartBound(lease, ctx);
  const ticks = Number(p.startTime);
  if (bound !== -Infinity && Number.isFinite(ticks) && ticks < bound) return false;
  const epoch = Number.isFinite(lease.startedAt)
    ? startTimeToEpochMs(String(p.startTime), ctx.facts.backend, ctx.clock)
    : null;
  return !(epoch !== null && epoch < lease.startedAt - START_CLOCK_SLACK_MS);
}

export type CarrierJudgement = { ok: true; start: StartHow } | { ok: false; why: RemnantRefusal };

/**
 * Judges one process whose environment carries this lease's id. `d` is what
 * the env pass read for `p` (same start time, checked by the caller).
 */
export function judgeCarrier(
  lease: ProcessLease,
  p: ProcessInfo,
  d: ProcessDetails,
  ctx: RemnantContext,
): CarrierJudgement {
  const markers = markerVerdict(d, lease);
  if (markers === "unknown") return { ok: false, why: "env-unreadable" };
  if (markers === "mismatch") return { ok: false, why: "markers" };
  if (
    lease.bootId !== undefined &&
    (d.bootId === undefined || d.bootId !== lease.bootId || ctx.hostBootId !== lease.bootId)
  )
    return { ok: false, why: "boot-id" };
  // the backends report the OBSERVER's pid namespace: this asks "does this gateway still see the lease's namespace?"
  if (
    lease.pidNamespace !== undefined &&
    (d.pidNamespace === undefined ||
      d.pidNamespace !== lease.pidNamespace ||
      ctx.hostPidNamespace !== lease.pidNamespace)
  ) {
    return { ok: false, why: "pid-namespace" };
  }
  if (ctx.myUid === null || p.uid !== ctx.myUid || d.uid !== ctx.myUid) return { ok: false, why: "uid" };
  if (!checkSignalTarget(p.pid).allowed || ctx.ancestors.has(p.pid)) return { ok: false, why: "guard" };

  const bound = remnantStartBound(lease, ctx);
  const ticks = Number(p.startTime);
  const tickChecked = bound !== -Infinity && Number.isFinite(ticks);
  if (tickChecked && ticks < bound) return { ok: false, why: "started-early" };
  const epoch = Number.isFinite(lease.startedAt)
    ? startTimeToEpochMs(String(p.startTime), ctx.facts.backend, ctx.clock)
    : null;
  if (epoch !== null && epoch < lease.startedAt - START_CLOCK_SLACK_MS) return { ok: false, why: "started-early" };
  if (tickChecked) return { ok: true, start: epoch !== null ? "both" : "ticks" };
  if (epoch !== null) return { ok: true, start: "epoch" };
  // markers alone never date a process: a carrier that cannot be compared with the lease is refused
  return { ok: false, why: "start-unknown" };
}

/**
 * Refusals that could not judge the process: it may carry this lease, so a
 * search that met one cannot say "nothing is left" (the lease stays
 * closing). Every other refusal is a proof that the process is not this
 * lease's: its readable environment names another instance (or none),
 * another uid, a start before the lease, or the guards refuse it for good;
 * or, "env-hidden", a process that made itself non-dumpable: no retry can
 * read its environment while it lives, so waiting for one would hold the
 * lease closing forever (an agent could hold every lease of its uid so).
 * It is never signalled, and the settlement names it (settle.ts).
 */
const UNCLEARED: ReadonlySet<RemnantRefusal> = new Set<RemnantRefusal>([
  "env-unreadable",
  "inspect-failed",
  "boot-id",
  "pid-namespace",
  "start-unknown",
]);

/** Accepted carriers and refusal counts for one lease, gathered during the env pass. */
export class RemnantTally {
  readonly accepted: { p: ProcessInfo; start: StartHow }[] = [];
  readonly refused = new Map<RemnantRefusal, number>();
  /** which processes were refused, for the evidence (an operator must be able to find the one that keeps a lease closing) */
  readonly refusedPids: { pid: number; name: string | undefined; state: string; why: RemnantRefusal }[] = [];
  /** how many refused processes could not be judged (they keep a search open) */
  uncleared(): number {
    let n = 0;
    for (const [why, count] of this.refused) if (UNCLEARED.has(why)) n += count;
    return n;
  }
  add(p: ProcessInfo, j: CarrierJudgement, name?: string): void {
    if (j.ok) this.accepted.push({ p, start: j.start });
    else {
      this.refused.set(j.why, (this.refused.get(j.why) ?? 0) + 1);
      this.refusedPids.push({ pid: p.pid, name, state: p.state, why: j.why });
    }
  }
}

const LISTED = 5;
function listOf(refused: RemnantTally["refusedPids"]): string {
  if (refused.length === 0) return "";
  const shown = refused
    .slice(0, LISTED)
    .map((r) => `${r.pid} (${r.name ? `${r.name}, ` : ""}state ${r.state}): ${REFUSAL_TEXT[r.why]}`);
  const more = refused.length > LISTED ? `, and ${refused.length - LISTED} more` : "";
  return ` [${shown.join("; ")}${more}]`;
}

/** "; not this lease's: …; could not be judged: …" for the refused processes, the ones that keep the search open named last. */
function refusedText(tally: RemnantTally): string {
  const open = tally.refusedPids.filter((r) => UNCLEARED.has(r.why));
  const hidden = tally.refusedPids.filter((r) => r.why === "env-hidden");
  const ruled = tally.refusedPids.filter((r) => !UNCLEARED.has(r.why) && r.why !== "env-hidden");
  let out = "";
  if (ruled.length > 0)
    out += `; ruled out (readable proof they are not this lease's): ${ruled.length}${listOf(ruled)}`;
  if (hidden.length > 0)
    out += `; left running, not judged (they hide their environment): ${hidden.length}${listOf(hidden)}`;
  if (open.length > 0) out += `; carriers refused, could not be judged: ${open.length}${listOf(open)}`;
  return out;
}

/**
 * The kill target: the oldest accepted carrier as root (last), the other
 * carriers and every descendant by parent links before it, leaves first.
 * Each member is the snapshot's own ProcessInfo (its own start time).
 */
export function buildRemnantTarget(snapshot: ProcessSnapshot, tally: RemnantTally): KillTarget | null {
  if (tally.accepted.length === 0) return null;
  const sorted = tally.accepted
    .map((a) => a.p)
    .sort((a, b) => Number(a.startTime) - Number(b.startTime) || a.pid - b.pid);
  const anchor = sorted[0]!;
  const members = collectTree(snapshot, anchor, { markerPids: sorted.slice(1).map((p) => p.pid) });
  return members.length === 0 ? null : { root: anchor, members };
}

/** Evidence rows for a lease that was searched (or could not be). */
export function remnantEvidence(
  tally: RemnantTally | null,
  target: KillTarget | null,
  blocked: string | null,
): OwnershipEvidence[] {
  if (blocked !== null || tally === null) {
    return [evidence("remnant-env", "unknown", "search-blocked", `no remnant search: ${blocked ?? "not searched"}`)];
  }
  const refused = refusedText(tally);
  if (target === null) {
    return [
      evidence(
        "remnant-env",
        "unknown",
        "none-proven",
        `no live process proven to carry this lease's markers${refused}`,
      ),
    ];
  }
  const hows = new Set(tally.accepted.map((a) => a.start));
  const start = evidence(
    "remnant-start",
    "match",
    "started-after-lease",
    hows.has("ticks") && !hows.has("both") && !hows.has("epoch")
      ? "started no earlier than the recorded root (same boot clock)"
      : hows.has("epoch") && !hows.has("both") && !hows.has("ticks")
        ? `started no earlier than the lease (epoch via btime, ±${START_CLOCK_SLACK_MS} ms)`
        : `started no earlier than the recorded root and the lease (epoch via btime, ±${START_CLOCK_SLACK_MS} ms)`,
  );
  return [
    evidence(
      "remnant-env",
      "match",
      "carriers-found",
      `${tally.accepted.length} live process(es) carry this lease id and gateway instance id; ${target.members.length} to kill with their descendants${refused}`,
    ),
    start,
  ];
}
