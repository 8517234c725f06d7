/**
 * `proclease leases [--state-dir D] [--json] [--backend NAME]`: every lease in the state dir
 * with its recorded state and its live verdict, all verified against ONE
 * process snapshot, and the memory figures of each lease's own cgroup (or why
 * not, once per report). Read-only: it never signals and never changes a lease.
 *
 * The state dir defaults to $PROCLEASE_STATE_DIR, else ~/.proclease.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { getProcessFacts } from "../../facts/get.js";
import { openLeaseStore, verifyLeases } from "../../ownership/index.js";
import type { LeaseVerification } from "../../ownership/verify/verify.js";
import type { ProcessFacts } from "../../facts/types.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import {
  flag,
  jsonLine,
  printableDeep,
  resolveStateDir,
  table,
  type CliIo,
  type ParsedArgs,
  factsHead,
} from "../shared/io.js";
import { endedCell, endedLegend, formatBytes, leaseMemory, memoryWhyLines } from "../shared/lease-view.js";

/** Leases of the state dir plus their live verdicts; null when the dir holds no lease store. */
export async function loadVerifiedLeases(
  stateDir: string,
  facts: ProcessFacts = getProcessFacts(),
): Promise<{ verifications: LeaseVerification[]; problems: { file: string; detail: string }[] } | null> {
  if (!existsSync(join(stateDir, "acpx", "leases"))) return null;
  // read-only: a corrupt file is reported, never moved (only a writer quarantines)
  const store = await openLeaseStore(stateDir, { readOnly: true });
  const { leases, problems } = await store.list();
  const verifications = leases.length > 0 ? await verifyLeases(leases, facts) : [];
  return { verifications, problems: problems.map((p) => ({ file: p.file, detail: p.detail })) };
}

/** Argument plumbing only; the listing itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  return listLeases(
    { stateDir: resolveStateDir(parsed), facts: factsFromFlag(parsed), json: flag(parsed, "json") },
    io,
  );
}

async function listLeases(
  { stateDir, facts, json }: { stateDir: string; facts: ProcessFacts; json: boolean },
  io: CliIo,
): Promise<number> {
  const read = await loadVerifiedLeases(stateDir, facts);
  const readMemory = await Promise.all((read?.verifications ?? []).map((v) => leaseMemory(v.lease)));
  if (json) {
    io.out(
      jsonLine({
        ...factsHead(facts, stateDir),
        leases: (read?.verifications ?? []).map((v, i) => ({
          ...v.lease,
          verdict: v.verdict,
          evidence: v.evidence,
          ...(readMemory[i] !== undefined ? { memory: readMemory[i] } : {}),
        })),
        problems: read?.problems ?? [],
      }),
    );
    return 0;
  }
  // the records' keys, paths and reasons, escaped for a terminal (JSON above is exact)
  const { loaded, memory } = printableDeep({ loaded: read, memory: readMemory });
  io.out(backendLine(facts));
  if (!loaded) {
    io.out(`no lease store under ${stateDir}\n`);
    return 0;
  }
  io.out(`state dir ${stateDir}: ${loaded.verifications.length} lease(s)\n`);
  // a memory column only where some lease's figures could be read (the reasons otherwise follow the table once)
  const withMemory = memory.some((m) => m?.ok === true);
  const rows = [
    [
      "LEASE",
      "STATE",
      "VERDICT",
      "ROOT",
      "PGID",
      "SESSION",
      "STARTED",
      "ENDED",
      ...(withMemory ? ["MEMORY (PEAK)"] : []),
    ],
  ];
  for (const [i, v] of loaded.verifications.entries()) {
    const l = v.lease;
    const m = memory[i];
    rows.push([
      l.leaseId,
      l.state,
      v.verdict,
      String(l.rootPid || "-"),
      String(l.processGroupId ?? "-"),
      l.sessionKey,
      new Date(l.startedAt).toISOString(),
      endedCell(l),
      ...(withMemory
        ? [m?.ok === true ? `${formatBytes(m.current)} (${m.peak === null ? "-" : formatBytes(m.peak)})` : "-"]
        : []),
    ]);
  }
  io.out(table(rows));
  for (const line of endedLegend(loaded.verifications.map((v) => v.lease))) io.out(`${line}\n`);
  for (const line of memoryWhyLines(loaded.verifications.map((v, i) => ({ lease: v.lease, memory: memory[i] }))))
    io.out(`${line}\n`);
  for (const p of loaded.problems) io.out(`problem: ${p.file}: ${p.detail}\n`);
  return 0;
}
