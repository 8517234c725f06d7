// How fast are live process facts, and what do they cost the event loop?
// native vs procfs vs ps snapshots at the current process count and with
// 1,000 extra sleepers (and 10,000 in the full run); the native walk against
// a C floor making the same syscalls; native inspect with one env key
// against a C loop making the same syscalls; and what a snapshot holds the
// main thread for, in CPU time, at each size.
//
// The C floors run as Node runs: with a second thread (a shared file table)
// and raw openat/read/close, as the addon makes them. A ratio then compares
// the same kernel work from the same kind of process, so it moves with what
// our code adds, not with how fast this host's syscalls are.
import { execFileSync, spawn } from "node:child_process";
import { loadavg } from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createNativeFacts, getProcessFacts, loadError, loadNative } from "../dist/facts/index.js";
import { buildC, check, fmtMs, median, now, printTable, quantile, sample, unmeasured } from "./lib.mjs";

const EXTRA = 1000;
// the full run also walks a host with 10,000 more processes (issue 20)
const HUGE = 10_000;
// issue 11's aim for inspect against the C loop, judged in the full run on
// each side's quietest round. The quick (CI) run gates a regression guard on
// the smaller of that ratio and the median of per-round ratios (each round's
// two sides timed back to back): on a shared 2-core host one quiet round of
// one side can decide the quietest ratio alone (a CI run read 1.63× by
// quietest rounds, 1.21× by rounds; the same code's quick runs 1.11–1.27×).
// The per-call object build the addon replaced measured 1.3–1.7×; a
// regression to a thread-pool hop per read, 2× and more.
const INSPECT_TARGET = { full: 1.2, quick: 1.4 };
// issue 2's native-vs-procfs snapshot target, judged in the full run. Both
// walks are bound by procfs syscalls, which cost about 3× what they did when
// the target was set (the C floor went from 3.1 to 10–13 ms at ~1,070
// processes), and quick runs of the same code read 2.28–4.15×: the quick
// run gates a guard that still fails a walk that lost its edge.
const PROCFS_TARGET = { full: 2.5, quick: 2 };
// ps against native: the full run judges 3x; quick runs in CI read 2.93-3.56x
// under load (the ps child competes for the same two cores), so they gate 2.5x,
// still far above a walk that lost its edge (ps/native near 1).
const PS_TARGET = { full: 3, quick: 2.5 };
const SLICE_SHARE_TARGET = 0.25;

export async function run({ quick }) {
  const binding = loadNative();
  if (!binding)
    return [unmeasured("native facts backend", `the addon did not load (${loadError()}); run npm run build:native`)];
  const it = quick
    ? { rounds: 5, native: 10, procfs: 3, ps: 2, c: 20, inspect: 2000, inspectRounds: 9, elMs: 1500 }
    : { rounds: 7, native: 20, procfs: 5, ps: 3, c: 40, inspect: 2000, inspectRounds: 9, elMs: 5000 };
  // at 10,000 processes one procfs or ps walk takes about a second: fewer of each
  const itHuge = { ...it, rounds: 3, native: 5, procfs: 1, ps: 1, c: 5, elMs: 8000 };
  const backends = { native: getProcessFacts({ backend: "native" }), procfs: null, ps: null };
  for (const b of ["procfs", "ps"]) {
    try {
      backends[b] = getProcessFacts({ backend: b });
    } catch (err) {
      console.log(`${b} backend unavailable: ${err.message}`);
    }
  }
  const cLoop = buildC("stat_loop");
  const cInspect = buildC("inspect_loop");
  const ctx = { binding, backends, cLoop, cInspect };

  const snapRows = [];
  const inspectRows = [];
  const sliceRows = [];
  snapRows.push((await measureSnapshots(ctx, "current", it)).row);
  const at = {};
  for (const extra of quick ? [EXTRA] : [EXTRA, HUGE]) {
    const group = await spawnSleepers(backends.native, extra);
    try {
      const m = await measureSnapshots(ctx, `+${extra} sleepers`, extra === HUGE ? itHuge : it);
      snapRows.push(m.row);
      if (extra === EXTRA) {
        m.inspect = await measureInspect(ctx, it, inspectRows);
        inspectRows.push(...(await loopBaselines(cLoop, it)));
      }
      m.slice = await measureSlices(binding, extra === HUGE ? itHuge : it);
      sliceRows.push(sliceRow(`+${extra} sleepers`, m.slice, m.out.c));
      at[extra] = m;
    } finally {
      await killGroup(backends.native, group);
    }
  }

  // other work on this machine shows up as event-loop delay: say how busy it was
  printTable(`snapshot (median per call; load average ${loadavg()[0].toFixed(2)})`, snapRows);
  const cols = Object.keys(inspectRows[0] ?? {});
  printTable(
    "inspect and event loop",
    inspectRows.map((r) => Object.fromEntries(cols.map((c) => [c, r[c] ?? "-"]))),
  );
  printTable(
    "what one native snapshot holds the main thread for (CPU time of the call and of the continuation that makes the snapshot)",
    sliceRows,
  );
  if (!cLoop.path) console.log(`C floor skipped: ${cLoop.reason}`);
  if (!cInspect.path) console.log(`C inspect floor skipped: ${cInspect.reason}`);
  return snapshotChecks(at, quick, cLoop, cInspect);
}

