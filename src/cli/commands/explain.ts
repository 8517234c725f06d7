/**
 * `proclease explain <leaseId|pid> [--state-dir D] [--json] [--backend NAME]`: the evidence
 * table for one lease (by id, or the open/closing lease whose root, verified tree or remnants
 * hold the pid) and what cleanup would do with it. It asks the lifecycle `reap` uses
 * (reconcileLeases, as a dry run), so the two cannot disagree. Read-only: nothing is signalled,
 * nothing is written. A lease with its own cgroup also shows memory.current and memory.peak, or
 * why they cannot be read (`memory: {ok: false, code, why}` in --json).
 */
import type { ProcessFacts } from "../../facts/types.js";
import { reconcileLeases, settledLine, type LeaseOutcome } from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import {
  EXIT,
  flag,
  jsonLine,
  printableDeep,
  resolveStateDir,
  table,
  type CliIo,
  type ParsedArgs,
  factsHead,
} from "../shared/io.js";
import { attachedGuard, gatewayHolder, leaseMemory, memoryFigures, openReadOnly } from "../shared/lease-view.js";
import { parsePidArg } from "./inspect.js";
import { entryJson } from "./reap.js";
import { waitingOf } from "../../acpx/durable/waiting.js";

/** Argument plumbing only; the explanation itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const target = parsed.positionals[0]!;
  // a pid is checked before anything is read, so a bad one is a usage error
  const pid = /^\d+$/.test(target) ? parsePidArg(target) : null;
  return explain(
    { target, pid, stateDir: resolveStateDir(parsed), facts: factsFromFlag(parsed), json: flag(parsed, "json") },
    io,
  );
}

async function explain(
  {
    target,
    pid,
    stateDir,
    facts,
    json,
  }: { target: string; pid: number | null; stateDir: string; facts: ProcessFacts; json: boolean },
  io: CliIo,
): Promise<number> {
  const deps = await openReadOnly(stateDir, facts);
  if (!json) io.out(backendLine(facts));
  let o: LeaseOutcome | undefined;
  if (deps) {
    // exactly `reap --dry-run` (and so `reap`): the same options, narrowed to the lease asked about
    const skipAttached = attachedGuard((await gatewayHolder(stateDir, facts)).held);
    const r = await reconcileLeases(
      deps,
      pid !== null ? { dryRun: true, skipAttached } : { dryRun: true, skipAttached, leaseIds: [target] },
    );
    o = pid !== null ? r.entries.find((e) => names(e, pid)) : r.entries[0];
  }
  if (!o) {
    const what =
      pid !== null
        ? `pid ${pid} is not named by any open or closing lease (nor in a verified tree or its remnants)`
        : `no lease ${JSON.stringify(target)}`;
    if (json)
      io.out(
        jsonLine({
          ...factsHead(facts, stateDir),
          found: false,
          target,
          conclusion: `${what}; cleanup would never signal it`,
        }),
      );
    else io.err(`proclease explain: ${what} in ${stateDir}; cleanup would never signal it\n`);
    return EXIT.failed;
  }
  const l = o.verification.lease;
  const waiting = o.verdict === "owned" && deps ? await waitingOf(stateDir, l, (id) => deps.store.get(id)) : null;
  // a waiting durable session: what a gateway does with it, then what reap would do
  const conclusion = `${waiting !== null ? `${l.kind === "supervisor" ? "waits with a durable session" : "a durable session that awaits re-adoption"}: ${waiting.why}. ` : ""}${conclude(o)}`;
  const memory = await leaseMemory(l);
  if (json) {
    io.out(
      jsonLine({
        ...factsHead(facts, stateDir),
        found: true,
        lease: l,
        ...entryJson(o),
        ...(memory !== undefined ? { memory } : {}),
        ...(waiting !== null ? { waiting } : {}),
        conclusion,
      }),
    );
    return EXIT.ok;
  }
  printEvidence(printableDeep({ o, memory, conclusion }), io);
  return EXIT.ok;
}

/** The text form; what it is given came from the lease and the processes, already escaped (printableDeep). */
function printEvidence(
  { o, memory, conclusion }: { o: LeaseOutcome; memory: Awaited<ReturnType<typeof leaseMemory>>; conclusion: string },
  io: CliIo,
): void {
  const l = o.verification.lease;
  const mem = memory === undefined ? "" : memory.ok ? memoryFigures(memory) : `not shown: ${memory.why}`;
  const settled = settledLine(l);
  io.out(
    `lease ${l.leaseId}  state ${l.state}  session ${l.sessionKey}\n` +
      (settled !== null ? `${settled}\n` : "") +
      `root pid ${l.rootPid || "-"}  pgid ${l.processGroupId ?? "-"}  start ${l.rootStartTime ?? "-"}  wrapper ${l.wrapperPath || "-"}\n` +
      (l.cgroup ? `cgroup ${l.cgroup.path} (id ${l.cgroup.id})\nmemory ${mem}\n` : "") +
      "\n",
  );
  const rows = [["CHECK", "RESULT", "DETAIL"]];
  for (const e of o.evidence) rows.push([e.check, e.result, e.detail ?? ""]);
  io.out(table(rows));
  io.out(`\nverdict: ${o.verdict}\n${conclusion}\n`);
}

/** Does this lease name the pid: its root, a verified member, or a remnant? */
function names(o: LeaseOutcome, pid: number): boolean {
  const v = o.verification;
  return (
    o.rootPid === pid ||
    (o.wouldKill ?? []).includes(pid) ||
    (v.tree ?? v.remnants)?.members.some((m) => m.pid === pid) === true
  );
}

/** What `proclease reap` (and the gateway's own startup reap) would do, from the dry run's outcome. */
function conclude(o: LeaseOutcome): string {
  const who = o.verification.lease.kind === "supervisor" ? "a process-supervisor run; " : "";
  if (o.stateBefore === "closed" || o.stateBefore === "lost")
    return `${who}already ${o.stateBefore}; nothing would be done`;
  if (o.action === "skipped-live") return `${who}cleanup leaves it alone: ${o.why}`;
  if (o.wouldKill) {
    const what =
      o.target === "tree"
        ? "the verified tree"
        : "the remnants (the wrapper is gone; these still carry the lease id and instance id)";
    return `${who}cleanup would SIGTERM ${what}, leaves first (${o.wouldKill.join(" ")}), SIGKILL what is left after the grace period (each identity re-checked before its signal), then mark the lease closed (it stays closing if any may still run)`;
  }
  const signal = o.verdict === "owned" ? "" : "cleanup sends no signal; ";
  return o.stateAfter === o.stateBefore
    ? `${who}${signal}the lease stays ${o.stateBefore} (${o.why})`
    : `${who}${signal}the lease would go to ${o.stateAfter} (${o.why})`;
}
