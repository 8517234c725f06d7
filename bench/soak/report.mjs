// The soak's report: the endings the run drew, and the details of every
// failed assertion, each naming the session, its lease's state on disk and
// the last reap's evidence about it (bench/soak.mjs computes the checks).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CHURN_NICE } from "./bystanders.mjs";
import { ENDINGS, isEscapeeCrash } from "./plan.mjs";
import { cmdline } from "./proc.mjs";

/** How each planned ending went: counts, collateral and late kills, failed ensures, and the closes' outcomes. */
export function printEndings(results, seed) {
  console.log(`\n## endings (seed ${seed})`);
  const byEnding = {};
  for (const r of results) {
    const k = r.s.ending;
    const e = (byEnding[k] ??= { n: 0, collateral: 0, late: 0, ensureFailed: 0, closes: {} });
    e.n++;
    if (r.collateral) e.collateral++;
    if (r.kill?.late) e.late++;
    if (r.ensure === "failed") e.ensureFailed++;
    for (const c of r.closes) {
      const o = `${c.handleOf ? "stale-handle " : ""}${c.report?.outcome ?? c.ev}`;
      e.closes[o] = (e.closes[o] ?? 0) + 1;
    }
  }
  for (const k of Object.keys(ENDINGS)) {
    const e = byEnding[k];
    if (!e) continue;
    const closes = Object.entries(e.closes)
      .map(([o, n]) => `${o} ${n}`)
      .join(", ");
    console.log(
      `  ${k.padEnd(22)} ${String(e.n).padStart(4)}${e.collateral ? `  collateral ${e.collateral}` : ""}${e.late ? `  kill late ${e.late}` : ""}${e.ensureFailed ? `  ensure failed ${e.ensureFailed}` : ""}${closes ? `  closes: ${closes}` : ""}`,
    );
  }
}