/**
 * Rounds interleave every contender so a change in process count or in
 * machine load hits all of them alike; ratios are taken per round and the
 * median round is reported.
 */
async function measureSnapshots({ backends, cLoop }, label, it) {
  const rounds = [];
  const counts = [];
  for (let r = 0; r < it.rounds; r++) {
    counts.push((await backends.native.snapshot()).processes.size);
    const ms = {};
    for (const b of ["native", "procfs", "ps"]) {
      if (!backends[b]) continue;
      ms[b] = median(await sample(() => backends[b].snapshot(), { iterations: it[b], warmup: b === "native" ? 2 : 1 }));
    }
    if (cLoop.path) ms.c = JSON.parse(execFileSync(cLoop.path, [String(it.c)], { encoding: "utf8" })).medianMs;
    rounds.push(ms);
  }
  // Against the C floor, each side's cost is its quietest round (the lowest
  // per-round median), as for inspect below: other tenants only ever add
  // time, and they add it unevenly there (the walk's hop back to the event
  // loop waits for the scheduler; the C loop has none). procfs and ps against
  // native compare like with like (Node walks that hop, procfs many times
  // more), so there the ratio is the median of per-round ratios: each round's
  // two sides ran back to back under the same load, while two independent
  // minima can pair one side's lucky round with the other's ordinary one
  // (a loaded run read 1.55x by minima against 3.59x by rounds). The other
  // estimator is printed beside each ratio.
  const mid = (f) => median(rounds.map(f));
  const least = (f) => Math.min(...rounds.map(f));
  const out = { native: least((m) => m.native), c: cLoop.path ? least((m) => m.c) : undefined };
  const row = {
    case: label,
    procs: Math.min(...counts) === Math.max(...counts) ? counts[0] : `${Math.min(...counts)}-${Math.max(...counts)}`,
  };
  row.native = fmtMs(out.native);
  for (const b of ["procfs", "ps"]) {
    if (!backends[b]) continue;
    row[b] = fmtMs(least((m) => m[b]));
    out[`${b}/native`] = mid((m) => m[b] / m.native);
    row[`${b}/native`] =
      `${out[`${b}/native`].toFixed(2)} (quietest rounds ${(least((m) => m[b]) / out.native).toFixed(2)})`;
  }
  if (cLoop.path) {
    row["C floor"] = fmtMs(out.c);
    out["native/C"] = out.native / out.c;
    row["native/C"] = `${out["native/C"].toFixed(2)} (rounds ${mid((m) => m.native / m.c).toFixed(2)})`;
  }
  return { row, out };
}

