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
 * Each row has a code (SettlementCode) and, when it settles, the lease's
 * settledAs (LeaseSettledAs), written in the "to" column as to (code,
 * settledAs):
 *
 * | # | kill of this verification    | verdict  | what else                                  | to |
 * |---|------------------------------|----------|--------------------------------------------|----|
 * | 0 | (lease already closed/lost)  |          |                                            | unchanged (already-settled) |
 * | 1 | ran, killCompleted           | owned    |                                            | closed (killed, killed) |
 * | 2 | ran, killCompleted           | gone     | remnantsUncleared = 0                      | closed (killed, killed) |
 * | 3 | ran, killCompleted           | gone     | remnantsUncleared > 0 (carrier not judged) | closing (kill-left-uncleared) |
 * | 4 | ran, something may still run | any      | survived, denied, unknown outcome          | closing (kill-survivors) |
 * | 5 | none                         | owned    | a verified tree is alive, not killed       | closing (tree-alive) |
 * | 6 | none                         | gone     | remnantSearch none-found                   | lost (ended-on-its-own, ended-on-its-own); the prior rule below |
 * | 6b| none                         | gone     | none-found, but candidates hide their environment (env-hidden) | lost (left-unjudged, left-unjudged); the prior rule below |
 * | 7 | none                         | gone     | found (not killed), inconclusive, not-run  | closing (remnants-alive, remnant-search-inconclusive) |
 * | 8 | none                         | mismatch | the lease is another gateway instance's    | unchanged (other-instance) |
 * | 9 | none                         | mismatch | anything else                              | lost (not-ours, not-ours); the prior rule below |
 * |10 | none                         | unknown  | factsUnavailable (no process list, backend none), no prior kill | open (facts-unavailable) |
 * |11 | none                         | unknown  | anything else                              | closing (unknown-evidence) |
 *
 * The prior rule of rows 6 and 9: after a COMPLETED prior kill, closed
 * (killed-earlier, killed); after a prior kill with survivors, closing
 * (earlier-kill-survivors); with no prior kill but an observed root exit,
 * closed (exit-observed, exit-observed); with neither, but the root's
 * wrapper's own record that it ended the tree (its gateway went away, or a
 * durable window ran out: end-records.ts), closed (ended-by-wrapper,
 * ended-by-wrapper).
 *
 * The lease's own cgroup, when it records one, is then drained (or, without
 * a kill, looked into: cgroup-drain.ts), except after rows 0 and 8, and what
 * the drain found is the last input (SettleContext.drain):
 *
 * | #  | the row above | cgroup drain                                   | what else                   | to |
 * |----|---------------|------------------------------------------------|-----------------------------|----|
 * | D1 | not 0 or 8    | empty: populated 0, removed (or already gone)  | something ended (see below) | closed (cgroup-emptied; killed, or exit-observed when only the exit was seen) |
 * | D2 | not 0 or 8    | empty                                          | nothing ended               | lost (cgroup-found-empty; the row above's settledAs when it was lost, else ended-on-its-own); closed (ended-by-wrapper) with the wrapper's record |
 * | D3 | not 0 or 8    | survivors (populated), or left (emptied, its folder not removed yet) |       | closing (cgroup-populated, cgroup-left) |
 * | D4 | any           | unknown (not ours, unreadable), or no cgroup   |                             | the row above |
 * | D5 | not 0 or 8    | foreign-left: nothing of its own is left; members that are not its own could not be moved out | as D1 / D2 | closed or lost as D1 / D2 (cgroup-foreign-left) |
 *
 * "Something ended": a kill of this verification or a prior one, the root's
 * exit observed, or live processes the drain itself ended.
 *
 * A spawn that never produced a process (settlementUnstarted):
 *
 * | #  | cgroup drain                                  | to |
 * |----|-----------------------------------------------|----|
 * | U1 | survivors, unknown or left                    | closing (unstarted-cgroup-not-emptied) |
 * | U2 | empty (or foreign-left), after ending processes born in it | closed (unstarted-cgroup-emptied, killed) |
 * | U3 | empty (or foreign-left) with nothing of its own in it, or no cgroup | lost (never-started, never-started: NOTHING_STARTED) |
 *
 * A dry run (settlementForDryRun) answers from the same rows, assuming the
 * kill and the drain it would run complete:
 *
 * | #  | the row above | a tree or remnants to kill, or processes in the lease's cgroup | to |
 * |----|---------------|-----------------------------------------------------------------|----|
 * | R1 | 0 or 8        | any                                                             | unchanged |
 * | R2 | any other     | yes                                                             | closed (would-kill, killed) |
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
 * - 6b (and 1-2 with such candidates): a process that made itself
 *   non-dumpable hides its environment from its own uid for as long as it
 *   lives (remnants.ts "env-hidden"): no retry can judge it, so keeping the
 *   lease closing for it would keep it closing forever, and any agent of the
 *   uid could so hold every lease started before such a process. It is never
 *   signalled (unknown evidence), the lease settles by the rest of the
 *   evidence, and the settlement names it: left-unjudged when nothing else
 *   was ended, and in the why of a kill that completed.
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
 * - D5: a member that is not the lease's (cgroup-attribution.ts: another
 *   session's process, the gateway, anything older than the lease, moved in
 *   by an agent) is never signalled, and a move out that the host refused
 *   must not hold the lease closing forever: every process of the lease's
 *   own is gone, which is what closed or lost say. The cgroup is left in
 *   place with them (the settlement's evidence names each), for an operator.
 * - R1: what a real run would not touch (another instance's lease) a dry
 *   run does not plan to kill either.
 */
import { mergeKillResults, survivorsOf, type TreeKillReport } from "../terminate/tree-kill.js";
import type { LeaseKillResult } from "../terminate/kill-verification.js";
import type { CgroupDrain } from "../terminate/cgroup-drain.js";
import type { EvidenceCheck, LeaseSettledAs, OwnershipEvidence } from "../leases/types.js";
import type { LeaseVerification } from "../verify/verify.js";

export type SettlementTarget = "closed" | "lost" | "closing" | "open" | "unchanged";

/** Which row decided (the table above), for code to read; `why` says it for people. */
export type SettlementCode =
  | "already-settled" // 0
  | "killed" // 1, 2
  | "kill-left-uncleared" // 3
  | "kill-survivors" // 4
  | "tree-alive" // 5
  | "killed-earlier" // 6, 9: a prior kill completed
  | "earlier-kill-survivors" // 6, 9: a prior kill left one that may run
  | "exit-observed" // 6, 9: no prior kill, the root's exit observed
  | "ended-by-wrapper" // 6, 9, D2: no prior kill, no exit observed, the wrapper's record that it ended the tree
  | "ended-on-its-own" // 6: nothing of it left, nothing ran, nothing observed
  | "left-unjudged" // 6b: nothing proven of it left, processes that hide their environment left running
  | "not-ours" // 9: the root pid names someone else's process
  | "remnants-alive" // 7: found, not killed
  | "remnant-search-inconclusive" // 7
  | "other-instance" // 8
  | "facts-unavailable" // 10
  | "unknown-evidence" // 11
  | "cgroup-emptied" // D1
  | "cgroup-found-empty" // D2
  | "cgroup-populated" // D3
  | "cgroup-left" // D3
  | "cgroup-foreign-left" // D5
  | "unstarted-cgroup-not-emptied" // U1
  | "unstarted-cgroup-emptied" // U2
  | "never-started" // U3
  | "would-kill"; // R2

export interface Settlement {
  to: SettlementTarget;
  code: SettlementCode;
  /** how the lease ended: set exactly when `to` is closed or lost (recorded on the lease with its state) */
  settledAs?: LeaseSettledAs;
  /** one line naming the fact that decided it (for reports and logs) */
  why: string;
}

/** What the rule reads from a verification. */
export type SettleVerification = Pick<
  LeaseVerification,
  "lease" | "verdict" | "evidence" | "remnantSearch" | "remnantsUncleared" | "factsUnavailable"
> &
  Partial<Pick<LeaseVerification, "remnantRefusals">>;

/** For a lease whose spawn never produced a process (no pid ever existed): nothing can be alive. */
export const NOTHING_STARTED: Readonly<Settlement> = Object.freeze({
  to: "lost",
  code: "never-started",
  settledAs: "never-started",
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
  /** the root's wrapper recorded that it ended the tree itself, and why (end-records.ts) */
  wrapperEnded?: { reason: "parent-gone" | "window-expired" } | null;
}

/** Another gateway instance's lease (row 8): not ours to move, drain or plan to kill. */
export function isOtherInstance(v: Pick<SettleVerification, "evidence">): boolean {
  return v.evidence.some((e) => e.code === "other-instance");
}

/** Whether the lease's cgroup is drained after this settlement: never after rows 0 and 8 (unchanged). */
export function drainsCgroup(s: Settlement): boolean {
  return s.to !== "unchanged";
}

export function settlementFor(
  v: SettleVerification,
  kill: Pick<TreeKillReport, "results"> | null,
  ctx: SettleContext = {},
): Settlement {
  return withDrain(rowFor(v, kill, ctx), kill !== null, ctx);
}

/** Rows 0-11. */
function rowFor(v: SettleVerification, kill: Pick<TreeKillReport, "results"> | null, ctx: SettleContext): Settlement {
  const prior = ctx.prior ?? null;
  if (v.lease.state === "closed" || v.lease.state === "lost")
    return { to: "unchanged", code: "already-settled", why: `already ${v.lease.state}` };
  if (kill !== null) return afterKill(v, kill);
  switch (v.verdict) {
    case "owned":
      return { to: "closing", code: "tree-alive", why: "a verified tree is alive and was not killed; retried later" };
    case "gone": {
      if (v.remnantSearch === "none-found") {
        const gone = decisive(v, "mismatch") ?? "the root is gone";
        const hidden = hiddenNote(v);
        if (hidden !== "")
          return byPrior(prior, ctx, `${gone} and nothing proven to carry the lease's markers${hidden}`, {
            code: "left-unjudged",
            why: `${gone}; nothing proven to carry the lease's markers${hidden}; nothing signalled`,
          });
        return byPrior(prior, ctx, `${gone} and nothing carries the lease's markers`, {
          code: "ended-on-its-own",
          why: `${gone}; nothing carries the lease's markers; nothing signalled`,
        });
      }
      if (v.remnantSearch === "found")
        return {
          to: "closing",
          code: "remnants-alive",
          why: "the root is gone but live processes carry the lease's markers and were not killed; retried later",
        };
      return {
        to: "closing",
        code: "remnant-search-inconclusive",
        why: `the root is gone but the remnant search could not prove nothing is left (${detailOf(v, "remnant-env")}); retried later`,
      };
    }
    case "mismatch": {
      if (isOtherInstance(v))
        return {
          to: "unchanged",
          code: "other-instance",
          why: decisive(v, "mismatch") ?? "the lease belongs to another gateway instance",
        };
      const what = decisive(v, "mismatch") ?? "the live process does not match the lease";
      return byPrior(prior, ctx, what, {
        code: "not-ours",
        why: `${what}; nothing signalled (escapees of a reused root pid are never searched for)`,
      });
    }
    case "unknown": {
      const cause = decisive(v, "unknown") ?? "ownership could not be established";
      // after a kill, cleanup DID run: the lease is not handed back, it stays closing
      if (v.factsUnavailable && prior === null)
        return { to: "open", code: "facts-unavailable", why: `${cause}; cleanup could not run, lease back to open` };
      return {
        to: "closing",
        code: "unknown-evidence",
        why: `${cause}; not settled on unknown evidence, retried later`,
      };
    }
  }
}

/** Rows 1-4: a kill ran on this verification. */
function afterKill(v: SettleVerification, kill: Pick<TreeKillReport, "results">): Settlement {
  const survivors = survivorsOf(kill);
  if (survivors.length > 0)
    return {
      to: "closing",
      code: "kill-survivors",
      why: `pid(s) ${survivors.join(", ")} may still run after the kill (survived, denied or unknown); retried later`,
    };
  if (v.verdict === "gone" && v.remnantsUncleared > 0) {
    return {
      to: "closing",
      code: "kill-left-uncleared",
      why: `remnants killed, but ${v.remnantsUncleared} process(es) that may carry the lease could not be cleared (${detailOf(v, "remnant-env")}); retried later`,
    };
  }
  return {
    to: "closed",
    code: "killed",
    settledAs: "killed",
    why: `killed ${kill.results.length} verified process(es); none may still run${hiddenNote(v)}`,
  };
}

/** Rows D1-D4: the drain's answer over the row the verification and kills chose. */
function withDrain(s: Settlement, killed: boolean, ctx: SettleContext): Settlement {
  const d = ctx.drain;
  if (d === undefined || d === null || !drainsCgroup(s)) return s;
  const detail = d.evidence.detail;
  if (d.state === "empty" || d.state === "foreign-left") {
    const code = d.state === "empty" ? null : ("cgroup-foreign-left" as const);
    const endedHere = killed || (ctx.prior ?? null) !== null || d.members > 0;
    if (endedHere || ctx.rootExitObserved === true) {
      return {
        to: "closed",
        code: code ?? "cgroup-emptied",
        settledAs: endedHere ? "killed" : "exit-observed",
        why: detail ?? "cgroup empty",
      };
    }
    if (s.code === "ended-by-wrapper")
      return { ...s, code: code ?? "ended-by-wrapper", why: `${s.why}; ${detail ?? "cgroup empty"}` };
    return {
      to: "lost",
      code: code ?? "cgroup-found-empty",
      settledAs: s.to === "lost" && s.settledAs ? s.settledAs : "ended-on-its-own",
      why: `nothing of it was alive; ${detail ?? "cgroup empty"}`,
    };
  }
  if (d.state === "survivors" || d.state === "left") {
    return {
      to: "closing",
      code: d.state === "left" ? "cgroup-left" : "cgroup-populated",
      why: `${detail ?? "cgroup still populated"}; ${s.why}`,
    };
  }
  return s;
}

/** Rows U1-U3: a spawn that never produced a process, by what its cgroup's drain found (null: it had none). */
export function settlementUnstarted(drain: DrainInput | null): Settlement {
  if (drain === null) return NOTHING_STARTED;
  if (drain.state !== "empty" && drain.state !== "foreign-left") {
    return {
      to: "closing",
      code: "unstarted-cgroup-not-emptied",
      why: `the spawn failed and its cgroup could not be emptied and removed: ${drain.evidence.detail ?? drain.state}`,
    };
  }
  if (drain.members > 0)
    return {
      to: "closed",
      code: "unstarted-cgroup-emptied",
      settledAs: "killed",
      why: `the spawn failed; ${drain.evidence.detail ?? "its cgroup was emptied"}`,
    };
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

/** Rows R1-R3: a dry run's answer, from the same rows as the real run; `kills`: row R2 (the plan would be carried out). */
export function settlementForDryRun(
  v: SettleVerification,
  plan: DryRunPlan,
  ctx: SettleContext = {},
): Settlement & { kills: boolean } {
  const s = settlementFor(v, null, { ...ctx, drain: null });
  if (!drainsCgroup(s) || (plan.target === null && plan.contained === 0)) return { ...s, kills: false };
  const inCgroup = plan.contained > 0 ? `, ${plan.contained} of them in the lease's cgroup` : "";
  return {
    to: "closed",
    code: "would-kill",
    settledAs: "killed",
    why: `would kill ${plan.pids.length} process(es) (${plan.pids.join(" ")})${inCgroup}; closed if none may still run after it`,
    kills: true,
  };
}

/**
 * Rows 6 and 9: what a verification that found nothing of ours reads as, by
 * what the caller witnessed before it; `lost` is the answer when it
 * witnessed nothing (ended-on-its-own for a gone root, not-ours for a
 * mismatch).
 */
function byPrior(
  prior: Pick<TreeKillReport, "results"> | null,
  ctx: SettleContext,
  now: string,
  lost: { code: "ended-on-its-own" | "not-ours" | "left-unjudged"; why: string },
): Settlement {
  if (prior !== null) {
    const survivors = survivorsOf(prior);
    return survivors.length === 0
      ? { to: "closed", code: "killed-earlier", settledAs: "killed", why: `killed earlier; now ${now}` }
      : {
          to: "closing",
          code: "earlier-kill-survivors",
          why: `killed earlier, but pid(s) ${survivors.join(", ")} may still run after that kill; now ${now}; retried later`,
        };
  }
  if (ctx.rootExitObserved === true)
    return {
      to: "closed",
      code: "exit-observed",
      settledAs: "exit-observed",
      why: `the root's exit was observed; ${now}`,
    };
  const w = ctx.wrapperEnded;
  if (w !== undefined && w !== null && lost.code !== "left-unjudged")
    return {
      to: "closed",
      code: "ended-by-wrapper",
      settledAs: "ended-by-wrapper",
      why: `its wrapper ended the tree itself (${w.reason === "window-expired" ? "its durable window ran out with nobody to re-adopt it" : "its gateway went away"}); ${now}`,
    };
  return { to: "lost", code: lost.code, settledAs: lost.code, why: lost.why };
}

/**
 * The settlement after killLeaseVerification: by the LAST verification
 * (`final`), never by a kill report alone. When a follow-up kill ran on
 * `final` (remnants found after the first kill), the combined report is the
 * kill of that verification (a survivor of either kill keeps it closing);
 * otherwise the first kill counts as the prior one (with `ctx.prior`, if the
 * caller had one of its own). With nothing killed it is settlementFor(v, null, ctx).
 */
export function settlementAfterKill(
  r: Pick<LeaseKillResult, "final" | "report" | "finalKill">,
  ctx: SettleContext = {},
): Settlement {
  if (r.report === null) return settlementFor(r.final, null, ctx);
  const all = ctx.prior ? { results: mergeKillResults(ctx.prior, r.report) } : r.report;
  if (r.finalKill !== null) return settlementFor(r.final, all, ctx);
  return settlementFor(r.final, null, { ...ctx, prior: all });
}

/** "; N process(es) … left running (the search's list)" for candidates that hide their environment (row 6b); "" when none. */
function hiddenNote(v: SettleVerification): string {
  const n = v.remnantRefusals?.["env-hidden"] ?? 0;
  return n > 0
    ? `; ${n} process(es) that may be its own hide their environment (non-dumpable) and were left running, never signalled (${detailOf(v, "remnant-env")})`
    : "";
}

/** The first row with `result`, as "check: detail". */
function decisive(v: SettleVerification, result: OwnershipEvidence["result"]): string | null {
  // an unknown verdict is decided by the LAST unknown row (verify pushes the deciding one last)
  const rows = result === "unknown" ? [...v.evidence].reverse() : v.evidence;
  const e = rows.find((x) => x.result === result);
  return e ? `${e.check}: ${e.detail ?? result}` : null;
}

function detailOf(v: SettleVerification, check: EvidenceCheck): string {
  const e = v.evidence.find((x) => x.check === check);
  return e?.detail ?? "no search";
}
