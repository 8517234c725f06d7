/**
 * The one place that decides what a verification lets us reap, so the
 * controller, the supervisor and the CLI do not each reinvent the choice:
 * the verified tree when there is one (verdict "owned", with its verified
 * process group), else the proven remnants of a GONE root (absent or a
 * zombie, same boot), else nothing. A "mismatch" (a reused root pid, another
 * gateway's lease, …) or "unknown" verdict never leads to a signal, whatever
 * else the verification object carries.
 */
import { reapOwnedTree, type ReapOptions, type ReapReport } from "./reap.js";
import type { LeaseVerification } from "./verify.js";

export interface LeaseReapResult {
  /** true when a tree or remnants were handed to the reaper */
  reaped: boolean;
  /** what was reaped: the verified tree, the remnants, or nothing */
  target: "tree" | "remnants" | null;
  /** the reaper's per-pid report; null when nothing was reaped */
  report: ReapReport | null;
}

export async function reapLeaseVerification(
  v: Pick<LeaseVerification, "verdict" | "tree" | "remnants">,
  opts: ReapOptions,
): Promise<LeaseReapResult> {
  if (v.verdict === "owned" && v.tree) return { reaped: true, target: "tree", report: await reapOwnedTree(v.tree, opts) };
  if (v.verdict === "gone" && v.remnants) return { reaped: true, target: "remnants", report: await reapOwnedTree(v.remnants, opts) };
  return { reaped: false, target: null, report: null };
}
