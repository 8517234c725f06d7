/**
 * The one rule for "what state does a lease go to after a verification (and
 * maybe a kill, and the drain of its cgroup)?". Every settlement goes
 * through lifecycle.ts, which feeds this table and applies its answer, so
 * "when may a lease be settled?" has one answer in the package. Pure: no
 * I/O, no clock.
 *
 * Inputs: the LATEST verification of the lease, the report of the kill run on
 * that verification (killLeaseVerification; null when none ran), and what
 * the caller witnessed before it (SettleContext): a kill that ran earlier in
 * the same close (a first pass, or a tree kill not derived from the lease),
 * or the root's exit reported by the caller's own handle (a supervised run
 * that ended). Neither settles anything by itself; they only decide whether
 * "nothing of ours is left" reads closed (it ended under our eyes, or we
 * cleaned it up) or lost (it vanished before cleanup).
 *
 * | # | kill of this verification            | verdict  | what else                                  | to        |
 * |---|--------------------------------------|----------|--------------------------------------------|-----------|
 * | 0 | (lease already closed or lost)       |          |                                            | unchanged |
 * | 1 | ran, killCompleted                   | owned    |                                            | closed    |
 * | 2 | ran, killCompleted                   | gone     | remnantsUncleared = 0                      | closed    |
 * | 3 | ran, killCompleted                   | gone     | remnantsUncleared > 0 (carrier not judged) | closing   |
 * | 4 | ran, something may still run         | any      | survived, denied, unknown outcome          | closing   |
 * | 5 | none                                 | owned    | a verified tree is alive, not killed       | closing   |
 * | 6 | none                                 | gone     | remnantSearch none-found                   | lost; closed after a COMPLETED prior kill, or (no prior kill) an observed root exit; closing after a prior kill with survivors |
 * | 7 | none                                 | gone     | found (not killed), inconclusive, not-run  | closing   |
 * | 8 | none                                 | mismatch | the lease is another gateway instance's    | unchanged |
 * | 9 | none                                 | mismatch | anything else                              | as row 6 (the same prior rule) |
 * |10 | none                                 | unknown  | factsUnavailable (no process list, backend none), no prior kill | open |
 * |11 | none                                 | unknown  | anything else                              | closing   |
 *
 * The lease's own cgroup, when it records one, is then drained (or, without
 * a kill, looked into: cgroup-drain.ts), except after rows 0 and 8, and what
 * the drain found is the last input (SettleContext.drain):
 *
 * | #  | the row above             | cgroup drain                                   | what else                   | to        |
 * |----|---------------------------|------------------------------------------------|-----------------------------|-----------|
 * | D1 | not 0 or 8                | empty: populated 0, removed (or already gone)  | something ended (see below) | closed    |
 * | D2 | not 0 or 8                | empty                                          | nothing ended               | lost      |
 * | D3 | not 0 or 8                | survivors (populated), or left (emptied, its folder not removed yet) |       | closing   |
 * | D4 | any                       | unknown (not ours, unreadable), or no cgroup   |                             | the row above |
 *
 * "Something ended": a kill of this verification or a prior one, the root's
 * exit observed, or live processes the drain itself ended.
 *
 * A spawn that never produced a process (settlementUnstarted):
 *
 * | #  | cgroup drain                                  | to        |
 * |----|-----------------------------------------------|-----------|
 * | U1 | survivors, unknown or left                    | closing   |
 * | U2 | empty, after ending processes born in it      | closed    |
 * | U3 | empty with nothing in it, or no cgroup        | lost (NOTHING_STARTED) |
 *
 * A dry run (settlementForDryRun) answers from the same rows, assuming the
 * kill and the drain it would run complete:
 *
 * | #  | the row above | a tree or remnants to kill, or processes in the lease's cgroup | to |
 * |----|---------------|-----------------------------------------------------------------|----|
 * | R1 | 0 or 8        | any                                                             | unchanged |
 * | R2 | any other     | yes                                                             | closed ("would kill") |
 * | R3 | any other     | no                                                              | the row above |
 *
 * Why each row:
 * - 1-4: a kill settles closed only when nothing it was handed may still run
 *   (tree-kill.ts AFTER_KILL) and, for remnants, when the search cleared every
 *   candidate; otherwise the lease stays closing and the next reconcile
 *   retries it.
 * - 6 and 9 share one prior rule (byPrior): "nothing of ours is left" reads
 *   closed only after a prior kill that COMPLETED, or, with no prior kill,
 *   an exit the caller observed; a prior kill that left a member that may
 *   still run keeps the lease closing (that member is not proven gone).
 * - 6-7: a gone root settles only on proof that nothing carries its markers
 *   any more; "inconclusive" (environments unreadable, a candidate that could
 *   not be inspected, a blocked search on ps/none) is never read as "none".
 * - 8: a lease of another gateway instance is not ours to settle at all.
 * - 9: a mismatch proves the root pid (or group, or namespace) names someone
 *   else's process now, or a guard refuses it: nothing the lease names may
 *   be signalled, now or later, and no later verification can turn it into
 *   ours, so retrying is pointless (unless a prior kill left a member that
 *   may still run: closing, by the prior rule). Fail closed, with a known cost: the
 *   remnant search never runs for a mismatch, so marker-carrying escapees of
 *   a lease whose root pid was reused are left running (never signalled).
 * - 10: closing → open only when cleanup could not run because the process
 *   list was unavailable; the lease is handed back to its session (a
 *   reconcile lists open leases too).
 * - 11: every other unknown (no root pid yet, a start time that could not be
 *   compared, a root that could not be inspected, coarse identity with no
 *   corroboration, an invalid record) is not settled on a guess: closing,
 *   retried. `why` names the deciding evidence.
 * - D1-D3: every process of a contained lease was born in its cgroup (the
 *   cgroup is recorded only while its first process is in it), so the
 *   kernel's populated 0 proves nothing of the lease is left, whatever the
 *   search above could or could not clear; still populated, or a folder the
 *   host would not let go yet, keeps the lease closing for the next
 *   reconcile (a settled lease has nobody left to remove its cgroup).
 * - D4: a drain that cannot tell decides nothing.
 * - R1: what a real run would not touch (another instance's lease) a dry
 *   run does not plan to kill either.
 */
