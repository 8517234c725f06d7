/**
 * `proclease explain <leaseId|pid> [--state-dir D] [--json] [--backend NAME]`: the evidence
 * table for one lease (by id, or the lease whose verified tree or remnants hold the pid)
 * and what cleanup would therefore do. Read-only: nothing is signalled.
 */
import type { ProcessFacts } from "../../facts/types.js";
import { isSupervisorLease, settlementFor, type LeaseVerification } from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../backend.js";
import { EXIT, flag, jsonLine, resolveStateDir, table, type CliIo, type ParsedArgs } from "../io.js";
import { parsePidArg } from "./inspect.js";
import { loadVerifiedLeases } from "./leases.js";

/** Argument plumbing only; the explanation itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const target = parsed.positionals[0]!;
  // a pid is checked before anything is read, so a bad one is a usage error
  const pid = /^\d+$/.test(target) ? parsePidArg(target) : null;
  return explain({ target, pid, stateDir: resolveStateDir(parsed), facts: factsFromFlag(parsed), json: flag(parsed, "json") }, io);
}

async function explain(
  { target, pid, stateDir, facts, json }: { target: string; pid: number | null; stateDir: string; facts: ProcessFacts; json: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = await loadVerifiedLeases(stateDir, facts);
  if (!json) io.out(backendLine(facts));
  const all = loaded?.verifications ?? [];

  let matches: LeaseVerification[];
  if (pid !== null) {
    matches = all.filter((v) => v.lease.rootPid === pid || (v.tree ?? v.remnants)?.members.some((m) => m.pid === pid));
    // prefer the lease that is still live over settled ones that once named the pid
    matches.sort((a, b) => rank(a) - rank(b));
    matches = matches.slice(0, 1);
  } else {
    matches = all.filter((v) => v.lease.leaseId === target);
  }
  const v = matches[0];
  if (!v) {
    const what = pid !== null ? `pid ${pid} is not named by any lease (nor in a verified tree or its remnants)` : `no lease ${JSON.stringify(target)}`;
    if (json) io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, found: false, target, conclusion: `${what}; cleanup would never signal it` }));
    else io.err(`proclease explain: ${what} in ${stateDir}; cleanup would never signal it\n`);
    return EXIT.failed;
  }

  // found in the same verification pass as the verdict (one snapshot); a settled lease is never reaped
  const remnantPids = rank(v) === 0 ? (v.remnants?.members.map((m) => m.pid) ?? []) : [];
  const conclusion = conclude(v, remnantPids);
  if (json) {
    io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, stateDir, found: true, lease: v.lease, verdict: v.verdict, evidence: v.evidence, members: v.tree?.members ?? [], remnants: remnantPids, conclusion }));
    return 0;
  }
  const l = v.lease;
  io.out(
    `lease ${l.leaseId}  state ${l.state}  session ${l.sessionKey}\n` +
      `root pid ${l.rootPid || "-"}  pgid ${l.processGroupId ?? "-"}  start ${l.rootStartTime ?? "-"}  wrapper ${l.wrapperPath}\n\n`,
  );
  const rows = [["CHECK", "RESULT", "DETAIL"]];
  for (const e of v.evidence) rows.push([e.check, e.result, e.detail ?? ""]);
  io.out(table(rows));
  if (v.tree) io.out(`\nverified members (kill order): ${v.tree.members.map((m) => m.pid).join(" ")}\n`);
  if (remnantPids.length > 0) io.out(`\nremnants (kill order): ${remnantPids.join(" ")}\n`);
  io.out(`\nverdict: ${v.verdict}\n${conclusion}\n`);
  return 0;
}

function rank(v: LeaseVerification): number {
  return v.lease.state === "open" || v.lease.state === "closing" ? 0 : 1;
}

function conclude(v: LeaseVerification, remnants: number[]): string {
  const settled = v.lease.state === "closed" || v.lease.state === "lost";
  if (isSupervisorLease(v.lease)) {
    return settled
      ? `a process-supervisor run, already ${v.lease.state}; nothing would be done`
      : "a process-supervisor run: `proclease reap` and the ACPX controller never touch it; the supervisor's own reconciliation settles it";
  }
  // remnants exist only for a "gone" verdict (ownership never searches them
  // for a pid that now names another process, nor on unknown evidence)
  if (!settled && remnants.length > 0) {
    return `the wrapper is gone but ${remnants.length} process(es) still carry this lease id and instance id (${remnants.join(" ")}): cleanup would reap them (each identity re-checked) and mark the lease closed once none of them may still run`;
  }
  switch (v.verdict) {
    case "owned":
      return settled
        ? `the lease is already ${v.lease.state}; nothing would be done`
        : `cleanup would SIGTERM these ${v.tree!.members.length} verified process(es) leaves first, SIGKILL what is left after the grace period (each identity re-checked before its signal), then mark the lease closed (it stays closing if any may still run)`;
    case "gone":
      return settled ? `nothing alive; the lease is already ${v.lease.state}` : `nothing verified is alive: cleanup sends no signal; ${settlementText(v)}`;
    case "mismatch":
      return `the live process does not match the lease: cleanup sends NO signal${settled ? "" : `; ${settlementText(v)}`}`;
    default:
      return `ownership cannot be established (unknown evidence): cleanup fails closed and sends no signal${settled ? "" : `; ${settlementText(v)}`}`;
  }
}

/** What the one settlement rule (ownership/settle.ts) would do with this lease when nothing is reaped. */
function settlementText(v: LeaseVerification): string {
  const s = settlementFor(v, null);
  return s.to === "unchanged" ? `the lease stays ${v.lease.state} (${s.why})` : `the lease would go to ${s.to} (${s.why})`;
}
