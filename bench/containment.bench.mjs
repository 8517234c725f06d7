// What does cgroup containment add to a session? Per session it is one mkdir
// (the lease cgroup, plus a stat for its identity, recorded in the lease), one
// write to cgroup.procs (the gateway moving the wrapper in as it boots) and, once the session's
// processes have exited, the drain: populated 0, then one rmdir.
//
// 1. The gate (issue 13: under 1.02× ensureSession). Two controllers in this
//    process, one with containment "auto" (on here) and one with "off", each
//    on its own state dir, run real ensureSession + closeSession on the
//    fixture ACP agent through dist/acpx, interleaved pair by pair (the order
//    flips every pair, so neither side always gets the warmer cache). The
//    ratio is contained ensureSession / uncontained ensureSession per pair:
//    the mkdir, the identity stat, the extra lease update and the wrapper's
//    move are all inside it. Printed with it: the median's 95% bootstrap
//    interval and the interquartile range of the per-pair ratios, and the
//    whole per-session cost, (on.ensure + on.close - off.close) / off.ensure,
//    which adds the drain and rmdir that closeSession pays.
// 2. Where the time goes, as absolute steps (for docs/benchmarks.md, never gated),
//    against the same session shape without containment, interleaved:
//    - `cat`, moved in by the parent right after spawn: the cheapest child,
//      so the worst ratio there can be;
//    - a wrapper-shaped chain: node starts, (contained: moves ITSELF into the
//      lease cgroup with enterCgroup, as the wrapper does,) spawns a node
//      "adapter", and both exit on stdin EOF: ensureSession minus the ACP
//      handshake and the lease writes, so a stricter upper bound (printed).
//
// Where the time goes: the move (a write to cgroup.procs) write-locks the
// kernel's cgroup_threadgroup_rwsem, which waits for an RCU grace period
// unless cgroup2 is mounted with `favordynmods` (Linux >= 6.0). An idle host
// pays a fraction of a millisecond; a loaded one pays the grace period at its
// current length, and forks everywhere wait for it meanwhile. Spawning
// straight into the cgroup (clone3 with CLONE_INTO_CGROUP) would skip it;
// Node's spawn cannot do that.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { probeCgroup2 } from "../test/helpers/cgroup-probe.mjs";
import { bootstrapMedianCI, check, fmtMs, median, now, printTable, quantile, unmeasured } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const MODULE = join(root, "dist/containment/index.js");
const ACPX = join(root, "dist/acpx/index.js");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");

// Issue 13's target for the contained / uncontained ensureSession ratio.
const TARGET = 1.02;
// The full run judges 1.02× only when its 95% interval for the median is
// narrower than ±0.01, half the 2% margin under test: a wider one (a loaded
// 2-core host) cannot tell 1.01× from 1.03×, so it would pass or fail on
// noise. It measures 120 pairs, then 60 more at a time until the interval is
// that narrow or 360 pairs are in; still wider, it says so and gates only the
// regression guard.
const STABLE_HALF_WIDTH = 0.01;
// The regression guard, gated in every run. Read on this 2-core host at load
// 7–20: quick runs (30 pairs) 1.010×, 1.029×, 1.039× with 95% CIs reaching
// 1.054–1.138×; the full run (120 pairs) 1.015×, CI 0.983–1.045×. The quick
// guard, 1.15×, sits above every quick interval seen, so noise alone does not
// trip it; the full run's 1.10× above its interval. Both are far below what a
// real regression costs (a move or a drain that blocks for tens of ms on
// every session, a lease rewrite that waits on the disk).
const GUARD = { quick: 1.15, full: 1.1 };

// The wrapper stand-in. argv: <module> [lease cgroup]. Prints "moved <ms>"
// when it moved itself; the adapter stand-in ends on stdin EOF.
const CHAIN = `
const { spawn } = await import("node:child_process");
const [mod, path] = process.argv.slice(1);
const { enterCgroup } = await import(mod);
if (path) {
  const t0 = performance.now();
  const r = enterCgroup(path);
  if (r.outcome !== "moved") { console.error(JSON.stringify(r)); process.exit(3); }
  process.stdout.write("moved " + (performance.now() - t0) + "\\n");
}
const a = spawn(process.execPath, ["-e", "process.stdin.resume()"], { stdio: ["pipe", "ignore", "inherit"] });
process.stdin.on("end", () => a.stdin.end());
process.stdin.resume();
a.on("close", (code) => process.exit(code ?? 4));
`;

