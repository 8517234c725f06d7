// What a session costs on top of its adapter (issue 41), against the bare
// peer measured in the same run. The adapter is bench/minimal-acp-agent.mjs,
// the smallest Node ACP adapter (no SDK), so proclease's share is as large as
// it can be.
//
// 1. ensureSession (containment "auto", on where the host has cgroup v2)
//    against spawning the same adapter directly and speaking `initialize` +
//    `session/new` over the same SDK client: interleaved triples (native
//    wrapper, Node wrapper, direct; the order rotates), median of the
//    per-triple ratios. Target 1.15× for the wrapper the controller installs
//    by default; the Node wrapper's ratio is printed beside it as the baseline.
// 2. Private memory (/proc/PID/smaps_rollup, Private_Clean + Private_Dirty)
//    of each wrapper and each adapter, 16 live sessions per wrapper kind:
//    median wrapper / median adapter. Target 0.5×.
// 3. The scale row: N sessions (500 in the full run) ensured 16 at a time:
//    ensure p50/p99, the gateway's longest event-loop block while they start,
//    the private memory of every wrapper summed and the gateway's RSS growth;
//    then idle: the wrappers' CPU over a window (target: 0 ticks, no
//    per-session timer) and the gateway's CPU over the same window (printed,
//    with a loose guard); then all closed, and no process carries any of
//    their lease ids.
//
// The machine is shared: every figure is a median or a sum over many, and
// the guards are ratios.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { carriersOfAny, check, median, now, printTable, quantile, unmeasured } from "./lib.mjs";
import { bareNode, keeperMemory } from "./session-cost/keeper.mjs";
import { cpuTicks, kb, privateKb } from "./session-cost/proc.mjs";
import { closeMany, COMMAND, startMany } from "./session-cost/sessions.mjs";
import { bareSpawnCpuMs, printProfile, startCpuRows, startProfile } from "./session-cost/start-cpu.mjs";
import { spin } from "./spinner.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ACPX = pathToFileURL(join(root, "dist/acpx/index.js")).href;
const TARGET_ENSURE = 1.15;
const TARGET_MEMORY = 0.5;

export function skipReason() {
  return process.platform === "linux" ? undefined : "Linux only (reads /proc/PID/smaps_rollup and /proc/PID/stat)";
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** onEnsureTiming of each controller while the ratio triples run (phase medians say where the rest goes) */
const timings = { native: [], node: [], on: false };

async function controllers(acpx) {
  const dirs = [];
  const make = async (kind) => {
    const dir = mkdtempSync(join(tmpdir(), `proclease-bench-cost-${kind}-`));
    dirs.push(dir);
    // the wrapper is chosen at installation (install-wrapper.ts), from the environment
    process.env.PROCLEASE_WRAPPER = kind;
    try {
      const onEnsureTiming = (t) => void (timings.on && timings[kind].push(t));
      return await acpx.createAcpxLifecycleController({
        stateDir: dir,
        graceMs: 300,
        containment: "auto",
        onEnsureTiming,
      });
    } finally {
      delete process.env.PROCLEASE_WRAPPER;
    }
  };
  const native = await make("native").catch(() => null);
  const node = await make("node");
  return { native, node, dirs };
}

async function direct(acpx) {
  const t0 = now();
  const child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  const client = new acpx.AcpClient({ input: child.stdout, output: child.stdin });
  await client.initialize(20_000);
  await client.newSession(process.cwd(), 20_000);
  const ms = now() - t0;
  client.close();
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));
  return ms;
}

async function ensureMs(ctl, key) {
  const t0 = now();
  const h = await ctl.ensureSession({ sessionKey: key, agentId: "main", command: COMMAND });
  const ms = now() - t0;
  await ctl.closeSession({ handle: h, discardPersistentState: true });
  return ms;
}

/** Interleaved triples, the order rotating; the first is warm-up. */
async function ensureRatios(acpx, ctls, triples) {
  const rows = { native: [], node: [], direct: [] };
  const ratios = { native: [], node: [] };
  let n = 0;
  for (let i = 0; i < triples + 1; i++) {
    const steps = [
      ["direct", () => direct(acpx)],
      ["node", () => ensureMs(ctls.node, `cost:node:${++n}`)],
      ...(ctls.native ? [["native", () => ensureMs(ctls.native, `cost:native:${++n}`)]] : []),
    ];
    const order = steps.map((_, j) => steps[(i + j) % steps.length]);
    const got = {};
    for (const [k, fn] of order) got[k] = await fn();
    if (i === 0) continue;
    for (const k of Object.keys(got)) rows[k].push(got[k]);
    ratios.node.push(got.node / got.direct);
    if (got.native !== undefined) ratios.native.push(got.native / got.direct);
  }
  return { rows, ratios };
}

