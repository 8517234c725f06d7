// A startup reconcile at scale (full run only): 1,000 open leases on a host
// of about 3,000 processes. Half the leases have a live root (a tiny real
// wrapper, `/bin/sh <wrapperRoot>/sleeper.sh`, with its `sleep` child, as in
// the acpx bench), half a root that is gone; a tenth of all leases left a
// remnant (a setsid'd `sleep` that carries the lease's markers). The rest of
// the host is bystanders: `sleep`s started before the leases, carrying no
// marker. One reapStartupOrphans must settle all of it from one snapshot.
//
// No root or remnant is this process's child (lib.mjs adopted): init adopts
// them, as it adopts a former gateway's processes.
//
// Printed: the total time against the C floor of the reads it must make (one
// walk of /proc, then one inspect of every live root and remnant, made by the
// C loops of bench/c/), the longest the event loop was blocked (a 1 ms timer
// spinner's longest gap, beside the main thread's CPU time in that gap and
// in the busiest gap, how long in that gap the main thread was runnable but
// waited for a core, how many gaps passed 2 ms and in how many of those the
// main thread itself ran for 2 ms, the same spinner's idle baseline and the
// longest GC pause in each), the CPU time of this process's other threads
// (the thread pool's jobs compete with the main thread for the cores) and
// the process's memory high-water so far (maxRSS). Two rows, each on a host of its own: the default a gateway
// gets (reapStartupOrphans on a worker thread, judged by the main thread's CPU between ticks), and the calling
// thread's mode (the one a caller's own facts object gets), whose facts count the snapshot() calls.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { adopted, alive, buildC, check, fmtMs, now, printTable, unmeasured } from "./lib.mjs";
import { reconciler } from "./reconciler.mjs";
import { spin } from "./spinner.mjs";

export const quick = false;
export const quickSkipReason = "spawns about 3,000 processes and reaps 1,000 leases";

const root = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const lib = (p) => import(pathToFileURL(join(root, "dist", p)).href);
const { createAcpxLifecycleController } = await lib("acpx/index.js");
const { getProcessFacts, loadNative } = await lib("facts/index.js");
const { openLeaseStore, computeCommandHash, loadOrCreateGatewayInstanceId } = await lib("ownership/index.js");

const LEASES = 1000;
const HOST_PROCS = 3000;
const GRACE_MS = 500;
const KEY = "OPENCLAW_ACPX_LEASE_ID";
/** /proc's clock ticks per second (USER_HZ), 100 on every Linux Node runs on */
const CLOCK_TICKS = 100;

export async function run() {
  const native = loadNative();
  if (!native) return [unmeasured("startup reconcile at scale", "the native addon did not load")];
  const floor = { walk: buildC("stat_loop"), inspect: buildC("inspect_loop") };
  const byDefault = await measure(native, floor, "default (a worker thread)");
  // the mode a caller's own facts get: the spinner then shares its thread with the work
  const here = await measure(native, floor, "the calling thread");
  // The host's floor for the judged figure: the same reconcile, whole, on a worker thread the bench starts, while
  // the main thread only spins. What the main thread is charged then is the host's (the kernel's work of 1,100
  // processes ending, the collector's helpers), not the reconcile's; printed, not judged.
  const away = await measure(native, floor, "floor: all of it on a bench worker");
  printTable(
    `startup reconcile: ${LEASES} open leases (${here.host.liveRoots.length} live roots, ${here.host.goneRoots} gone, ${here.host.remnants.length} remnants) among ${here.procs} processes, grace ${GRACE_MS} ms`,
    [row(byDefault), row(here), row(away)],
  );
  const { cFloor } = here;
  const out = [];
  for (const m of [byDefault, here]) {
    const reaped = m.report.entries.filter((e) =>
      ["killed", "killed-remnants", "marked-lost"].includes(e.action),
    ).length;
    out.push(
      check(`startup reconcile at scale, ${m.where}: leases reaped or marked lost`, reaped, ">=", LEASES, "leases"),
    );
    out.push(
      check(`startup reconcile at scale, ${m.where}: processes of the leases left alive`, m.left, "<=", 0, "processes"),
    );
  }
  out.push(
    check(
      "startup reconcile at scale, the calling thread: snapshot() calls (bench's count)",
      here.snapshots,
      "<=",
      1 + Math.ceil(GRACE_MS / 100),
      "snapshots",
    ),
    check(
      "startup reconcile at scale, default: the report's reconciling thread",
      byDefault.report.reconciledOn === "worker-thread" ? 1 : 0,
      ">=",
      1,
      "(1: a worker thread)",
    ),
    // issue 41: the bound the host can judge is the main thread's own CPU between two ticks, in the mode a gateway
    // gets by default; the wall-clock gap is printed beside the idle baseline
    check(
      "startup reconcile at scale, default mode (a worker thread): most main-thread CPU between two event-loop ticks",
      byDefault.busy.maxCpu,
      "<=",
      2,
      "ms",
    ),
  );
  // issue 20 asks for the total beside its floor, printed above, not for a bound on it
  if (cFloor === null)
    out.push(
      unmeasured(
        "startup reconcile at scale: the C floor of its reads",
        floor.walk.reason ?? floor.inspect.reason ?? "C floor not measured",
      ),
    );
  return out;
}