/** One child from spawn to close; `parentJoin` (the parent moves it in) or the child reports its own move. */
function runChild(argv, { parentJoin, steps }) {
  return new Promise((resolve, reject) => {
    const c = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    c.stdout.on("data", (d) => (out += d));
    c.once("error", reject);
    c.once("close", (code) => {
      const m = /^moved ([\d.]+)$/m.exec(out);
      if (m) steps.move.push(Number(m[1]));
      if (code !== 0) reject(new Error(`${argv.join(" ")} exited ${code}`));
      else resolve();
    });
    c.once("spawn", async () => {
      if (parentJoin) {
        const t0 = now();
        const r = parentJoin(c.pid);
        steps.move.push(now() - t0);
        if (r.outcome !== "moved") {
          c.kill("SIGKILL");
          reject(new Error(`move into the lease cgroup failed: ${JSON.stringify(r)}`));
          return;
        }
      }
      c.stdin.end();
    });
  });
}

async function pairs({ label, n, lib, support, plainArgv, containedArgv, parentMoves, steps }) {
  let seq = 0;
  const plain = () => runChild(plainArgv, { steps });
  const contained = async () => {
    let t0 = now();
    // one owner folder for this bench, as a controller has one per gateway instance
    const made = await lib.createLeaseCgroup(support, `bench-${process.pid}-${++seq}`, `bench-${process.pid}`);
    steps.mkdir.push(now() - t0);
    if (!made.ok) throw new Error(made.why);
    const path = made.cgroup.path;
    try {
      await runChild(containedArgv(path), {
        parentJoin: parentMoves ? (pid) => lib.enterCgroup(path, pid) : null,
        steps,
      });
    } finally {
      t0 = now();
      const rm = await lib.removeCgroup(path, { waitMs: 5000 });
      steps.rmdir.push(now() - t0);
      if (rm.outcome !== "removed") throw new Error(`rmdir ${path}: ${JSON.stringify(rm)}`);
    }
  };
  for (let i = 0; i < 5; i++) {
    await plain();
    await contained();
  }
  for (const k of Object.keys(steps)) steps[k].length = 0;
  const a = [];
  const b = [];
  const ratios = [];
  for (let i = 0; i < n; i++) {
    // alternate which one goes first so neither always gets the warmer cache
    const order = i % 2 ? [plain, contained] : [contained, plain];
    const t = [];
    for (const fn of order) {
      const t0 = now();
      await fn();
      t.push(now() - t0);
    }
    const [tp, tc] = i % 2 ? t : [t[1], t[0]];
    a.push(tp);
    b.push(tc);
    ratios.push(tc / tp);
  }
  return { label, plain: median(a), contained: median(b), ratio: median(ratios), n };
}

const p90 = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length * 0.9)];

/**
 * Real sessions on two controllers, one contained and one not, interleaved:
 * `n` pairs, then `step` more at a time while `enough(pairs)` says no and
 * fewer than `max` are in (the rule reads only the interval's width, never
 * the median, so stopping on it does not pick a result). Returns per-pair
 * timings, or { off } when containment is off here.
 */
