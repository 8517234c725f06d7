/**
 * The one place that decides what a verification lets us reap, so the
 * controller, the supervisor and the CLI do not each reinvent the choice:
 * the verified tree when there is one (with its verified process group),
 * else the proven remnants of a vanished or reused root, else nothing.
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
  v: Pick<LeaseVerification, "tree" | "remnants">,
  opts: ReapOptions,
): Promise<LeaseReapResult> {
  if (v.tree) return { reaped: true, target: "tree", report: await reapOwnedTree(v.tree, opts) };
  if (v.remnants) return { reaped: true, target: "remnants", report: await reapOwnedTree(v.remnants, opts) };
  return { reaped: false, target: null, report: null };
}