/** The run's figures: sessions and their rate, reap times, step medians, processes, faults, leases, bystanders, containment, escapees. */
export function printFigures(f) {
  const { opts, results, incarnations, disk, verdicts, stepTimes, faults, faultedSteps, faultedCloses } = f;
  const {
    ran,
    totalSeconds,
    runSeconds,
    finalRec,
    peakProcs,
    baselineProcs,
    pidsAssigned,
    containmentOn,
    containmentMixed,
  } = f;
  const reapTimes = incarnations.filter((i) => i.reapMs !== null).map((i) => i.reapMs);
  const sorted = [...reapTimes].sort((a, b) => a - b);
  const q = (f) => sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))] ?? NaN;
  const states = {};
  for (const l of disk.values()) states[l.state] = (states[l.state] ?? 0) + 1;
  console.log(`\n## figures`);
  console.log(`  sessions            ${ran} run of ${opts.sessions} planned over ${incarnations.length} incarnations`);
  console.log(`  wall                ${totalSeconds.toFixed(1)} s (sessions phase ${runSeconds.toFixed(1)} s)`);
  console.log(`  sessions/s          ${(ran / runSeconds).toFixed(2)}`);
  console.log(
    `  reap per incarnation  min ${q(0).toFixed(0)} ms  median ${q(0.5).toFixed(0)} ms  p95 ${q(0.95).toFixed(0)} ms  max ${q(1).toFixed(0)} ms; final ${finalRec?.reapMs?.toFixed(0) ?? "?"} ms (examined ${finalRec?.examined ?? "?"})`,
  );
  const med = (xs) => (xs.length ? [...xs].sort((a, b) => a - b)[xs.length >> 1] : NaN);
  console.log(
    `  step medians        ${Object.entries(stepTimes)
      .map(([k, v]) => `${k} ${med(v).toFixed(0)} ms (${v.length})`)
      .join(", ")}`,
  );
  console.log(`  peak processes      ${peakProcs} (baseline ${baselineProcs} before the soak)`);
  if (faults) {
    const f = faults.summary();
    console.log(
      `  fault windows       ${f.count} (ENOSPC ${f.by.ENOSPC}, EMFILE ${f.by.EMFILE}), ${f.seconds.toFixed(1)} s under a fault; ${faultedSteps} step(s) failed naming the fault, ${faultedCloses.length} clean close(s) left pending by it`,
    );
  }
  console.log(
    `  process churn       ${(pidsAssigned / totalSeconds).toFixed(0)} new pids/s system-wide (churn loops: ${opts.churn}, nice ${CHURN_NICE})`,
  );
  const keysWithLease = new Set([...disk.values()].map((l) => l.sessionKey));
  const noLease = results.filter((r) => r.ran && !keysWithLease.has(r.s.key)).length;
  console.log(
    `  leases              ${disk.size} (${
      Object.entries(states)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ") || "none"
    })${noLease ? `; ${noLease} session(s) wrote none (killed before the lease write)` : ""}`,
  );
  console.log(
    `  bystanders          ${verdicts.length} (${verdicts.filter((v) => v.kind === "twin").length} twins carrying real lease ids, ${verdicts.filter((v) => v.kind === "group").length} in gateways' own groups)`,
  );
  const cancels = results.reduce((n, r) => n + r.cancels, 0);
  if (cancels) console.log(`  cancelTurn calls    ${cancels}`);
  const contained = [...disk.values()].filter((l) => l.cgroup?.path).length;
  console.log(
    `  containment         ${containmentOn ? "on" : containmentMixed ? "MIXED" : "off"} (asked: ${opts.containment}); ${contained} of ${disk.size} leases recorded a cgroup`,
  );
  const scrubbed = results.filter((r) => r.ran && r.s.variant.envScrub);
  const crashes = scrubbed.filter((r) => isEscapeeCrash(r.s));
  const crashStates = {};
  for (const r of crashes)
    for (const id of r.leaseIds)
      crashStates[disk.get(id)?.state ?? "missing"] = (crashStates[disk.get(id)?.state ?? "missing"] ?? 0) + 1;
  console.log(
    `  env-scrub escapees  ${scrubbed.length} sessions ran with one (${scrubbed.filter((r) => r.escapees.length).length} escapees seen by pid before a kill or close); ` +
      `${crashes.length} had gateway+wrapper SIGKILLed while it ran, their leases: ${
        Object.entries(crashStates)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "none"
      }`,
  );
}

/**
 * Every failure in detail. `d` holds what the checks found (orphanList,
 * outlived, escaped, foreign, unaccounted, unsettled, apiUnsettled,
 * cgroupsLeft, quarantine, reapProblems, badClean, stepErrors, harness,
 * notRun) and what names them (results, disk, lastReapEntry, verdicts,
 * instanceId, escapedOrphans, containmentOn).
 */
export function printFailures(d) {
  const n = namers(d);
  printProcessFailures(d, n);
  printLeaseFailures(d, n);
  printStepFailures(d, n);
}

/** Who a lease or a pid is, in the report's words: its session, its last reap entry, a bystander it names. */
function namers({ results, disk, lastReapEntry, verdicts }) {
  const whose = (leaseId) =>
    results.find((r) => r.leaseIds.has(leaseId)) ?? results.find((r) => r.s.key === disk.get(leaseId)?.sessionKey);
  const sessionTag = (r) =>
    r
      ? `#${r.s.sid} ${r.s.ending}${r.s.point ? `@${r.s.point}` : ""} ${variantTag(r.s.variant)} inc ${r.incarnation}`
      : "no session";
  const evidenceOf = (leaseId) => {
    const e = lastReapEntry.get(leaseId);
    const bad = e?.evidence?.filter((x) => x.result !== "match") ?? [];
    return e
      ? `last reap (inc ${e.incarnation}): ${e.action} ${e.stateBefore}→${e.stateAfter} verdict ${e.verdict}${e.why ? `; why: ${e.why}` : ""}${bad.length ? `; evidence: ${bad.map((x) => `${x.check}=${x.result}${x.detail ? ` (${x.detail})` : ""}`).join("; ")}` : ""}`
      : "never in a reap report";
  };
  // name the soak's own bystanders where the library's evidence names their pids
  const byPid = new Map(verdicts.map((v) => [v.pid, v.name]));
  const whoIs = (text) => {
    const named = [...new Set([...String(text).matchAll(/\b(\d{2,})\b/g)].map((m) => Number(m[1])))].filter((pid) =>
      byPid.has(pid),
    );
    return named.length
      ? `      (soak bystanders named above: ${named.map((pid) => `${pid} = ${byPid.get(pid)}`).join(", ")})`
      : null;
  };
  const printWho = (text) => {
    const w = whoIs(text);
    if (w) console.log(w);
  };
  return { whose, sessionTag, evidenceOf, whoIs, printWho };
}

