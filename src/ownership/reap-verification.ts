/**
 * The one place that decides what a verification lets us reap:
 * the verified tree when there is one (verdict "owned", with its verified
 * process group), else the proven remnants of a GONE root (absent or a
 * zombie, same boot), else nothing. A "mismatch" (a reused root pid, another
 * gateway's lease, …) or "unknown" verdict never leads to a signal, whatever
 * else the verification object carries.
 *
 * A reap is never settled on its report alone: a process forked DURING the
 * teardown (a double-fork a SIGTERM handler starts, re-parented to init) is
 * not a child of any member the reaper still watches. So after a reap the
 * lease is verified ONCE more (one more snapshot and env pass, after the
 * last signal: the "one snapshot before the first signal" cost is kept);
 * the root is then normally gone, and whatever still carries the lease's
 * markers is reaped as remnants. Callers settle on that LAST verification
 * (`final`), through settlementAfterReap (settle.ts).
 */
import { mergeReapResults, reapOwnedTree, type ReapOptions, type ReapReport } from "./reap.js";
import { verifyLeases, type LeaseVerification } from "./verify.js";
import type { LeaseVerifier } from "./verify-batching.js";

export interface LeaseReapOptions extends ReapOptions {
  /** passed to the re-verification after a reap (a lease of another instance is a mismatch) */
  gatewayInstanceId?: string;
  /** makes the re-verification after a reap; a batch's reaps share one (verify-batching.ts) */
  verify?: LeaseVerifier;
}

export interface LeaseReapResult {
  /** true when a tree or remnants were handed to the reaper */
  reaped: boolean;
  /** what the first reap took: the verified tree, the remnants, or nothing */
  target: "tree" | "remnants" | null;
  /** every reap combined (the first, and the follow-up on remnants the re-verification found); null when nothing was reaped */
  report: ReapReport | null;
  /** the LAST verification: the one given when nothing was reaped, else the re-verification after the reap */
  final: LeaseVerification;
  /** the report of the follow-up reap run on `final`; null when it found nothing to reap (or nothing was reaped at all) */
  finalReap: ReapReport | null;
}

/** What a verification lets us reap: its tree when owned, the remnants of a gone root, else nothing (the one choice, see the header). */
export function reapTargetOf(v: Pick<LeaseVerification, "verdict" | "tree" | "remnants">): "tree" | "remnants" | null {
  return v.verdict === "owned" && v.tree ? "tree" : v.verdict === "gone" && v.remnants ? "remnants" : null;
}

export async function reapLeaseVerification(v: LeaseVerification, opts: LeaseReapOptions): Promise<LeaseReapResult> {
  const target = reapTargetOf(v);
  if (target === null) return { reaped: false, target: null, report: null, final: v, finalReap: null };
  const first = await reapOwnedTree(target === "tree" ? v.tree! : v.remnants!, opts);

  // once, after the last signal: anything of the lease that escaped the teardown
  const verifyOpts = opts.gatewayInstanceId !== undefined ? { gatewayInstanceId: opts.gatewayInstanceId } : {};
  const reverify = opts.verify ?? (async (l) => (await verifyLeases([l], opts.facts, verifyOpts))[0]!);
  const again = await reverify(v.lease).catch(() => undefined);
  const final: LeaseVerification = again ?? {
    ...v,
    verdict: "unknown",
    tree: null,
    remnants: null,
    remnantSearch: "not-run",
    remnantsUncleared: 0,
    factsUnavailable: false,
    evidence: [{ check: "re-verification", result: "unknown", detail: "the verification after the reap failed" }],
  };
  // only remnants (the root gone) are reaped again: a root that survived the reap is the report's survivor already
  const finalReap = final.verdict === "gone" && final.remnants ? await reapOwnedTree(final.remnants, opts) : null;
  return { reaped: true, target, report: finalReap ? combineReports(first, finalReap) : first, final, finalReap };
}

/** One report for two reaps of the same lease (mergeReapResults: a pid reaped twice keeps its later outcome). */
export function combineReports(a: ReapReport, b: ReapReport): ReapReport {
  return {
    results: mergeReapResults(a, b),
    termSent: a.termSent + b.termSent,
    killSent: a.killSent + b.killSent,
    durationMs: a.durationMs + b.durationMs,
  };
}
