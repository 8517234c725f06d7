/**
 * `proclease reap [--state-dir D] [--dry-run] [--json]`: the controller's
 * startup reaping, run by an operator: this state dir's open/closing leases
 * only, verified against one snapshot, reaped leaves first, then retention.
 * Trees whose wrapper still has a live parent (a running gateway) are
 * skipped: an operator command must not close sessions a gateway is using.
 */
import { createAcpxLifecycleController } from "../../acpx/controller.js";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { getProcessFacts } from "../../facts/get.js";
import { INSTANCE_ID_FILE } from "../../ownership/index.js";
import { parseArgs, UsageError, type CliIo } from "../io.js";
import { backendLine } from "./ps.js";
import { resolveStateDir, table } from "./leases.js";

export async function run(args: readonly string[], io: CliIo): Promise<number> {
  const { flags } = parseArgs(args, { booleans: ["dry-run", "json"], strings: ["state-dir", "grace-ms"] });
  const stateDir = resolveStateDir(flags["state-dir"]);
  const graceFlag = flags["grace-ms"];
  const graceMs = typeof graceFlag === "string" ? Number(graceFlag) : undefined;
  if (graceMs !== undefined && !(Number.isFinite(graceMs) && graceMs >= 0)) throw new UsageError(`--grace-ms must be a number of milliseconds >= 0, got ${JSON.stringify(graceFlag)}`);
  const facts = getProcessFacts();
  if (!flags.json) io.out(backendLine(facts));
  // An operator command must not mint state: a dir without an instance id has
  // no leases of any instance to reap (and a typo must not create a second identity).
  if (!existsSync(join(stateDir, INSTANCE_ID_FILE))) {
    if (flags.json) io.out(`${JSON.stringify({ backend: facts.backend, stateDir, examined: 0, entries: [], note: "no gateway instance id in this state dir" })}\n`);
    else io.out(`no gateway instance id under ${stateDir}: nothing to reap (nothing was created)\n`);
    return 0;
  }
  const ctl = await createAcpxLifecycleController({ stateDir, facts, maintenanceIntervalMs: 0, ...(graceMs !== undefined ? { graceMs } : {}) });
  try {
    const r = await ctl.reapStartupOrphans({ dryRun: flags["dry-run"] === true, skipAttached: true });
    if (flags.json) {
      io.out(`${JSON.stringify({ backend: facts.backend, identityStrength: facts.identityStrength, ...r }, null, 2)}\n`);
      return 0;
    }
    io.out(
      `${r.dryRun ? "dry run: " : ""}examined ${r.examined} open/closing lease(s) of instance ${r.gatewayInstanceId} ` +
        `in ${r.elapsedMs} ms (${r.snapshots} snapshot)\n`,
    );
    const rows = [["LEASE", "ROOT", "VERDICT", "ACTION", "STATE", "REAPED"]];
    for (const e of r.entries) {
      rows.push([
        e.leaseId,
        String(e.rootPid || "-"),
        e.verdict,
        e.action,
        `${e.stateBefore}→${e.stateAfter}`,
        e.reap ? e.reap.members.map((m) => `${m.pid}:${m.outcome}`).join(" ") : "",
      ]);
    }
    if (r.entries.length > 0) io.out(table(rows));
    if (r.expired.length > 0) io.out(`retention removed ${r.expired.length} settled lease(s)\n`);
    for (const p of r.problems) io.out(`problem: ${p.file}: ${p.detail}\n`);
    return 0;
  } finally {
    await ctl.dispose();
  }
}