function printProcessFailures(
  { orphanList, outlived, escaped, escapedOrphans, containmentOn, foreign, results, disk, instanceId },
  { whose, sessionTag, evidenceOf },
) {
  if (orphanList.length || outlived.length) {
    console.log(`\n## orphans`);
    for (const p of orphanList) {
      const r = whose(p.lease);
      console.log(
        `  pid ${p.pid} ppid ${p.ppid} pgid ${p.pgid} ${p.state} ${p.comm} start ${p.startTime} lease ${p.lease} instance ${p.instance === instanceId ? "ours" : p.instance}`,
      );
      console.log(`      argv ${JSON.stringify(p.argv)}`);
      console.log(
        `      session ${sessionTag(r)}; lease ${disk.get(p.lease)?.state ?? "not on disk"}; ${evidenceOf(p.lease)}`,
      );
    }
    for (const p of outlived)
      console.log(
        `  outlived: ${p.role} pid ${p.pid} (start ${p.startTime}) of session ${sessionTag(p.r)}: ${JSON.stringify(cmdline(p.pid))}`,
      );
  }
  if (escaped.length) {
    console.log(
      `\n## env-scrubbed escapees alive at the end (${escapedOrphans.length ? (containmentOn ? "orphans: containment was on" : "orphans: containment was expected here and is off") : "the documented limit without containment"})`,
    );
    for (const p of escaped) {
      const r = p.session === null ? null : results[Number.parseInt(p.session, 10)];
      console.log(
        `  pid ${p.pid} ppid ${p.ppid} sid ${p.sid} ${p.state} argv ${JSON.stringify(p.argv)} | session ${p.session ?? "unknown (planted?)"} ${r ? sessionTag(r) : ""}`,
      );
      for (const id of r?.leaseIds ?? [])
        console.log(
          `      lease ${id} ${disk.get(id)?.state ?? "not on disk"}${disk.get(id)?.cgroup ? ` cgroup ${disk.get(id).cgroup.path}` : " (no cgroup)"}; ${evidenceOf(id)}`,
        );
    }
  }
  if (foreign.length) {
    console.log(`\n## bystanders signalled or gone`);
    for (const v of foreign) console.log(`  ${v.name} pid ${v.pid}: ${v.problems.join("; ")}`);
  }
}

