/**
 * `proclease leases [--state-dir D] [--json]`: every lease in the state dir
 * with its recorded state and its live verdict, all verified against ONE
 * process snapshot. Read-only: it never signals and never changes a lease.
 *
 * The state dir defaults to $PROCLEASE_STATE_DIR, else ~/.proclease.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { getProcessFacts } from "../../facts/get.js";
import { openLeaseStore, verifyLeases } from "../../ownership/index.js";
import type { LeaseVerification } from "../../ownership/verify.js";
import type { ProcessFacts } from "../../facts/types.js";
import { parseArgs, type CliIo } from "../io.js";
import { backendLine } from "./ps.js";

export function resolveStateDir(flag: string | boolean | string[] | undefined): string {
  if (typeof flag === "string" && flag.length > 0) return resolve(flag);
  const env = process.env.PROCLEASE_STATE_DIR;
  if (env) return resolve(env);
  return join(homedir(), ".proclease");
}

/** Leases of the state dir plus their live verdicts; null when the dir holds no lease store. */
export async function loadVerifiedLeases(
  stateDir: string,
  facts: ProcessFacts = getProcessFacts(),
): Promise<{ verifications: LeaseVerification[]; problems: { file: string; detail: string }[] } | null> {
  if (!existsSync(join(stateDir, "acpx", "leases"))) return null;
  const store = await openLeaseStore(stateDir);
  const { leases, problems } = await store.list();
  const verifications = leases.length > 0 ? await verifyLeases(leases, facts) : [];
  return { verifications, problems: problems.map((p) => ({ file: p.file, detail: p.detail })) };
}

export function table(rows: string[][]): string {
  if (rows.length === 0) return "";
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n") + "\n";
}

export async function run(args: readonly string[], io: CliIo): Promise<number> {
  const { flags } = parseArgs(args, { booleans: ["json"], strings: ["state-dir"] });
  const stateDir = resolveStateDir(flags["state-dir"]);
  const facts = getProcessFacts();
  const loaded = await loadVerifiedLeases(stateDir, facts);
  if (flags.json) {
    io.out(
      `${JSON.stringify(
        {
          backend: facts.backend,
          identityStrength: facts.identityStrength,
          stateDir,
          leases: (loaded?.verifications ?? []).map((v) => ({ ...v.lease, verdict: v.verdict, evidence: v.evidence })),
          problems: loaded?.problems ?? [],
        },
        null,
        2,
      )}\n`,
    );
    return 0;
  }
  io.out(backendLine(facts));
  if (!loaded) {
    io.out(`no lease store under ${stateDir}\n`);
    return 0;
  }
  io.out(`state dir ${stateDir}: ${loaded.verifications.length} lease(s)\n`);
  const rows = [["LEASE", "STATE", "VERDICT", "ROOT", "PGID", "SESSION", "STARTED"]];
  for (const v of loaded.verifications) {
    const l = v.lease;
    rows.push([
      l.leaseId,
      l.state,
      v.verdict,
      String(l.rootPid || "-"),
      String(l.processGroupId ?? "-"),
      l.sessionKey,
      new Date(l.startedAt).toISOString(),
    ]);
  }
  io.out(table(rows));
  for (const p of loaded.problems) io.out(`problem: ${p.file}: ${p.detail}\n`);
  return 0;
}