function row(m) {
  const actions = {};
  for (const e of m.report.entries) actions[e.action] = (actions[e.action] ?? 0) + 1;
  return {
    "reconciled in": m.where,
    elapsed: fmtMs(m.elapsed),
    "minus grace": fmtMs(m.elapsed - GRACE_MS),
    "C floor of the reads": m.cFloor === null ? "-" : fmtMs(m.cFloor),
    "(elapsed - grace) / floor": m.cFloor === null ? "-" : `${((m.elapsed - GRACE_MS) / m.cFloor).toFixed(2)}×`,
    "snapshot() calls": m.snapshots ?? "-",
    "longest loop block (idle baseline)": `${fmtMs(m.busy.maxGap)} (${fmtMs(m.idle.maxGap)})`,
    "main-thread CPU in that gap": fmtMs(m.busy.maxGapCpu),
    // the rest of the gap (the 1 ms the timer asked for included) the thread slept in the kernel: on a lock (the thread pool's queue, the collector's helpers) or I/O
    "that gap's rest: waiting for a core (idle), asleep":
      m.busy.maxGapWait === null
        ? "-"
        : `${fmtMs(m.busy.maxGapWait)} (${fmtMs(m.idle.maxGapWait)}), ${fmtMs(Math.max(0, m.busy.maxGap + 1 - m.busy.maxGapCpu - m.busy.maxGapWait))}`,
    "most main-thread CPU between two ticks": fmtMs(m.busy.maxCpu),
    "gaps over 2 ms (of them, the main thread ran 2 ms or more)": `${m.busy.over} (${m.busy.overOwn})`,
    "longest GC pause (idle)": `${fmtMs(m.busy.maxGc)} (${fmtMs(m.idle.maxGc)})`,
    "main-thread CPU": fmtMs(m.cpuMs),
    "other threads' CPU": fmtMs(m.otherCpuMs),
    maxRSS: `${m.maxRss.toFixed(0)} MB`,
    actions: Object.entries(actions)
      .map(([a, n]) => `${a} ${n}`)
      .join(", "),
    "left alive": m.left,
  };
}

/** One reconcile on a host of its own: the default (a worker thread), the calling thread, or whole on a bench worker (reconciler.mjs). */
async function measure(native, floor, where) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-bench-reconcile-"));
  const started = [];
  try {
    const host = await buildHost(dir, started);
    const facts = getProcessFacts({ backend: "native" });
    const procs = (await facts.snapshot()).processes.size;
    const cFloor = floorMs(floor, dir, [...host.liveRoots, ...host.remnants]);
    const idle = await spin(() => sleep(1000));
    const reconcile = where.startsWith("floor")
      ? await inWorker(dir)
      : await reconciler(dir, GRACE_MS, where === "the calling thread" ? "calling-thread" : "default");
    let result;
    const cpu0 = native.threadCpuTimeNs();
    const other0 = otherThreadsCpuMs();
    const t0 = now();
    const busy = await spin(async () => {
      result = await reconcile.reap();
    });
    const elapsed = now() - t0;
    const cpuMs = (native.threadCpuTimeNs() - cpu0) / 1e6;
    // in the worker row this includes the reconciling worker itself
    const otherCpuMs = otherThreadsCpuMs() - other0;
    await reconcile.dispose();
    const left = [...host.liveRoots, ...host.remnants].filter(alive).length;
    const maxRss = process.resourceUsage().maxRSS / 1024;
    return {
      where,
      host,
      procs,
      cFloor,
      idle,
      busy,
      elapsed,
      cpuMs,
      otherCpuMs,
      maxRss,
      left,
      report: result.report,
      snapshots: result.snapshots,
    };
  } finally {
    await removeHost(started, dir);
  }
}

async function inWorker(dir) {
  const worker = new Worker(new URL("./reconciler.mjs", import.meta.url), {
    workerData: { dir, graceMs: GRACE_MS },
    execArgv: [],
  });
  const answer = () =>
    new Promise((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
    });
  await answer();
  return {
    reap: async () => {
      const reply = answer();
      worker.postMessage("reap");
      return reply;
    },
    dispose: () => worker.terminate(),
  };
}