function printLeaseFailures(
  { unaccounted, unsettled, apiUnsettled, cgroupsLeft, quarantine, reapProblems, lastReapEntry },
  { whose, sessionTag, evidenceOf, whoIs, printWho },
) {
  if (unaccounted.length) {
    console.log(`\n## unaccounted`);
    for (const u of unaccounted) console.log(`  ${u}`);
  }
  if (unsettled.length || apiUnsettled.length) {
    console.log(`\n## unsettled leases`);
    for (const l of [...unsettled, ...apiUnsettled]) {
      console.log(
        `  ${l.leaseId} ${l.state} rootPid ${l.rootPid} key ${l.sessionKey} | ${sessionTag(whose(l.leaseId))}`,
      );
      console.log(`      ${evidenceOf(l.leaseId)}`);
      printWho(evidenceOf(l.leaseId));
    }
  }
  if (unsettled.length) {
    // one line per distinct reason the last reap gave (pids and counts folded), so a run's causes read at a glance
    const causes = new Map();
    for (const l of unsettled) {
      const e = lastReapEntry.get(l.leaseId);
      const why = (e?.why ?? "never in a reap report").replace(/\[[^\]]*\]/g, "[…]").replace(/\d+/g, "N");
      const named = whoIs(e?.why ?? "");
      const key = `${why}${named ? " — names a soak bystander" : ""}`;
      causes.set(key, (causes.get(key) ?? 0) + 1);
    }
    console.log(`\n## why leases stayed unsettled (last reap's reason)`);
    for (const [why, n] of [...causes].sort((a, b) => b[1] - a[1])) console.log(`  ${String(n).padStart(4)} × ${why}`);
  }
  if (cgroupsLeft.length) {
    console.log(`\n## lease cgroups left behind`);
    for (const l of cgroupsLeft) {
      let events = "?";
      try {
        events = readFileSync(join(l.cgroup.path, "cgroup.events"), "utf8").trim().replace(/\n/g, ", ");
      } catch {}
      console.log(`  ${l.cgroup.path} (${events}) lease ${l.leaseId} ${l.state} | ${sessionTag(whose(l.leaseId))}`);
      console.log(`      ${evidenceOf(l.leaseId)}`);
    }
  }
  if (quarantine.length || reapProblems.length) {
    console.log(`\n## quarantine / refused files`);
    for (const f of quarantine) console.log(`  ${f}`);
    for (const p of reapProblems) console.log(`  ${p}`);
  }
}

function printStepFailures({ badClean, stepErrors, harness, notRun, disk }, { sessionTag, evidenceOf, printWho }) {
  if (badClean.length) {
    console.log(`\n## clean closes that did not settle "closed"`);
    for (const { c, r } of badClean) {
      const id = c.report?.leaseId;
      console.log(
        `  ${sessionTag(r)} lease ${id ?? "?"}: ${c.ev} ${c.report ? `${c.report.outcome} (${c.report.leaseState}): ${c.report.detail}` : `${c.error?.name}: ${c.error?.message}`}; on disk ${disk.get(id)?.state ?? "missing"}`,
      );
      const bad = (c.report?.evidence ?? []).filter((x) => x.result !== "match");
      if (bad.length)
        console.log(
          `      evidence: ${bad.map((x) => `${x.check}=${x.result}${x.detail ? ` (${x.detail})` : ""}`).join("; ")}`,
        );
      const rp = c.report?.kill;
      if (rp)
        console.log(
          `      kill: members ${rp.members.join(" ") || "none"}; TERM ${rp.termSent}, KILL ${rp.killSent}; survivors ${rp.survivors.join(" ") || "none"}`,
        );
      if (id) console.log(`      then ${evidenceOf(id)}`);
      printWho(`${c.report?.detail ?? ""} ${id ? evidenceOf(id) : ""}`);
    }
  }
  if (stepErrors.length) {
    console.log(`\n## scripted steps`);
    for (const r of stepErrors) {
      for (const e of r.errors) {
        console.log(`  ${sessionTag(r)}: ${e}`);
        printWho(e);
      }
    }
  }
  if (harness.length || notRun.length) {
    console.log(`\n## harness`);
    for (const h of harness) console.log(`  ${h}`);
    for (const r of notRun) console.log(`  session #${r.s.sid} never ran`);
  }
}

function variantTag(v) {
  return `[${v.stubborn ? "stubborn" : "coop"}${v.surviveStdinClose ? "+survive" : ""} gc=${v.grandchild}${v.envScrub ? " +env-scrub-escapee" : ""} ${v.turn}${v.crashOn ? ` crash-on=${v.crashOn}` : ""}]`;
}
