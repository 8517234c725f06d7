/**
 * `proclease reap [--state-dir D] [--dry-run] [--force] [--grace-ms MS] [--json] [--backend NAME]`:
 * the gateway's startup reap, run by an operator, through the same lifecycle
 * (ownership/lifecycle.ts reconcileLeases): this instance's open/closing
 * leases, ACPX sessions and supervisor runs alike, verified against one
 * snapshot, reaped leaves first, settled, then retention.
 * A real run takes the state dir's lock like a gateway: while a gateway holds
 * it the command refuses, unless --force (then trees attached to a live
 * parent, leases with no pid yet and unknown evidence are left alone). A dry
 * run is read-only and shares explain's code path.
 */
import type { ProcessFacts } from "../../facts/types.js";
import { DEFAULT_GRACE_MS, DEFAULT_RETENTION_MS, reconcileLeases, type LeaseOutcome, type LeaseReconcileReport } from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../backend.js";
import { EXIT, flag, graceMsOption, jsonLine, plural, resolveStateDir, table, type CliIo, type ParsedArgs } from "../io.js";
import { attachedGuard, gatewayHolder, openReadOnly, openWriter } from "../lease-view.js";

/** Argument plumbing only; the reaping itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  return reap(
    {
      stateDir: resolveStateDir(parsed),
      graceMs: graceMsOption(parsed),
      dryRun: flag(parsed, "dry-run"),
      force: flag(parsed, "force"),
      json: flag(parsed, "json"),
      facts: factsFromFlag(parsed),
    },
    io,
  );
}

interface ReapArgs {
  stateDir: string;
  graceMs: number | undefined;
  dryRun: boolean;
  force: boolean;
  json: boolean;
  facts: ProcessFacts;
}

async function reap({ stateDir, graceMs, dryRun, force, json, facts }: ReapArgs, io: CliIo): Promise<number> {
  if (!json) io.out(backendLine(facts));
  const nothing = () => {
    if (json) io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, dryRun, examined: 0, entries: [], note: "no gateway instance id in this state dir" }));
    else io.out(`no gateway instance id under ${stateDir}: nothing to reap (nothing was created)\n`);
    return EXIT.ok;
  };
  const print = (r: LeaseReconcileReport) => {
    if (json) io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, ...r, entries: r.entries.map(entryJson) }));
    else io.out(formatReport(r));
    return EXIT.ok;
  };
  if (dryRun) {
    const deps = await openReadOnly(stateDir, facts);
    if (!deps) return nothing();
    const holder = await gatewayHolder(stateDir, facts);
    if (holder.held && !json) {
      io.out(`a gateway${holder.holderPid !== null ? ` (pid ${holder.holderPid})` : ""} holds this state dir: reap would refuse without --force; with --force it would do this:\n`);
    }
    return print(await reconcileLeases(deps, { dryRun: true, skipAttached: attachedGuard(holder.held) }));
  }
  const w = await openWriter(stateDir, facts, graceMs ?? DEFAULT_GRACE_MS, force);
  if (w.kind === "none") return nothing();
  if (w.kind === "locked") {
    const who = w.holderPid !== null ? ` (pid ${w.holderPid})` : "";
    io.err(`proclease reap: a gateway${who} holds ${stateDir}; it reaps its own leases. Stop it first, or pass --force to reap only what no live gateway can be using\n`);
    return EXIT.failed;
  }
  try {
    return print(await reconcileLeases(w.deps, { skipAttached: attachedGuard(w.lock === null), retentionMs: DEFAULT_RETENTION_MS }));
  } finally {
    await w.lock?.release();
  }
}

/** The JSON row of one lease: the outcome without the full verification object (its evidence is already there). */
export function entryJson(o: LeaseOutcome): Omit<LeaseOutcome, "verification"> {
  const { verification: _v, ...rest } = o;
  return rest;
}

/** A dry run says what would happen, in one form; a real run says what happened and the state it left. */
const WOULD: Record<LeaseOutcome["action"], string> = {
  reaped: "reap the verified tree",
  "reaped-remnants": "reap the remnants",
  "marked-lost": "mark it lost (no signal)",
  settled: "settle it closed (no signal)",
  "left-alone": "leave it",
  "skipped-live": "skip it",
};

export function formatReport(r: LeaseReconcileReport): string {
  let out =
    `${r.dryRun ? "dry run: " : ""}examined ${plural(r.examined, "open/closing lease")} ` +
    `of instance ${r.gatewayInstanceId} in ${r.elapsedMs} ms (${plural(r.snapshots, "snapshot")})\n`;
  const rows = r.dryRun ? [["LEASE", "ROOT", "VERDICT", "WOULD", "STATE", "WHY"]] : [["LEASE", "ROOT", "VERDICT", "ACTION", "STATE", "REAPED"]];
  for (const e of r.entries) {
    const root = String(e.rootPid || "-");
    const state = e.stateBefore === e.stateAfter ? `${e.stateAfter} (unchanged)` : `${e.stateBefore}→${e.stateAfter}`;
    if (r.dryRun) {
      const what = e.wouldReap ? `${WOULD[e.action]}: ${e.wouldReap.join(" ")}` : WOULD[e.action];
      rows.push([e.leaseId, root, e.verdict, what, state, e.why]);
    } else {
      rows.push([e.leaseId, root, e.verdict, e.action, state, e.reap ? e.reap.results.map((m) => `${m.pid}:${m.outcome}`).join(" ") : ""]);
    }
  }
  if (r.entries.length > 0) out += table(rows);
  if (r.expired.length > 0) out += `retention removed ${plural(r.expired.length, "settled lease")}\n`;
  for (const p of r.problems) out += `problem: ${p.file}: ${p.detail}\n`;
  return out;
}