async function ensurePairs({ n, warmup, max = n, step = 60, enough = () => true }) {
  const { createAcpxLifecycleController } = await import(pathToFileURL(ACPX).href);
  const dirOn = mkdtempSync(join(tmpdir(), "proclease-bench-contain-on-"));
  const dirOff = mkdtempSync(join(tmpdir(), "proclease-bench-contain-off-"));
  const base = { graceMs: 300, maintenanceIntervalMs: 0 };
  const on = await createAcpxLifecycleController({ ...base, stateDir: dirOn, containment: "auto" });
  const off = await createAcpxLifecycleController({ ...base, stateDir: dirOff, containment: "off" });
  const command = [process.execPath, AGENT];
  let seq = 0;
  const session = async (ctl) => {
    const t0 = now();
    const h = await ctl.ensureSession({ sessionKey: `bench:contain:${++seq}`, agentId: "main", command });
    const t1 = now();
    const r = await ctl.closeSession({ handle: h, discardPersistentState: true });
    const t2 = now();
    if (r.outcome !== "closed") throw new Error(`closeSession ${h.leaseId}: ${r.outcome} (${r.detail})`);
    return { ensure: t1 - t0, close: t2 - t1 };
  };
  try {
    if (!on.containment.available) return { off: on.containment.why };
    for (let i = 0; i < warmup; i++) {
      await session(on);
      await session(off);
    }
    const pairs = [];
    for (let i = 0; i < max && (i < n || (i - n) % step !== 0 || !enough(pairs)); i++) {
      let a;
      let b;
      if (i % 2) {
        b = await session(off);
        a = await session(on);
      } else {
        a = await session(on);
        b = await session(off);
      }
      pairs.push({ on: a, off: b });
    }
    // the contained side must really have been contained, and left no cgroup behind
    const leases = await on.listLeases();
    const contained = leases.filter((l) => l.cgroup?.path);
    const left = contained.filter((l) => existsSync(l.cgroup.path));
    const uncontained = (await off.listLeases()).filter((l) => l.cgroup);
    if (contained.length !== leases.length || left.length || uncontained.length) {
      throw new Error(
        `containment "auto" recorded a cgroup in ${contained.length} of ${leases.length} leases, ${left.length} left behind; "off" recorded ${uncontained.length}`,
      );
    }
    return { pairs, sessions: leases.length };
  } finally {
    await on.dispose();
    await off.dispose();
    rmSync(dirOn, { recursive: true, force: true });
    rmSync(dirOff, { recursive: true, force: true });
  }
}

/** median, its 95% bootstrap interval and the interquartile range of per-pair ratios */
function ratioStats(xs) {
  const ci = bootstrapMedianCI(xs);
  return { median: median(xs), lo: ci.lo, hi: ci.hi, q1: quantile(xs, 0.25), q3: quantile(xs, 0.75), n: xs.length };
}
const fmtRatio = (r) =>
  `${r.median.toFixed(3)}× (95% CI ${r.lo.toFixed(3)}–${r.hi.toFixed(3)}, IQR ${r.q1.toFixed(3)}–${r.q3.toFixed(3)})`;

