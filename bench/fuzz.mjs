// The adversarial fuzzer (issue 46, item 6): seeded sequences of hostile-agent
// actions (bench/fuzz/catalog.mjs) run against the lifecycle controller in
// separate gateway processes, each judged against the invariants
// (bench/fuzz/judge.mjs): the gateway alive, its RSS growth ≤ 256 MB, no
// event-loop block over 250 ms, every close within 10 s with nothing left and
// every lease closed or lost, no process outside the sequence harmed, plus
// what the findings add (terminal limit, wrapper integrity, secrets,
// logs, typed errors). A failure is shrunk to the shortest sequence that
// still fails and printed with a command that replays it.
//
//   npm run fuzz [-- --seed N] [--sequences N] [--concurrency N] [--quick]
//                [--only I[,J…]] [--replay CODE | --replay-file F]
//                [--shrink N] [--no-shrink] [--shrink-runs N] [--shrink-budget-s S]
//                [--retries N] [--max-seconds S] [--isolate N] [--report FILE] [--keep] [--list]
//                [--no-nsdelegate]
// --quick: the CI budget (80 sequences, none started after 100 s, at most 4
// run again alone, 1 shrink of at most 30 s). --max-seconds: no sequence
// starts after S seconds (the ones run are the seed's first, in order). Linux,
// as root (uid 65534 runs some sequences' gateways). Exit 0 when every
// invariant held, 1 when one failed, 2 when the fuzzer itself could not run.
// It remounts cgroup2 with nsdelegate for its run where the host lacks it, and
// puts the options back (fuzz/boundary.mjs); --no-nsdelegate fuzzes the host as it is.
import { readFileSync } from "node:fs";
import { CATALOG } from "./fuzz/catalog.mjs";
import { decodeSequence, describeSequence, drawSequence, invalidReason } from "./fuzz/plan.mjs";
import { printFailure, printGroup, printShrunk, printSummary, writeReport } from "./fuzz/report.mjs";
import { Runner } from "./fuzz/runner.mjs";
import { classify, isolateAll, shrinkOne, shrinkTargets, togetherOnly } from "./fuzz/triage.mjs";

const log = (s) => console.log(s);

function parseArgs(argv) {
  const o = {
    sequences: 2000,
    concurrency: 6,
    shrink: 8,
    shrinkRuns: 40,
    shrinkBudgetS: 300,
    retries: 0,
    maxSeconds: Infinity,
    isolate: Infinity,
  };
  const num = (v, name) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} takes a whole number, got ${v}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const [k, inline] = argv[i].split("=", 2);
    const val = () => inline ?? argv[++i];
    if (k === "--seed") o.seed = num(val(), "seed") >>> 0;
    else if (k === "--sequences") o.sequences = num(val(), "sequences");
    else if (k === "--concurrency") o.concurrency = Math.max(1, num(val(), "concurrency"));
    else if (k === "--quick")
      Object.assign(o, { sequences: 80, maxSeconds: 100, isolate: 4, shrink: 1, shrinkRuns: 10, shrinkBudgetS: 30 });
    else if (k === "--max-seconds") o.maxSeconds = num(val(), "max-seconds");
    else if (k === "--isolate") o.isolate = num(val(), "isolate");
    else if (k === "--only")
      o.only = val()
        .split(",")
        .map((x) => num(x, "only"));
    else if (k === "--replay") o.replay = val();
    else if (k === "--no-nsdelegate") o.noNsdelegate = true;
    else if (k === "--replay-file") o.replay = readFileSync(val(), "utf8");
    else if (k === "--shrink") o.shrink = num(val(), "shrink");
    else if (k === "--no-shrink") o.shrink = 0;
    else if (k === "--shrink-runs") o.shrinkRuns = num(val(), "shrink-runs");
    else if (k === "--shrink-budget-s") o.shrinkBudgetS = num(val(), "shrink-budget-s");
    else if (k === "--retries") o.retries = num(val(), "retries");
    else if (k === "--report") o.report = val();
    else if (k === "--keep") o.keep = true;
    else if (k === "--list") o.list = true;
    else throw new Error(`unknown option ${argv[i]}`);
  }
  o.seed ??= (Date.now() ^ (process.pid << 12)) >>> 0;
  return o;
}