import { mergeKillResults, survivorsOf, type TreeKillReport } from "./tree-kill.js";
import type { LeaseKillResult } from "./kill-verification.js";
import type { CgroupDrain } from "./cgroup-drain.js";
import type { OwnershipEvidence } from "./types.js";
import type { LeaseVerification } from "./verify.js";

export type SettlementTarget = "closed" | "lost" | "closing" | "open" | "unchanged";

export interface Settlement {
  to: SettlementTarget;
  /** one line naming the fact that decided it (for reports and logs) */
  why: string;
}

/** What the rule reads from a verification. */
export type SettleVerification = Pick<
  LeaseVerification,
  "lease" | "verdict" | "evidence" | "remnantSearch" | "remnantsUncleared" | "factsUnavailable"
>;

/** For a lease whose spawn never produced a process (no pid ever existed): nothing can be alive. */
export const NOTHING_STARTED: Readonly<Settlement> = Object.freeze({
  to: "lost",
  why: "no process was ever started for this lease",
});

/** What the lease's cgroup drain (or look) found, as the table reads it (rows D, U). */
export type DrainInput = Pick<CgroupDrain, "state" | "members" | "evidence">;

/**
 * What the caller witnessed before the verification (see the header). The
 * one prior rule (rows 6 and 9): a prior kill that completed → closed; one
 * that left a member that may still run → closing (fail closed: retried);
 * no prior kill but the root's exit observed → closed; neither → lost.
 */
export interface SettleContext {
  /** a kill that ran earlier in the same close, not on this verification */
  prior?: Pick<TreeKillReport, "results"> | null;
  /** the root's exit was reported by the caller's own handle (its child, unreaped until then) */
  rootExitObserved?: boolean;
  /** the lease's own cgroup after its drain (rows D); null or absent: no cgroup, or not drained yet */
  drain?: DrainInput | null;
}

