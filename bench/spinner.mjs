// The benches' one event-loop spinner: a 1 ms timer whose every gap is charged
// with the main thread's own CPU time (the addon's CLOCK_THREAD_CPUTIME_ID
// clock, native/thread_clock_posix.cc) and its wait for a core
// (/proc/thread-self/schedstat). A gap this process filled is a block of its
// own; the rest of a gap is time the host gave its cores to something else.
// reconcile.bench.mjs judges the startup reconcile with it, session-cost.bench.mjs
// the sessions' start.
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { PerformanceObserver } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { median, now } from "./lib.mjs";

const root = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const { loadNative } = await import(pathToFileURL(join(root, "dist/facts/index.js")).href);

/**
 * This thread's time waiting for a core (ms), from /proc/thread-self/schedstat
 * (run time, run-queue wait, slices): one pread of a file opened once, its
 * second field read from the bytes, so reading it each tick costs the
 * spinner little and leaves nothing for the collector (the collector's
 * pauses land in the gaps being judged). null where the kernel keeps no
 * schedstats.
 */
function runQueueClock() {
  let fd;
  try {
    fd = openSync("/proc/thread-self/schedstat", "r");
  } catch {
    return null;
  }
  const buf = Buffer.alloc(128);
  const SPACE = 0x20;
  const ZERO = 0x30;
  const read = () => {
    const n = readSync(fd, buf, 0, buf.length, 0);
    let i = buf.indexOf(SPACE) + 1;
    let ns = 0;
    for (; i < n && buf[i] !== SPACE; i++) ns = ns * 10 + (buf[i] - ZERO);
    return ns / 1e6;
  };
  return { read, close: () => closeSync(fd) };
}

/**
 * Runs fn while a 1 ms timer spins; the longest gap between its ticks beyond
 * the 1 ms asked for, and the most main-thread CPU between two ticks.
 * With `windows: ms`, every gap whose main-thread CPU reached `ms` is kept as
 * [start, end, cpu] (performance.now() ms), for a profile to say what ran in it.
 */
export async function spin(fn, { windows } = {}) {
  let last = now();
  let maxGap = 0;
  let maxGc = 0;
  const gaps = [];
  const kept = [];
  // the collector's pauses stop the loop too: printed beside the gaps, so a block can be told from a pause of the runtime
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) maxGc = Math.max(maxGc, e.duration);
  });
  gc.observe({ entryTypes: ["gc"] });
  const cpu = loadNative()?.threadCpuTimeNs;
  let lastCpu = cpu?.() ?? 0;
  let maxGapCpu = 0;
  let maxCpu = 0;
  let over = 0;
  let overOwn = 0;
  // the rest of a gap: the main thread runnable but kept off a core (by this process's other threads or the host's)
  const rq = runQueueClock();
  let lastWait = rq?.read() ?? 0;
  let maxGapWait = null;
  const t = setInterval(() => {
    const n = now();
    const gap = n - last - 1;
    const c = cpu?.() ?? 0;
    const used = (c - lastCpu) / 1e6;
    const w = rq?.read() ?? 0;
    gaps.push(gap);
    if (gap > 2) [over, overOwn] = [over + 1, overOwn + (used >= 2 ? 1 : 0)];
    if (gap > maxGap) [maxGap, maxGapCpu, maxGapWait] = [gap, used, rq ? w - lastWait : null];
    maxCpu = Math.max(maxCpu, used);
    if (windows !== undefined && used >= windows) kept.push([last, n, used]);
    last = n;
    lastCpu = c;
    lastWait = w;
  }, 1);
  try {
    await fn();
  } finally {
    clearInterval(t);
    gc.disconnect();
    rq?.close();
  }
  return {
    /** false where the addon did not load: maxCpu, maxGapCpu are then 0, not measured */
    measured: cpu !== undefined,
    maxGap: Math.max(0, maxGap),
    maxGapCpu,
    maxGapWait,
    maxCpu,
    maxGc,
    over,
    overOwn,
    medianGap: gaps.length ? median(gaps) : 0,
    windows: kept,
  };
}