/** inspect one realistic process (it inherits this environment) for one key; returns native / C. */
async function measureInspect({ backends, cInspect }, it, rows) {
  const target = spawn("sleep", ["300"], { stdio: "ignore", env: { ...process.env, PROCLEASE_BENCH_KEY: "1" } });
  await new Promise((r) => target.once("spawn", r));
  try {
    const opts = { envKeys: ["PROCLEASE_BENCH_KEY"] };
    // wait for the exec: before it, the child's argv and environ are node's
    for (let t = 0; t < 200 && (await backends.native.inspect(target.pid, opts))?.argv?.[0] !== "sleep"; t++)
      await new Promise((r) => setTimeout(r, 5));
    const d = await backends.native.inspect(target.pid, opts);
    if (d?.env.PROCLEASE_BENCH_KEY !== "1") throw new Error("native inspect did not read the env key");
    const row = { case: "inspect + 1 env key" };
    for (const b of ["procfs", "ps"]) {
      if (!backends[b]) continue;
      const n = b === "procfs" ? it.inspect / 4 : 10;
      row[b] = fmtMs(median(await sample(() => backends[b].inspect(target.pid, opts), { iterations: n, warmup: 20 })));
    }
    // native against the C loop, interleaved round by round: the floor with
    // the same syscalls (stat, status, exe, cmdline, environ through one
    // directory fd), and the issue's floor without status. The order
    // alternates round by round, so neither side always runs right after the
    // other's cache and scheduler footprint. The walks before this leave V8 a
    // heap to collect; done concurrently, that work shares the 2 cores with
    // the µs-scale calls timed here, and only on the native side: collected
    // first (run.mjs starts each bench with --expose-gc).
    globalThis.gc?.();
    const rounds = [];
    for (let r = 0; r < it.inspectRounds; r++) {
      const m = {};
      const nativeSide = async () => {
        m.native = median(
          await sample(() => backends.native.inspect(target.pid, opts), { iterations: it.inspect, warmup: 50 }),
        );
      };
      const cSide = () => {
        if (!cInspect.path) return;
        const c = (extra) =>
          JSON.parse(
            execFileSync(cInspect.path, [String(target.pid), String(it.inspect), "PROCLEASE_BENCH_KEY", ...extra], {
              encoding: "utf8",
            }),
          ).medianUs / 1000;
        m.cStatus = c(["status"]);
        m.c = c([]);
      };
      if (r % 2 === 0) {
        await nativeSide();
        cSide();
      } else {
        cSide();
        await nativeSide();
      }
      rounds.push(m);
    }
    // Each side's cost is its quietest round (the lowest per-round median):
    // interference from other tenants only ever adds time, and at tens of
    // µs it moved single rounds of either side by 30% or more. The median of
    // per-round ratios is printed beside it.
    const mid = (f) => median(rounds.map(f));
    const least = (f) => Math.min(...rounds.map(f));
    row.native = `${fmtMs(least((m) => m.native))} (median round ${fmtMs(mid((m) => m.native))})`;
    rows.push(row);
    if (!cInspect.path) return undefined;
    const ratio = least((m) => m.native) / least((m) => m.cStatus);
    const byRounds = mid((m) => m.native / m.cStatus);
    row["C floor"] = `${fmtMs(least((m) => m.cStatus))} (no status: ${fmtMs(least((m) => m.c))})`;
    row["native/C"] =
      `${ratio.toFixed(2)} (no status: ${(least((m) => m.native) / least((m) => m.c)).toFixed(2)}; ` +
      `median of per-round ratios ${byRounds.toFixed(2)})`;
    return { quietest: ratio, byRounds };
  } finally {
    target.kill("SIGKILL");
  }
}

