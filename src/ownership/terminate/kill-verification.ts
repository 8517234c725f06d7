/**
 * The one place that decides what a verification lets us kill:
 * the verified tree when there is one (verdict "owned", with its verified
 * process group), else the proven remnants of a GONE root (absent or a
 * zombie, same boot), else nothing. A "mismatch" (a reused root pid, another
 * gateway's lease, …) or "unknown" verdict never leads to a signal, whatever
 * else the verification object carries.
 *
 * A kill is never settled on its report alone: a process forked DURING the
 * teardown (a double-fork a SIGTERM handler starts, re-parented to init) is
 * not a child of any member the tree kill still watches. So after a kill the
 * lease is verified ONCE more (one more snapshot and env pass, after the
 * last signal: the "one snapshot before the first signal" cost is kept);
 * the root is then normally gone, and whatever still carries the lease's
 * markers is killed as remnants. A remnant may fork again as it is
 * TERMed (a relay: each one's handler starts the next, detached), so after
 * each remnant kill the lease is verified again, up to REMNANT_ROUNDS
 * remnant kills: the cost is paid only where remnants were found. Callers
 * settle on the LAST verification whose remnants were killed (`final`),
 * through settlementAfterKill (settle.ts).
 */
import { mergeKillResults, killOwnedTree, type TreeKillOptions, type TreeKillReport } from "./tree-kill.js";
import { evidence } from "../verify/evidence.js";
import { verifyLeases, type LeaseVerification } from "../verify/verify.js";
import type { LeaseVerifier } from "../verify/verify-batching.js";

/** remnant kills after the first kill, at most: a relay longer than this leaves its last link running, which a lease cgroup's drain still ends (docs/containment.md) */
const REMNANT_ROUNDS = 3;

export interface LeaseKillOptions extends TreeKillOptions {
  /** passed to the re-verification after a kill (a lease of another instance is a mismatch) */
  gatewayInstanceId?: string;
  /** makes the re-verification after a kill; a batch's kills share one (verify-batching.ts) */
  verify?: LeaseVerifier;
}

export interface LeaseKillResult {
  /** true when a tree or remnants were handed to the tree kill */
  killed: boolean;
  /** what the first kill took: the verified tree, the remnants, or nothing */
  target: "tree" | "remnants" | null;
  /** every kill combined (the first, and the follow-up on remnants the re-verification found); null when nothing was killed */
  report: TreeKillReport | null;
  /** the LAST verification: the one given when nothing was killed, else the re-verification after the kill */
  final: LeaseVerification;
  /** the report of the follow-up kill run on `final`; null when it found nothing to kill (or nothing was killed at all) */
  finalKill: TreeKillReport | null;
}

/** What a verification lets us kill: its tree when owned, the remnants of a gone root, else nothing (the one choice, see the header). */
export function killTargetOf(v: Pick<LeaseVerification, "verdict" | "tree" | "remnants">): "tree" | "remnants" | null {
  return v.verdict === "owned" && v.tree ? "tree" : v.verdict === "gone" && v.remnants ? "remnants" : null;
}

export async function killLeaseVerification(v: LeaseVerification, opts: LeaseKillOptions): Promise<LeaseKillResult> {
  const target = killTargetOf(v);
  if (target === null) return { killed: false, target: null, report: null, final: v, finalKill: null };
  const first = await killOwnedTree(target === "tree" ? v.tree! : v.remnants!, opts);

  // once, after the last signal: anything of the lease that escaped the teardown
  const verifyOpts = opts.gatewayInstanceId !== undefined ? { gatewayInstanceId: opts.gatewayInstanceId } : {};
  const reverify = opts.verify ?? (async (l) => (await verifyLeases([l], opts.facts, verifyOpts))[0]!);
  const again = await reverify(v.lease).catch(() => undefined);
  // only remnants (the root gone) are killed again: a root that survived the kill is the report's survivor already
  let final = again ?? unverified(v);
  let finalKill: TreeKillReport | null = null;
  for (let round = 1; final.verdict === "gone" && final.remnants; round++) {
    const k = await killOwnedTree(final.remnants, opts);
    finalKill = finalKill ? combineKillReports(finalKill, k) : k;
    if (round === REMNANT_ROUNDS) break;
    // a remnant's own TERM handler may have forked one more: the next verification finds it
    const next = await reverify(v.lease).catch(() => undefined);
    if (next === undefined || next.verdict !== "gone" || !next.remnants) break;
    final = next;
  }
  return { killed: true, target, report: finalKill ? combineKillReports(first, finalKill) : first, final, finalKill };
}

/** The stand-in for a re-verification that failed: nothing may be killed on it. */
function unverified(v: LeaseVerification): LeaseVerification {
  return {
    ...v,
    verdict: "unknown",
    tree: null,
    remnants: null,
    remnantSearch: "not-run",
    remnantsUncleared: 0,
    factsUnavailable: false,
    evidence: [
      evidence("re-verification", "unknown", "re-verification-failed", "the verification after the kill failed"),
    ],
  };
}

/** One report for two kills of the same lease (mergeKillResults: a pid killed twice keeps its later outcome). */
export function combineKillReports(a: TreeKillReport, b: TreeKillReport): TreeKillReport {
  return {
    results: mergeKillResults(a, b),
    termSent: a.termSent + b.termSent,
    killSent: a.killSent + b.killSent,
    durationMs: a.durationMs + b.durationMs,
  };
}