/** 16 live sessions of one controller: each wrapper's and each adapter's private kB. */
async function memory(ctl, count, tag) {
  const handles = [];
  try {
    for (let i = 0; i < count; i++)
      handles.push(await ctl.ensureSession({ sessionKey: `mem:${tag}:${i}`, agentId: "main", command: COMMAND }));
    await sleep(500); // past start-up, idle
    const wrapper = handles.map((h) => privateKb(h.rootPid)).filter((v) => v !== null);
    const adapter = handles.map((h) => privateKb(h.processGroupId)).filter((v) => v !== null);
    return { wrapper, adapter };
  } finally {
    for (const h of handles) await ctl.closeSession({ handle: h, discardPersistentState: true }).catch(() => undefined);
  }
}

/** N sessions ensured WIDTH at a time; the loop's longest block and the main thread's busiest gap while they start; idle CPU; all closed. */
async function scale(ctl, count, idleMs) {
  const handles = [];
  const rss0 = process.memoryUsage().rss;
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const t0 = now();
  const res = { lat: [], handles, closeMs: NaN, left: [] };
  try {
    res.busy = await spin(async () => {
      res.lat = await startMany(ctl, count, "scale", handles);
    });
    const ensureAllMs = now() - t0;
    // at the memory the start left this process with
    res.bareSpawnMs = await bareSpawnCpuMs();
    loop.disable();
    const longestBlockMs = loop.max / 1e6;
    await sleep(1000);
    const wrapperPrivate = handles.reduce((a, h) => a + (privateKb(h.rootPid) ?? 0), 0);
    const adapterPrivate = handles.reduce((a, h) => a + (privateKb(h.processGroupId) ?? 0), 0);
    const rssGrowth = process.memoryUsage().rss - rss0;
    const before = handles.map((h) => cpuTicks(h.rootPid) ?? 0);
    const cpu0 = process.cpuUsage();
    await sleep(idleMs);
    const cpu = process.cpuUsage(cpu0);
    const wrapperTicks = handles.reduce(
      (a, h, i) => a + Math.max(0, (cpuTicks(h.rootPid) ?? before[i]) - before[i]),
      0,
    );
    Object.assign(res, {
      ensureAllMs,
      longestBlockMs,
      wrapperPrivate,
      adapterPrivate,
      rssGrowth,
      wrapperTicks,
      gatewayCpuMs: (cpu.user + cpu.system) / 1000,
    });
  } finally {
    loop.disable();
    const leases = new Set(handles.map((h) => h.leaseId));
    const tc = now();
    await closeMany(ctl, handles);
    res.closeMs = now() - tc;
    res.left = carriersOfAny(leases);
  }
  return res;
}