async function removeHost(started, dir) {
  for (const c of started) {
    try {
      process.kill(-c, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  // the next measurement builds its host from the process count it finds: the ~3,000 killed here must have left it
  const facts = getProcessFacts({ backend: "native" });
  for (const deadline = now() + 30_000; now() < deadline; await sleep(50)) {
    const snap = await facts.snapshot();
    if (started.every((g) => snap.groupMembers(g).length === 0 && !snap.processes.has(g))) break;
  }
  rmSync(dir, { recursive: true, force: true });
}

/** The host: bystanders first (older than every lease), then the leases, their roots and remnants. */
async function buildHost(dir, started) {
  const first = await createAcpxLifecycleController({ stateDir: dir, maintenanceIntervalMs: 0 });
  await first.dispose();
  const gid = await loadOrCreateGatewayInstanceId(dir);
  const wrapperRoot = join(dir, "acpx", "wrappers");
  const sleeper = join(wrapperRoot, "sleeper.sh");
  writeFileSync(sleeper, "sleep 1000\n");
  const facts = getProcessFacts({ backend: "native" });
  const live = LEASES / 2;
  const remnantCount = LEASES / 10;
  const bystanders = HOST_PROCS - (await facts.snapshot()).processes.size - live * 2 - remnantCount;
  if (bystanders > 0)
    started.push(
      await group(
        `i=0; while [ $i -lt ${bystanders} ]; do sleep 1000 & i=$((i+1)); done; wait`,
        {},
        bystanders + 1,
        facts,
      ),
    );
  const store = await openLeaseStore(dir, { durable: false });
  const argv = ["/bin/sh", sleeper];
  const liveRoots = [];
  const remnants = [];
  const gone = [];
  for (let i = 0; i < LEASES; i++) {
    const lease = await store.create({
      kind: "acpx",
      gatewayInstanceId: gid,
      sessionKey: `bench:scale:${i}`,
      wrapperRoot,
      wrapperPath: sleeper,
      commandHash: computeCommandHash(argv),
    });
    const env = { ...process.env, [KEY]: lease.leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: gid };
    const pid = adopted(argv, env);
    started.push(pid);
    const d = await waitExec(facts, pid);
    await store.update(lease.leaseId, {
      rootPid: pid,
      processGroupId: pid,
      rootStartTime: d.startTime,
      bootId: d.bootId,
      pidNamespace: d.pidNamespace,
    });
    if (i % 10 === 1) {
      // a remnant of a lease whose root is gone (below): an escapee of this lease in a session of its own, outside the root's group
      const remnant = adopted(["sleep", "1000"], env);
      started.push(remnant);
      remnants.push(remnant);
    }
    if (i % 2 === 1) {
      process.kill(-pid, "SIGKILL");
      gone.push(pid);
    } else liveRoots.push(pid);
  }
  // the gone roots' groups have left the table before the reconcile starts
  for (const deadline = now() + 30_000; ;) {
    const snap = await facts.snapshot();
    if (gone.every((g) => snap.groupMembers(g).length === 0)) break;
    if (now() > deadline) throw new Error("the killed roots' groups did not leave the process table within 30 s");
    await sleep(50);
  }
  return { liveRoots, remnants, goneRoots: gone.length };
}

async function group(script, env, members, facts) {
  const sh = spawn("sh", ["-c", script], { detached: true, stdio: "ignore", env: { ...process.env, ...env } });
  sh.unref();
  await new Promise((r) => sh.once("spawn", r));
  const deadline = now() + 120_000;
  while ((await facts.snapshot()).groupMembers(sh.pid).length < members) {
    if (now() > deadline) throw new Error(`only some of ${members} bystanders started within 120 s`);
    await sleep(100);
  }
  return sh.pid;
}

async function waitExec(facts, pid) {
  for (let t = 0; t < 400; t++) {
    const d = await facts.inspect(pid);
    if (d?.argv?.[0] === "/bin/sh") return d;
    await sleep(5);
  }
  throw new Error(`pid ${pid} did not exec /bin/sh`);
}

/** The reads' floor: one C walk at this process count, plus one C inspect of each pid (ms). */
function floorMs(floor, dir, pids) {
  if (!floor.walk.path || !floor.inspect.path) return null;
  const list = join(dir, "floor-pids");
  writeFileSync(list, pids.join("\n"));
  const walk = JSON.parse(execFileSync(floor.walk.path, ["5"], { encoding: "utf8" })).medianMs;
  const per = JSON.parse(
    execFileSync(floor.inspect.path, [`@${list}`, "3", KEY, "status"], { encoding: "utf8" }),
  ).medianUs;
  return walk + (per * pids.length) / 1000;
}

/**
 * CPU time (ms) of this process's threads other than the main one: the
 * thread pool running the reconcile's file and /proc jobs, and the
 * runtime's helpers. They share the host's cores with the main thread.
 */
function otherThreadsCpuMs() {
  let ms = 0;
  for (const t of readdirSync("/proc/self/task")) {
    if (Number(t) === process.pid) continue;
    try {
      const st = readFileSync(`/proc/self/task/${t}/stat`, "utf8");
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      ms += ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
    } catch {
      // a thread that ended meanwhile
    }
  }
  return ms;
}