/** Another gateway instance's lease (row 8): not ours to move, drain or plan to kill. */
export function isOtherInstance(v: Pick<SettleVerification, "evidence">): boolean {
  return v.evidence.some((e) => e.check === "instance" && e.result === "mismatch");
}

/** Whether the lease's cgroup is drained after this settlement: never after rows 0 and 8 (unchanged). */
export function drainsCgroup(s: Settlement): boolean {
  return s.to !== "unchanged";
}

export function settlementFor(v: SettleVerification, kill: Pick<TreeKillReport, "results"> | null, ctx: SettleContext = {}): Settlement {
  return withDrain(rowFor(v, kill, ctx), kill !== null, ctx);
}

/** Rows 0-11. */
function rowFor(v: SettleVerification, kill: Pick<TreeKillReport, "results"> | null, ctx: SettleContext): Settlement {
  const prior = ctx.prior ?? null;
  if (v.lease.state === "closed" || v.lease.state === "lost") return { to: "unchanged", why: `already ${v.lease.state}` };

  if (kill !== null) {
    const survivors = survivorsOf(kill);
    if (survivors.length > 0) return { to: "closing", why: `pid(s) ${survivors.join(", ")} may still run after the kill (survived, denied or unknown); retried later` };
    if (v.verdict === "gone" && v.remnantsUncleared > 0) {
      return { to: "closing", why: `remnants killed, but ${v.remnantsUncleared} process(es) that may carry the lease could not be cleared (${detailOf(v, "remnant-env")}); retried later` };
    }
    return { to: "closed", why: `reaped ${kill.results.length} verified process(es); none may still run` };
  }

  switch (v.verdict) {
    case "owned":
      return { to: "closing", why: "a verified tree is alive and was not killed; retried later" };
    case "gone": {
      if (v.remnantSearch === "none-found") {
        const gone = decisive(v, "mismatch") ?? "the root is gone";
        return byPrior(prior, ctx, `${gone} and nothing carries the lease's markers`, `${gone}; nothing carries the lease's markers; nothing signalled`);
      }
      if (v.remnantSearch === "found") return { to: "closing", why: "the root is gone but live processes carry the lease's markers and were not killed; retried later" };
      return { to: "closing", why: `the root is gone but the remnant search could not prove nothing is left (${detailOf(v, "remnant-env")}); retried later` };
    }
    case "mismatch": {
      if (isOtherInstance(v)) {
        return { to: "unchanged", why: decisive(v, "mismatch") ?? "the lease belongs to another gateway instance" };
      }
      const what = decisive(v, "mismatch") ?? "the live process does not match the lease";
      return byPrior(prior, ctx, what, `${what}; nothing signalled (escapees of a reused root pid are never searched for)`);
    }
    case "unknown": {
      const cause = decisive(v, "unknown") ?? "ownership could not be established";
      // after a kill, cleanup DID run: the lease is not handed back, it stays closing
      if (v.factsUnavailable && prior === null) return { to: "open", why: `${cause}; cleanup could not run, lease back to open` };
      return { to: "closing", why: `${cause}; not settled on unknown evidence, retried later` };
    }
  }
}

/** Rows D1-D4: the drain's answer over the row the verification and kills chose. */
function withDrain(s: Settlement, killed: boolean, ctx: SettleContext): Settlement {
  const d = ctx.drain;
  if (d === undefined || d === null || !drainsCgroup(s)) return s;
  const detail = d.evidence.detail;
  if (d.state === "empty") {
    const ended = killed || (ctx.prior ?? null) !== null || ctx.rootExitObserved === true || d.members > 0;
    return ended ? { to: "closed", why: detail ?? "cgroup empty" } : { to: "lost", why: `nothing of it was alive; ${detail ?? "cgroup empty"}` };
  }
  if (d.state === "survivors" || d.state === "left") return { to: "closing", why: `${detail ?? "cgroup still populated"}; ${s.why}` };
  return s;
}