export async function run({ quick }) {
  const acpx = await import(ACPX);
  const bare = bareNode();
  const ctls = await controllers(acpx);
  const checks = [];
  try {
    const kind = ctls.native ? "native" : "node";
    const contained = (ctls.native ?? ctls.node).containment.available;
    console.log(
      `  wrapper installed by default here: ${kind}; containment ${contained ? "on" : `off (${(ctls.native ?? ctls.node).containment.why})`}`,
    );
    timings.on = true;
    const { rows, ratios } = await ensureRatios(acpx, ctls, quick ? 8 : 40);
    timings.on = false;
    const quietest = (k) => Math.min(...rows[k]);
    const row = (path, k) => ({
      path,
      "median ms": median(rows[k]).toFixed(1),
      "quietest ms": quietest(k).toFixed(1),
      "median of per-triple ratios": k === "direct" ? "1" : `${median(ratios[k]).toFixed(3)}×`,
      "quietest / quietest": k === "direct" ? "1" : `${(quietest(k) / quietest("direct")).toFixed(3)}×`,
    });
    printTable(
      `ensureSession against direct spawn + initialize + session/new of the minimal adapter (interleaved, ${ratios.node.length} triples)`,
      [
        row("direct spawn + handshake", "direct"),
        row("ensureSession, Node wrapper", "node"),
        ...(ctls.native ? [row("ensureSession, native wrapper", "native")] : []),
      ],
    );
    const phase = (k, f) => (timings[k].length ? median(timings[k].map((t) => t[f])).toFixed(1) : "-");
    // the handshake starts with the spawn, beside the start and the record: its column is what is left of it after the record
    printTable(
      "where ensureSession's time goes (onEnsureTiming, median ms)",
      ["native", "node"]
        .filter((k) => timings[k].length)
        .map((k) => ({
          wrapper: k,
          "lease + cgroup": phase(k, "leaseMs"),
          "spawn → started": phase(k, "wrapperSpawnMs"),
          "record root": phase(k, "recordRootMs"),
          "handshake, after the record": phase(k, "handshakeMs"),
          total: phase(k, "totalMs"),
        })),
    );
    if (!ctls.native)
      checks.push(
        unmeasured(
          "ensureSession (native wrapper) / direct",
          "no native wrapper on this host (run `npx node-gyp rebuild`)",
        ),
      );
    // The full run judges the target on the median of per-triple ratios. The
    // quick run guards against regressions on each side's quietest triple:
    // other tenants only ever add time, and on a saturated 2-core host (load
    // 20+) the gateway's own steps (lease, cgroup, records) stretch while a
    // bare spawn barely does: the median ratio read 1.73-1.83× there against
    // 1.19× at load 12, the Node wrapper 2.1-2.3×.
    else if (quick)
      checks.push(
        check(
          `ensureSession (native wrapper, containment ${contained ? "on" : "off"}) / direct spawn + handshake, quietest of ${rows.native.length} triples each, regression guard`,
          quietest("native") / quietest("direct"),
          "<=",
          1.4,
        ),
      );
    else
      checks.push(
        check(
          `ensureSession (native wrapper, containment ${contained ? "on" : "off"}) / direct spawn + handshake (median of ${ratios.native.length} triples)`,
          median(ratios.native),
          "<=",
          TARGET_ENSURE,
        ),
      );

    const memRows = [];
    for (const [k, ctl] of [
      ["native", ctls.native],
      ["node", ctls.node],
    ]) {
      if (!ctl) continue;
      const m = await memory(ctl, 16, k);
      const w = median(m.wrapper);
      const a = median(m.adapter);
      memRows.push({
        wrapper: k,
        sessions: m.wrapper.length,
        "wrapper private (median)": kb(w),
        "adapter private (median)": kb(a),
        "wrapper / adapter": `${(w / a).toFixed(3)}×`,
      });
      if (k === "native")
        checks.push(
          check(
            "native wrapper private / minimal Node adapter private (median, 16 live sessions)",
            w / a,
            "<=",
            TARGET_MEMORY,
          ),
        );
    }
    printTable("private memory per live session (smaps_rollup Private_Clean + Private_Dirty)", memRows);

    const n = quick ? 50 : 500;
    const idleMs = quick ? 5000 : 60_000;
    const s = await scale(ctls.native ?? ctls.node, n, idleMs);
    printTable(`scale: ${n} sessions of the minimal adapter (${kind} wrapper), ensured 16 at a time`, [
      {
        "ensure p50": `${quantile(s.lat, 0.5).toFixed(0)} ms`,
        "ensure p99": `${quantile(s.lat, 0.99).toFixed(0)} ms`,
        "all ensured": `${(s.ensureAllMs / 1000).toFixed(1)} s`,
        "loop's longest block": `${s.longestBlockMs.toFixed(1)} ms`,
        "wrappers' private (sum)": kb(s.wrapperPrivate),
        "adapters' private (sum)": kb(s.adapterPrivate),
        "gateway RSS growth": kb(s.rssGrowth / 1024),
        "proclease adds (wrappers + gateway growth)": kb(s.wrapperPrivate + s.rssGrowth / 1024),
        "all closed in": `${(s.closeMs / 1000).toFixed(1)} s`,
        "processes left": s.left.length,
      },
    ]);
    printTable(`idle: ${n} live sessions over ${idleMs / 1000} s`, [
      {
        "wrappers' CPU (sum, ticks)": s.wrapperTicks,
        "gateway CPU": `${s.gatewayCpuMs.toFixed(1)} ms`,
        "gateway CPU / window": `${((s.gatewayCpuMs / idleMs) * 100).toFixed(3)} %`,
      },
    ]);
    keeperMemory(bare, checks, quick);
    startCpuRows(s, n, kind, checks, quick);
    const p = await startProfile(ctls.native ?? ctls.node, quick ? 50 : 100);
    printProfile(p);
    checks.push(
      check(`idle wrappers' CPU over ${idleMs / 1000} s (${n} sessions, sum)`, s.wrapperTicks, "<=", 0, "ticks"),
    );
    checks.push(check(`idle gateway CPU / window (${n} sessions)`, (s.gatewayCpuMs / idleMs) * 100, "<=", 1, "%"));
    checks.push(
      check(`processes carrying a lease id after all ${n} sessions closed`, s.left.length, "<=", 0, "processes"),
    );
  } finally {
    bare.stop();
    for (const c of [ctls.native, ctls.node]) await c?.dispose().catch(() => undefined);
    for (const d of ctls.dirs) rmSync(d, { recursive: true, force: true });
  }
  return checks;
}

// `node bench/session-cost.bench.mjs [--quick]`: this file alone, as bench/run.mjs would run it
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { printChecks } = await import("./lib.mjs");
  const checks = await run({ quick: process.argv.includes("--quick") });
  printChecks(checks);
  process.exit(checks.every((c) => c.ok) ? 0 : 1);
}
