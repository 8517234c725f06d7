// The gateway's main thread while sessions start (issue 50): one bare spawn's
// main-thread CPU as the floor, the spinner's rows and their check, and the
// profiled pass that says what the busiest gaps ran.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { attribute, profiled } from "../cpu-windows.mjs";
import { check, median, printTable, unmeasured } from "../lib.mjs";
import { spin } from "../spinner.mjs";
import { closeMany, startMany, WIDTH } from "./sessions.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const { loadNative } = await import(pathToFileURL(join(root, "dist/facts/index.js")).href);
/** the most main-thread CPU between two event-loop ticks while sessions start (issue 50), full run */
const TARGET_START_CPU_MS = 5;
/**
 * The quick run's guard is a ratio to one bare spawn's main-thread CPU in the
 * same process at the same memory, since a fork's cost differs by host and
 * grows with the gateway's memory. What is left of the busiest gap is one
 * fork's tail plus the turn's other work: 3.6-7.8x the median bare spawn at
 * load 15-37 on 2 cores (2026-12-07, bench/start-cpu-ab.mjs and quick runs);
 * sessions forking in the same turn, as before spawns took turns, read
 * 10.3-15.7x there.
 */
const QUICK_START_CPU_RATIO = 10;

/**
 * The floor of one session's start on this thread: the main-thread CPU of
 * one bare child_process.spawn with the wrapper's four pipes, at this
 * process's memory now (a fork's cost grows with it), median of `count`.
 */
export async function bareSpawnCpuMs(count = 16) {
  const cpu = loadNative()?.threadCpuTimeNs;
  if (cpu === undefined) return NaN;
  const xs = [];
  for (let i = 0; i < count; i++) {
    const c0 = cpu();
    const child = spawn("/bin/true", [], { stdio: ["pipe", "pipe", "pipe", "pipe"] });
    xs.push((cpu() - c0) / 1e6);
    await new Promise((r) => child.once("exit", r));
  }
  return median(xs);
}

/**
 * What sets the main thread's busiest gaps while sessions start: `count`
 * sessions started WIDTH at a time under the CPU profiler, beside the same
 * spinner; the samples in every gap of 1 ms of main-thread CPU or more are
 * charged to steps (cpu-windows.mjs). Printed, not judged: the profiler's
 * interrupts cost the thread too.
 */
export async function startProfile(ctl, count) {
  const handles = [];
  try {
    const { value: busy, profile } = await profiled(() =>
      spin(() => startMany(ctl, count, "profiled", handles), { windows: 1 }),
    );
    const worst = busy.windows.reduce((a, w) => (w[2] > a[2] ? w : a), [0, 0, 0]);
    return { busy, all: attribute(profile, busy.windows), worst: attribute(profile, [worst]), worstCpu: worst[2] };
  } finally {
    await closeMany(ctl, handles);
  }
}

const ms2 = (v) => `${v.toFixed(2)} ms`;

/**
 * The main thread while the scale row's sessions start, read by the spinner
 * the reconcile row is judged with (spinner.mjs). The full run judges the
 * target; the quick run guards it (QUICK_START_CPU_RATIO says how).
 */
export function startCpuRows({ busy, bareSpawnMs }, n, kind, checks, quick) {
  printTable(`main thread while ${n} sessions start ${WIDTH} at a time (${kind} wrapper; 1 ms spinner)`, [
    {
      "most main-thread CPU between two ticks": ms2(busy.maxCpu),
      "longest gap": ms2(busy.maxGap),
      "its main-thread CPU": ms2(busy.maxGapCpu),
      "its wait for a core": busy.maxGapWait === null ? "-" : ms2(busy.maxGapWait),
      "gaps over 2 ms (main thread ran 2 ms or more)": `${busy.over} (${busy.overOwn})`,
      "longest GC pause": ms2(busy.maxGc),
      "one bare spawn (median of 16)": ms2(bareSpawnMs),
      "busiest gap / bare spawn": `${(busy.maxCpu / bareSpawnMs).toFixed(1)}×`,
    },
  ]);
  const name = `most main-thread CPU between two event-loop ticks while ${n} sessions start ${WIDTH} at a time`;
  if (!busy.measured) checks.push(unmeasured(name, "the native addon (its thread-CPU clock) did not load"));
  else if (quick)
    checks.push(
      check(`${name} / one bare spawn's, regression guard`, busy.maxCpu / bareSpawnMs, "<=", QUICK_START_CPU_RATIO),
    );
  else checks.push(check(name, busy.maxCpu, "<=", TARGET_START_CPU_MS, "ms"));
}

export function printProfile(p) {
  const pct = (x) => `${(x * 100).toFixed(0)} %`;
  printTable(
    `what the main thread ran in its busiest gaps (profiled pass: ${p.busy.windows.length} gaps of ≥ 1 ms CPU; the worst ${ms2(p.worstCpu)}, most ${ms2(p.busy.maxCpu)} with the profiler on)`,
    p.all.shares.map((r) => ({
      step: r.step,
      "share, all gaps ≥ 1 ms": pct(r.share),
      "share, the worst gap": pct(p.worst.shares.find((w) => w.step === r.step)?.share ?? 0),
    })),
  );
  printTable(
    "innermost functions sampled most in those gaps",
    p.all.leaves.map((l) => ({ function: l.leaf, share: pct(l.share) })),
  );
}