/** Rows U1-U3: a spawn that never produced a process, by what its cgroup's drain found (null: it had none). */
export function settlementUnstarted(drain: DrainInput | null): Settlement {
  if (drain === null) return NOTHING_STARTED;
  if (drain.state !== "empty") return { to: "closing", why: `the spawn failed and its cgroup could not be emptied and removed: ${drain.evidence.detail ?? drain.state}` };
  if (drain.members > 0) return { to: "closed", why: `the spawn failed; ${drain.evidence.detail ?? "its cgroup was emptied"}` };
  return NOTHING_STARTED;
}

/** What a dry run would kill: the verification's tree or remnants (their pids) and the pids in the lease's cgroup. */
export interface DryRunPlan {
  target: "tree" | "remnants" | null;
  /** every pid a kill would be handed, the cgroup's members included */
  pids: readonly number[];
  /** how many of them are in the lease's cgroup */
  contained: number;
}

/** Rows R1-R3: a dry run's answer, from the same rows as the real run; `reaps`: row R2 (the plan would be carried out). */
export function settlementForDryRun(v: SettleVerification, plan: DryRunPlan, ctx: SettleContext = {}): Settlement & { kills: boolean } {
  const s = settlementFor(v, null, { ...ctx, drain: null });
  if (!drainsCgroup(s) || (plan.target === null && plan.contained === 0)) return { ...s, kills: false };
  const inCgroup = plan.contained > 0 ? `, ${plan.contained} of them in the lease's cgroup` : "";
  return { to: "closed", why: `would kill ${plan.pids.length} process(es) (${plan.pids.join(" ")})${inCgroup}; closed if none may still run after it`, kills: true };
}

/** Rows 6 and 9: what a verification that found nothing of ours reads as, by what the caller witnessed before it. */
function byPrior(prior: Pick<TreeKillReport, "results"> | null, ctx: SettleContext, now: string, lost: string): Settlement {
  if (prior !== null) {
    const survivors = survivorsOf(prior);
    return survivors.length === 0
      ? { to: "closed", why: `reaped earlier; now ${now}` }
      : { to: "closing", why: `reaped earlier, but pid(s) ${survivors.join(", ")} may still run after that kill; now ${now}; retried later` };
  }
  if (ctx.rootExitObserved === true) return { to: "closed", why: `the root's exit was observed; ${now}` };
  return { to: "lost", why: lost };
}

/**
 * The settlement after killLeaseVerification: by the LAST verification
 * (`final`), never by a kill report alone. When a follow-up kill ran on
 * `final` (remnants found after the first kill), the combined report is the
 * kill of that verification (a survivor of either kill keeps it closing);
 * otherwise the first kill counts as the prior one (with `ctx.prior`, if the
 * caller had one of its own). With nothing killed it is settlementFor(v, null, ctx).
 */
export function settlementAfterKill(r: Pick<LeaseKillResult, "final" | "report" | "finalKill">, ctx: SettleContext = {}): Settlement {
  if (r.report === null) return settlementFor(r.final, null, ctx);
  const all = ctx.prior ? { results: mergeKillResults(ctx.prior, r.report) } : r.report;
  if (r.finalKill !== null) return settlementFor(r.final, all, ctx);
  return settlementFor(r.final, null, { ...ctx, prior: all });
}


/** The first row with `result`, as "check: detail". */
function decisive(v: SettleVerification, result: OwnershipEvidence["result"]): string | null {
  // an unknown verdict is decided by the LAST unknown row (verify pushes the deciding one last)
  const rows = result === "unknown" ? [...v.evidence].reverse() : v.evidence;
  const e = rows.find((x) => x.result === result);
  return e ? `${e.check}: ${e.detail ?? result}` : null;
}

function detailOf(v: SettleVerification, check: string): string {
  const e = v.evidence.find((x) => x.check === check);
  return e?.detail ?? "no search";
}