/** Timer delay with nothing of ours running, and while the C floor walks /proc from another process. */
async function loopBaselines(cLoop, it) {
  const rows = [];
  const idle = monitorEventLoopDelay({ resolution: 1 });
  idle.enable();
  await new Promise((r) => setTimeout(r, it.elMs / 3));
  idle.disable();
  rows.push({ case: "event loop idle (baseline)", native: delay(idle) });
  if (!cLoop.path) return rows;
  const walker = spawn(cLoop.path, ["1000000"], { stdio: "ignore" });
  const walkerExited = new Promise((r) => walker.once("exit", r));
  const ext = monitorEventLoopDelay({ resolution: 1 });
  try {
    await new Promise((r) => setTimeout(r, 50));
    ext.enable();
    await new Promise((r) => setTimeout(r, it.elMs / 3));
    ext.disable();
  } finally {
    walker.kill("SIGKILL");
    await walkerExited;
  }
  rows.push({ case: "event loop idle, C floor walking in another process", native: delay(ext) });
  return rows;
}

const delay = (h) => `max ${(h.max / 1e6).toFixed(2)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(2)} ms`;

/**
 * What a snapshot holds the main thread for: the synchronous call that
 * queues the worker, plus the continuation that turns its columns into the
 * snapshot (one macrotask: microtasks never yield). Measured in this
 * thread's CPU time (the addon's CLOCK_THREAD_CPUTIME_ID), so the time a
 * busy host gives other processes is not counted as ours; the wall-clock
 * slice and the timer delay, which do count it, are printed beside it.
 */
async function measureSlices(binding, it) {
  const cpu = () => binding.threadCpuTimeNs() / 1e6;
  let markWall = 0;
  let markCpu = 0;
  const timed = createNativeFacts({
    ...binding,
    snapshot: () => binding.snapshot().then((r) => ((markWall = now()), (markCpu = cpu()), r)),
  });
  const idle = monitorEventLoopDelay({ resolution: 1 });
  idle.enable();
  await new Promise((r) => setTimeout(r, 500));
  idle.disable();
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t0 = now();
  const cpuSlices = [];
  const wallSlices = [];
  const walls = [];
  while (now() - t0 < it.elMs) {
    const w0 = now();
    const c0 = cpu();
    const p = timed.snapshot();
    const callCpu = cpu() - c0;
    const callWall = now() - w0;
    await p;
    const endCpu = cpu();
    const end = now();
    cpuSlices.push(callCpu + (endCpu - markCpu));
    wallSlices.push(callWall + (end - markWall));
    walls.push(end - w0);
  }
  h.disable();
  return {
    walks: cpuSlices.length,
    p90: quantile(cpuSlices, 0.9),
    max: Math.max(...cpuSlices),
    median: median(cpuSlices),
    wallP90: quantile(wallSlices, 0.9),
    wallMax: Math.max(...wallSlices),
    wall: median(walls),
    timer: delay(h),
    idleTimer: delay(idle),
  };
}

function sliceRow(label, s, cWalk) {
  return {
    case: label,
    walks: s.walks,
    "CPU median": fmtMs(s.median),
    "CPU p90": fmtMs(s.p90),
    "CPU max": fmtMs(s.max),
    "p90 / C walk": cWalk ? (s.p90 / cWalk).toFixed(3) : "-",
    "wall p90 / max": `${fmtMs(s.wallP90)} / ${fmtMs(s.wallMax)}`,
    snapshot: fmtMs(s.wall),
    "timer delay (idle before)": `${s.timer} (${s.idleTimer})`,
  };
}