function sequencesOf(o) {
  if (o.replay) {
    const seq = decodeSequence(o.replay);
    const bad = invalidReason(seq);
    if (bad) throw new Error(`--replay: ${bad}`);
    o.seed = seq.seed;
    return [seq];
  }
  const idx = o.only ?? Array.from({ length: o.sequences }, (_, i) => i);
  return idx.map((i) => drawSequence(o.seed, i));
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.list) {
    for (const a of CATALOG) log(`${a.name.padEnd(22)} ${a.phase.padEnd(9)} finding ${a.finding.padEnd(5)} ${a.about}`);
    return 0;
  }
  if (process.platform !== "linux" || process.getuid() !== 0) {
    console.error("fuzz: Linux, as root (it runs gateways as root and as uid 65534, and reads every /proc)");
    return 2;
  }
  const seqs = sequencesOf(o);
  runner = new Runner({
    seed: o.seed,
    concurrency: o.concurrency,
    keep: o.keep,
    nsdelegate: o.noNsdelegate ? "as-is" : "remount",
    log,
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"])
    process.on(sig, () => {
      if (interrupted) return;
      interrupted = true;
      console.error(`\nfuzz: ${sig}; ending what the run started (seed ${o.seed})`);
      void runner.emergency().finally(() => process.exit(130));
    });
  const host = await runner.setup();
  log(`fuzz: seed ${o.seed}, ${seqs.length} sequence(s), concurrency ${o.concurrency}, run dir ${host.runDir}`);
  log(
    `fuzz: cgroup2 ${host.mount ?? "none"}; uid 65534: ${host.nobody ?? "yes"}; python3 ${host.python ?? "none (non-dumpable escapees sleep instead)"}`,
  );
  log(`fuzz: the lease cgroup's boundary ${host.boundary.held ? "holds" : "does not hold"}: ${host.boundary.why}`);
  const runnable = seqs.filter((s) => s.opts.profile === "root" || host.nobody === null);
  const skipped = seqs.length - runnable.length;
  if (skipped) log(`fuzz: ${skipped} sequence(s) of profile nobody skipped: ${host.nobody}`);
  const t0 = Date.now();
  let done = 0;
  let failing = 0;
  const deadline = t0 + o.maxSeconds * 1000;
  const results = await runner.runMany(runnable, o.concurrency, deadline, (r) => {
    done++;
    if (r.failures.length || r.incidents.length) failing++;
    if (done % 25 === 0 || done === runnable.length)
      log(
        `fuzz: [${done}/${runnable.length}] ${((Date.now() - t0) / 1000).toFixed(0)} s, ${failing} with a failure or a breach so far`,
      );
  });
  const seconds = (Date.now() - t0) / 1000;
  const ms = results.map((r) => r.ms).sort((a, b) => a - b);
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))] ?? 0;
  log(
    `fuzz: one sequence took ${q(0.5)} ms (median), ${q(0.9)} ms (p90), ${q(1)} ms (max); ${runner.n} gateway process(es) started`,
  );
  const cls = classify(results, runner.incidents);
  if (cls.isolate.length)
    log(`fuzz: ${cls.isolate.length} sequence(s) ran beside a gateway-level breach; each runs again alone`);
  const iso = await isolateAll(runner, cls.isolate, log, o.isolate);
  const confirmed = [...cls.confirmed, ...iso.confirmed].sort((a, b) => a.seq.index - b.seq.index);
  const groups = togetherOnly(cls.groups, confirmed);
  for (const c of confirmed) printFailure(log, c);
  for (const g of groups) printGroup(log, g, o.seed, iso.passed);
  const shrunk = [];
  for (const { inv, rec } of shrinkTargets(confirmed, o.shrink)) {
    log(`fuzz: shrinking #${rec.seq.index} against ${inv}`);
    const s = await shrinkOne(runner, rec, inv, {
      maxRuns: o.shrinkRuns,
      budgetMs: o.shrinkBudgetS * 1000,
      retries: o.retries,
      log: (l) => log(`  ${l}`),
    });
    printShrunk(log, inv, rec, s);
    shrunk.push({
      index: rec.seq.index,
      inv,
      seq: s.seq,
      runs: s.runs,
      complete: s.complete,
      minimal: describeSequence(s.seq),
    });
  }
  const limited = results.filter((r) => r.limits?.length);
  if (limited.length)
    log(
      `fuzz: LIMIT (documented in docs/containment.md, not a failure: without containment, a process with no marker the gateway can read and no parent link; without the boundary, an escapee a root agent wrote into the root cgroup): ${limited.reduce((n, r) => n + r.limits.length, 0)} process(es) left by #${limited.map((r) => r.seq.index).join(" #")}`,
    );
  const notRun = runnable.length - results.length;
  if (notRun) log(`fuzz: ${notRun} sequence(s) not started: --max-seconds ${o.maxSeconds} reached`);
  const n = printSummary(log, { seed: o.seed, ran: results.length, skipped, seconds, confirmed, groups });
  if (o.report)
    writeReport(o.report, {
      ...{ seed: o.seed, ran: results.length, skipped, seconds, confirmed, groups, shrunk },
      limits: limited.map((r) => ({ index: r.seq.index, limits: r.limits })),
    });
  await runner.teardown();
  if (runner.peakGrowth)
    log(
      `fuzz: the largest RSS growth of a gateway: ${(runner.peakGrowth.bytes / 2 ** 20).toFixed(0)} MB (gateway ${runner.peakGrowth.gateway}; the bound is 256 MB)`,
    );
  return n > 0 ? 1 : 0;
}

/** set once the run starts: a fatal error still ends what it started */
let runner = null;
/** a signal came: its handler ends the run (exit 130), whatever main() does meanwhile */
let interrupted = false;
main().then(
  (code) => interrupted || process.exit(code),
  async (e) => {
    if (interrupted) return;
    console.error(`fuzz: the fuzzer itself failed: ${e?.stack ?? e}`);
    await runner?.emergency().catch(() => undefined);
    process.exit(2);
  },
);
