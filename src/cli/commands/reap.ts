/**
 * `proclease reap [--state-dir D] [--dry-run] [--grace-ms MS] [--json] [--backend NAME]`: the controller's
 * startup reaping, run by an operator: this state dir's open/closing leases
 * only, verified against one snapshot, reaped leaves first, then retention.
 * Trees whose wrapper still has a live parent (a running gateway) are
 * skipped: an operator command must not close sessions a gateway is using.
 */
import { createAcpxLifecycleController } from "../../acpx/controller.js";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { ReapReport } from "../../acpx/types.js";
import type { ProcessFacts } from "../../facts/types.js";
import { INSTANCE_ID_FILE } from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../backend.js";
import { flag, graceMsOption, jsonLine, plural, resolveStateDir, table, type CliIo, type ParsedArgs } from "../io.js";

/** Argument plumbing only; the reaping itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  return reap(
    {
      stateDir: resolveStateDir(parsed),
      graceMs: graceMsOption(parsed),
      dryRun: flag(parsed, "dry-run"),
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
  json: boolean;
  facts: ProcessFacts;
}

async function reap({ stateDir, graceMs, dryRun, json, facts }: ReapArgs, io: CliIo): Promise<number> {
  if (!json) io.out(backendLine(facts));
  // An operator command must not mint state: a dir without an instance id has
  // no leases of any instance to reap (and a typo must not create a second identity).
  if (!existsSync(join(stateDir, INSTANCE_ID_FILE))) {
    if (json) io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, dryRun, examined: 0, entries: [], note: "no gateway instance id in this state dir" }));
    else io.out(`no gateway instance id under ${stateDir}: nothing to reap (nothing was created)\n`);
    return 0;
  }
  const ctl = await createAcpxLifecycleController({ stateDir, facts, maintenanceIntervalMs: 0, ...(graceMs !== undefined ? { graceMs } : {}) });
  try {
    const r = await ctl.reapStartupOrphans({ dryRun, skipAttached: true });
    if (json) {
      io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, ...r }));
      return 0;
    }
    io.out(formatReport(r));
    return 0;
  } finally {
    await ctl.dispose();
  }
}

/** A dry run says only what would happen, in one phrase per lease (no state arrows, no past tense). */
function wouldText(e: ReapReport["entries"][number]): string {
  const action: string = e.action;
  switch (action) {
    case "reaped":
    case "would-reap":
      return `reap the verified processes, then settle the lease (${e.stateAfter})`;
    case "reaped-remnants":
      return `reap the remnants, then settle the lease (${e.stateAfter})`;
    case "marked-lost":
    case "would-mark-lost":
      return "mark the lease lost; no signal";
    case "settled":
      return `mark the lease ${e.stateAfter}; no signal`;
    case "skipped-live":
      return "skip it: its gateway is alive";
    case "left-alone":
      return `leave it ${e.stateBefore}; no signal`;
    default:
      return action;
  }
}

export function formatReport(r: ReapReport): string {
  let out =
    `${r.dryRun ? "dry run: " : ""}examined ${plural(r.examined, "open/closing lease")} ` +
    `of instance ${r.gatewayInstanceId} in ${r.elapsedMs} ms (${plural(r.snapshots, "snapshot")})\n`;
  const rows = r.dryRun ? [["LEASE", "ROOT", "VERDICT", "WOULD"]] : [["LEASE", "ROOT", "VERDICT", "ACTION", "STATE", "REAPED"]];
  for (const e of r.entries) {
    const root = String(e.rootPid || "-");
    if (r.dryRun) rows.push([e.leaseId, root, e.verdict, wouldText(e)]);
    else {
      rows.push([
        e.leaseId,
        root,
        e.verdict,
        e.action,
        e.stateBefore === e.stateAfter ? `${e.stateAfter} (unchanged)` : `${e.stateBefore}→${e.stateAfter}`,
        e.reap ? e.reap.members.map((m) => `${m.pid}:${m.outcome}`).join(" ") : "",
      ]);
    }
  }
  if (r.entries.length > 0) out += table(rows);
  if (r.expired.length > 0) out += `retention removed ${plural(r.expired.length, "settled lease")}\n`;
  for (const p of r.problems) out += `problem: ${p.file}: ${p.detail}\n`;
  return out;
}