function snapshotChecks(at, quick, cLoop, cInspect) {
  const checks = [];
  const loaded = at[EXTRA];
  const procs = `@${EXTRA}+ procs`;
  // a contender that could not run leaves its target unshown, which fails
  // (on macOS there is no /proc: procfs is not expected there)
  if (loaded.out["procfs/native"])
    checks.push(
      check(
        `native snapshot faster than procfs ${procs}${quick ? " (regression guard)" : ""}`,
        loaded.out["procfs/native"],
        ">=",
        quick ? PROCFS_TARGET.quick : PROCFS_TARGET.full,
      ),
    );
  else if (process.platform === "linux")
    checks.push(unmeasured(`native snapshot faster than procfs ${procs}`, "procfs backend unavailable"));
  if (loaded.out["ps/native"])
    checks.push(
      check(
        `native snapshot faster than ps ${procs}${quick ? " (regression guard)" : ""}`,
        loaded.out["ps/native"],
        ">=",
        quick ? PS_TARGET.quick : PS_TARGET.full,
      ),
    );
  else checks.push(unmeasured(`native snapshot faster than ps ${procs}`, "ps backend unavailable"));
  if (loaded.inspect) {
    const { quietest, byRounds } = loaded.inspect;
    if (quick)
      checks.push(
        check(
          "native inspect + 1 env key / C loop, same syscalls (regression guard: the smaller of the quietest-round and per-round ratios)",
          Math.min(quietest, byRounds),
          "<=",
          INSPECT_TARGET.quick,
        ),
      );
    else checks.push(check("native inspect + 1 env key / C loop, same syscalls", quietest, "<=", INSPECT_TARGET.full));
  } else
    checks.push(
      unmeasured("native inspect + 1 env key / C loop, same syscalls", cInspect.reason ?? "C loop not measured"),
    );
  for (const [extra, m] of Object.entries(at)) {
    const where = `@${extra}+ procs`;
    if (m.out["native/C"]) checks.push(check(`native snapshot / C floor ${where}`, m.out["native/C"], "<=", 1.5));
    else checks.push(unmeasured(`native snapshot / C floor ${where}`, cLoop.reason ?? "C floor not measured"));
    // What the worker thread buys: the share of a synchronous walk (the C
    // floor, same process count) that the main thread still spends per
    // snapshot, by the p90 of its CPU time.
    const name = `main-thread CPU per native snapshot (p90) / C floor walk ${where}`;
    if (m.out.c) checks.push(check(name, m.slice.p90 / m.out.c, "<=", SLICE_SHARE_TARGET));
    else checks.push(unmeasured(name, cLoop.reason ?? "C floor not measured"));
  }
  // issue 20's bound on the longest one, judged by the full run; the quick run prints it
  if (!quick) checks.push(check(`main-thread CPU per native snapshot (max) ${procs}`, loaded.slice.max, "<=", 1, "ms"));
  return checks;
}

/** One detached shell (its own process group) that forks `count` sleepers. */
async function spawnSleepers(facts, count) {
  const sh = spawn("sh", ["-c", `i=0; while [ $i -lt ${count} ]; do sleep 600 & i=$((i+1)); done; wait`], {
    detached: true,
    stdio: "ignore",
  });
  await new Promise((r) => sh.once("spawn", r));
  const pgid = sh.pid;
  const exited = new Promise((r) => sh.once("exit", r));
  // a shell forks 10,000 sleepers in 10-30 s on a 2-core host
  const limitS = Math.max(60, count / 50);
  const deadline = Date.now() + limitS * 1000;
  while ((await facts.snapshot()).groupMembers(pgid).length < count + 1) {
    if (Date.now() > deadline) {
      await killGroup(facts, { pgid, exited });
      throw new Error(`only some of ${count} sleepers started within ${limitS} s`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { pgid, exited };
}

async function killGroup(facts, { pgid, exited }) {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch (err) {
    if (err.code !== "ESRCH") throw err;
  }
  await exited;
  // Gone means out of the process table, not only dead: init reaps the 1,000
  // orphaned zombies over a second or two here, and a walk measured before
  // that (the next bench's, or a second run's "current" row) counted them.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const members = (await facts.snapshot()).groupMembers(pgid);
    const alive = members.filter((p) => p.state !== "Z").length;
    if (members.length === 0) break;
    if (Date.now() > deadline) {
      if (alive > 0) throw new Error(`${alive} sleepers of group ${pgid} still alive`);
      console.log(`sleeper group ${pgid}: ${members.length} zombies not yet reaped by init after 30 s; going on`);
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  console.log(`sleeper group ${pgid} killed, verified gone and reaped`);
}