export async function run({ quick }) {
  // Nothing measured is a failure, never a pass: a detection that wrongly says
  // "off" must not turn this bench into an empty success. Whether the host
  // could contain is asked of an independent probe, to say which it is.
  const name = "containment on / off ensureSession, regression guard";
  if (process.platform !== "linux") return [unmeasured(name, "Linux only (cgroup v2)")];
  for (const f of [MODULE, ACPX]) if (!existsSync(f)) throw new Error(`${f} missing: run \`npm run build\` first`);
  const lib = await import(pathToFileURL(MODULE).href);
  const probe = await probeCgroup2();
  const host = probe.writable
    ? `the independent probe moved a child into a cgroup under ${probe.own}`
    : `no writable cgroup2 here either (independent probe: ${probe.why})`;
  const support = await lib.detectContainment();
  if (!support.available) return [unmeasured(name, `detectContainment() says off (${support.why}); ${host}`)];
  const load0 = loadavg()[0];
  // a full run measures on until its interval can judge the 2% margin (or 360 pairs: a host that noisy is said to be)
  const halfWidthOf = (ps) => {
    const ci = bootstrapMedianCI(ps.map((p) => p.on.ensure / p.off.ensure));
    return (ci.hi - ci.lo) / 2;
  };
  const es = await ensurePairs({
    n: quick ? 30 : 120,
    max: quick ? 30 : 360,
    warmup: quick ? 2 : 4,
    enough: (ps) => halfWidthOf(ps) <= STABLE_HALF_WIDTH,
  });
  if (es.off !== undefined)
    return [unmeasured(name, `the controller runs without containment here (${es.off}); ${host}`)];
  const ensure = ratioStats(es.pairs.map((p) => p.on.ensure / p.off.ensure));
  const whole = ratioStats(es.pairs.map((p) => (p.on.ensure + p.on.close - p.off.close) / p.off.ensure));
  const med = (side, step) => fmtMs(median(es.pairs.map((p) => p[side][step])));
  printTable("real sessions, containment auto (on here) vs off, interleaved pairs on the fixture ACP agent", [
    {
      step: "ensureSession",
      off: med("off", "ensure"),
      on: med("on", "ensure"),
      "on/off per pair (median, 95% CI, IQR)": fmtRatio(ensure),
    },
    {
      step: "closeSession",
      off: med("off", "close"),
      on: med("on", "close"),
      "on/off per pair (median, 95% CI, IQR)": "-",
    },
    {
      step: "containment's whole cost / ensureSession",
      off: "-",
      on: "-",
      "on/off per pair (median, 95% CI, IQR)": fmtRatio(whole),
    },
  ]);
  console.log(
    `  ${es.pairs.length} pairs (${es.sessions} contained sessions, every one recorded its cgroup and had it removed); load average ${load0.toFixed(1)} → ${loadavg()[0].toFixed(1)} on ${cpus().length} cores`,
  );
  const halfWidth = (ensure.hi - ensure.lo) / 2;
  const stable = halfWidth <= STABLE_HALF_WIDTH;
  const checks = [
    check(
      `containment on / off ensureSession, regression guard (median of ${ensure.n} pairs)`,
      ensure.median,
      "<=",
      quick ? GUARD.quick : GUARD.full,
    ),
  ];
  if (!quick && stable)
    checks.push(
      check(
        `containment on / off ensureSession (median of ${ensure.n} pairs, 95% CI ±${halfWidth.toFixed(3)})`,
        ensure.median,
        "<=",
        TARGET,
      ),
    );
  else {
    const why = quick
      ? "a quick run gates only the guard"
      : `its 95% CI is ±${halfWidth.toFixed(3)}, wider than ±${STABLE_HALF_WIDTH}: too noisy to judge a 2% margin here`;
    console.log(
      `  issue 13's ${TARGET}× not judged in this run (${why}); median ${ensure.median.toFixed(3)}×, CI upper end ${ensure.hi.toFixed(3)}×`,
    );
  }

  const catSteps = { mkdir: [], move: [], rmdir: [] };
  const cat = await pairs({
    label: "cat, moved by the parent",
    n: quick ? 60 : 400,
    lib,
    support,
    plainArgv: ["cat"],
    containedArgv: () => ["cat"],
    parentMoves: true,
    steps: catSteps,
  });
  const chainSteps = { mkdir: [], move: [], rmdir: [] };
  const node = process.execPath;
  // two node starts per side and pair: the full run only (the quick one's budget goes to the gate)
  const chain = quick
    ? null
    : await pairs({
        label: "node wrapper → node adapter, wrapper moves itself",
        n: 80,
        lib,
        support,
        plainArgv: [node, "--input-type=module", "-e", CHAIN, MODULE],
        containedArgv: (path) => [node, "--input-type=module", "-e", CHAIN, MODULE, path],
        parentMoves: false,
        steps: chainSteps,
      });
  const favordynmods = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((l) => l.includes(" - cgroup2 ") && /[ ,]favordynmods(,|$)/.test(l.split(" - ")[1] ?? ""));
  const stepRows = [];
  for (const [run, steps] of chain
    ? [
        ["cat", catSteps],
        ["chain", chainSteps],
      ]
    : [["cat", catSteps]]) {
    for (const [step, xs] of Object.entries(steps))
      stepRows.push({ run, step, median: fmtMs(median(xs)), p90: fmtMs(p90(xs)), samples: xs.length });
  }
  printTable(
    `containment steps (under ${support.root}; kill via ${support.kill}; favordynmods ${favordynmods ? "on" : "off"})`,
    stepRows,
  );
  printTable(
    "spawn-to-exit without the ACP handshake, plain vs contained (mkdir + move + rmdir), median of interleaved pairs (printed, not gated)",
    [cat, chain].filter(Boolean).map((r) => ({
      session: r.label,
      plain: fmtMs(r.plain),
      contained: fmtMs(r.contained),
      ratio: `${r.ratio.toFixed(3)}×`,
      pairs: r.n,
    })),
  );
  await lib.removeInstanceFolder(support, `bench-${process.pid}`);
  if (!chain) console.log("  the wrapper-shaped chain (ensureSession minus the handshake) runs in the full bench only");
  console.log(`  load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores while measuring`);
  return checks;
}

// `node bench/containment.bench.mjs [--quick]`: this file alone, as bench/run.mjs would run it
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { printChecks } = await import("./lib.mjs");
  const checks = await run({ quick: process.argv.includes("--quick") });
  printChecks(checks);
  process.exit(checks.every((c) => c.ok) ? 0 : 1);
}
