// 1. Start-up cost (issue 10): the wrapper as the controller starts it (the
//    installed .cjs shim requiring dist/acpx/wrapper.cjs, stdio [pipe, pipe,
//    pipe, pipe], the two markers in its env), spawn → its "started" report
//    on the lifeline, against spawn → exit of a bare `node -e 0`. Interleaved
//    pairs (the order flips every pair), median of the per-pair ratios.
//    Target <= 1.15. Plus its memory (/proc/PID/smaps_rollup) while it
//    supervises an idle adapter, against an idle bare node started beside it,
//    both read at the same moment: the check is on private memory
//    (Private_Clean + Private_Dirty), median ratio, target <= 1.25 (quick
//    guard 1.3). PSS is printed beside it, not checked: it splits shared
//    pages among every process mapping them, so the more Node processes a
//    host runs, the smaller both PSS figures and the larger the wrapper's
//    fixed extra reads as a ratio (1.18x on an idle host, 1.26x beside a busy
//    test run), which a gate that must hold on any host cannot use.
//
// 2. Parent death → tree gone, for the Node wrapper and, where it was built,
// the native one (native/wrapper_linux.c). A stand-in gateway spawns the wrapper (lifeline
// on fd 3) around the fixture ACP agent; the bench SIGKILLs the gateway and
// measures until no process carries the lease id any more.
//
// - stubborn: the adapter ignores SIGTERM and has a SIGTERM-ignoring
//   grandchild (plain / setsid / double-fork in turn), so the tree can only
//   end through the SIGKILL fallback after the grace G. Target (issue 4):
//   elapsed - G <= 100 ms.
// - cooperative: the adapter dies on SIGTERM; the tree should be gone long
//   before the grace runs out (ratio elapsed / G, target <= 0.5).
//
// Timing: the lease carriers are listed once before the kill (one /proc
// scan), then those pids are polled every 2 ms (a full scan of a busy /proc
// takes tens of ms and would blur the number); a full scan afterwards checks
// that nothing else carries the lease.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { check, fmtMs, median, now, printTable } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// the bundle the controller runs (scripts/bundle-wrapper.mjs), not tsc's per-file output
const WRAPPER = join(root, "dist/acpx/wrapper.cjs");
const INSTALL = join(root, "dist/acpx/launch/install-wrapper.js");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");
const GATEWAY = join(root, "test/fixtures/acpx/gateway.mjs");

/** The native wrapper built beside the addon, or null (not Linux, not built). */
function nativeWrapper() {
  const addon = join(root, "build/Release/proclease.node");
  const p = join(dirname(addon), "proclease-wrapper");
  return existsSync(p) ? p : null;
}

function carries(pid, needle) {
  try {
    return readFileSync(`/proc/${pid}/environ`).indexOf(needle) !== -1;
  } catch {
    return false;
  }
}

function scan(needle) {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => carries(pid, needle));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, timeoutMs, everyMs = 5) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

function bareNode() {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const c = spawn(process.execPath, ["-e", "0"], { stdio: "ignore" });
    c.once("error", reject);
    c.once("exit", () => resolve(now() - t0));
  });
}

/** Spawns the wrapper like launch.ts does; resolves at its "started" report (and, later, its exit). */
function startWrapper(wrapperPath, adapter, n) {
  const t0 = now();
  const c = spawn(process.execPath, [wrapperPath, "--grace-ms", "200", "--", ...adapter], {
    stdio: ["pipe", "pipe", "pipe", "pipe"],
    env: {
      ...process.env,
      OPENCLAW_ACPX_LEASE_ID: `wrapper-start-bench-${process.pid}-${n}`,
      OPENCLAW_GATEWAY_INSTANCE_ID: `bench-${process.pid}`,
    },
  });
  c.stdout.resume();
  c.stderr.resume();
  const exited = new Promise((r) => c.once("exit", r));
  const started = new Promise((resolve, reject) => {
    let buf = "";
    c.stdio[3].on("data", (d) => {
      buf += d;
      if (buf.includes('"type":"started"')) resolve(now() - t0);
    });
    c.once("exit", (code, sig) => reject(new Error(`wrapper exited before "started" (${code ?? sig})`)));
  });
  return { child: c, started, exited };
}

/** PSS and private memory (Private_Clean + Private_Dirty) in kB, from one read of smaps_rollup. */
function memKb(pid) {
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const field = (name) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(t);
    if (!m) throw new Error(`no ${name} in /proc/${pid}/smaps_rollup`);
    return Number(m[1]);
  };
  return { pss: field("Pss"), priv: field("Private_Clean") + field("Private_Dirty") };
}

export async function startCost({ pairs, pssRounds }) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-wrapper-start-"));
  const { installWrapper } = await import(pathToFileURL(INSTALL).href);
  // the Node wrapper's start against a bare node (the native one is measured in session-cost.bench.mjs)
  const { wrapperPath } = await installWrapper(dir, { kind: "node" });
  const bare = [];
  const wrapped = [];
  const ratios = [];
  const pss = [];
  try {
    for (let i = 0; i < 3; i++) {
      // warm-up: page cache, the addon's first load
      await bareNode();
      const w = startWrapper(wrapperPath, ["/bin/true"], `warm-${i}`);
      await w.started;
      await w.exited;
    }
    for (let i = 0; i < pairs; i++) {
      let b;
      let t;
      const runWrapper = async () => {
        const w = startWrapper(wrapperPath, ["/bin/true"], i);
        t = await w.started;
        await w.exited; // its adapter-exit sweep must not overlap the next measurement
      };
      if (i % 2 === 0) {
        b = await bareNode();
        await runWrapper();
      } else {
        await runWrapper();
        b = await bareNode();
      }
      bare.push(b);
      wrapped.push(t);
      ratios.push(t / b);
    }
    for (let i = 0; i < pssRounds; i++) {
      const w = startWrapper(wrapperPath, ["sleep", "60"], `pss-${i}`);
      const idle = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" });
      try {
        await w.started;
        await sleep(500); // both past start-up, idle
        const wk = memKb(w.child.pid);
        const bk = memKb(idle.pid);
        pss.push({
          wrapper: wk.pss,
          bare: bk.pss,
          ratio: wk.pss / bk.pss,
          wrapperPriv: wk.priv,
          barePriv: bk.priv,
          privRatio: wk.priv / bk.priv,
        });
      } finally {
        idle.kill("SIGKILL");
        w.child.stdio[3].destroy(); // lifeline EOF: the wrapper reaps its sleep and exits
        await w.exited;
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { bare, wrapped, ratios, pss };
}

async function once({ graceMs, stubborn, grandchild, tmp, n, wrapper = WRAPPER }) {
  const lease = `wrapper-bench-${process.pid}-${n}`;
  const needle = Buffer.from(`OPENCLAW_ACPX_LEASE_ID=${lease}\0`);
  const pidfile = join(tmp, `agent-${n}.json`);
  const agentArgs = ["--survive-stdin-close", `--pidfile=${pidfile}`];
  if (stubborn) agentArgs.push("--ignore-sigterm", `--grandchild=${grandchild}`);
  const gw = spawn(
    process.execPath,
    [GATEWAY, "--wrapper", wrapper, "--lease", lease, "--grace-ms", String(graceMs), "--", "node", AGENT, ...agentArgs],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  gw.stdout.on("data", (d) => (out += d));
  try {
    await until("started report", () => out.includes('"type":"started"'), 15_000);
    await until("agent pidfile", () => existsSync(pidfile), 15_000);
    const expected = stubborn ? 3 : 2; // wrapper + agent (+ grandchild)
    const carriers = await until(
      "every lease carrier",
      () => {
        const c = scan(needle);
        return c.length >= expected ? c : null;
      },
      15_000,
    );
    const t0 = now();
    gw.kill("SIGKILL");
    await until("tree gone", () => carriers.every((pid) => !carries(pid, needle)), graceMs + 10_000, 2);
    const elapsed = now() - t0;
    const leftovers = scan(needle);
    return { elapsed, carriers: carriers.length, leftovers };
  } finally {
    if (gw.exitCode === null && gw.signalCode === null) gw.kill("SIGKILL");
    for (const pid of scan(needle)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  }
}

export async function run({ quick }) {
  if (process.platform !== "linux") {
    return [unmeasured("wrapper bench", "Linux only (reads /proc/<pid>/environ to see the lease id)")];
  }
  if (!existsSync(WRAPPER)) throw new Error(`${WRAPPER} missing: run \`npm run build\` first`);
  const sc = await startCost({ pairs: quick ? 40 : 80, pssRounds: quick ? 3 : 7 });
  printTable('wrapper start: spawn → "started" report, against spawn → exit of `node -e 0` (interleaved pairs)', [
    {
      pairs: sc.ratios.length,
      "node -e 0 (median)": fmtMs(median(sc.bare)),
      "wrapper → started (median)": fmtMs(median(sc.wrapped)),
      "ratio (median of pairs)": `${median(sc.ratios).toFixed(3)}×`,
      "quietest / quietest": `${(Math.min(...sc.wrapped) / Math.min(...sc.bare)).toFixed(3)}×`,
    },
  ]);
  const pssMed = (k) => median(sc.pss.map((p) => p[k]));
  const mb = (k) => `${(pssMed(k) / 1024).toFixed(1)} MB`;
  printTable("Node wrapper memory while it supervises an idle adapter, beside an idle bare node", [
    {
      rounds: sc.pss.length,
      measure: "private",
      wrapper: mb("wrapperPriv"),
      "bare node": mb("barePriv"),
      "ratio (median)": `${pssMed("privRatio").toFixed(3)}×`,
    },
    {
      rounds: sc.pss.length,
      measure: "PSS (printed only)",
      wrapper: mb("wrapper"),
      "bare node": mb("bare"),
      "ratio (median)": `${pssMed("ratio").toFixed(3)}×`,
    },
  ]);
  const graceMs = quick ? 500 : 1000;
  const kinds = ["plain", "setsid", "double-fork"];
  const stubbornRuns = quick ? 3 : 9;
  const coopRuns = quick ? 2 : 5;
  // the native wrapper (native/wrapper_linux.c) where it was built: the same stand-in gateway and trees
  const native = nativeWrapper();
  const wrappers = [["node", WRAPPER], ...(native ? [["native", native]] : [])];
  const tmp = mkdtempSync(join(tmpdir(), "proclease-wrapper-bench-"));
  const rows = [];
  const overheads = { node: [], native: [] };
  const coopRatios = { node: [], native: [] };
  let leftovers = 0;
  let n = 0;
  try {
    for (const [kind, path] of wrappers) {
      for (let i = 0; i < stubbornRuns; i++) {
        const grandchild = kinds[i % kinds.length];
        const r = await once({ graceMs, stubborn: true, grandchild, tmp, n: ++n, wrapper: path });
        overheads[kind].push(r.elapsed - graceMs);
        leftovers += r.leftovers.length;
        rows.push({
          wrapper: kind,
          tree: `stubborn + ${grandchild} grandchild`,
          carriers: r.carriers,
          grace: `${graceMs} ms`,
          gone_after: `${r.elapsed.toFixed(1)} ms`,
          minus_grace: `${(r.elapsed - graceMs).toFixed(1)} ms`,
          leftovers: r.leftovers.length,
        });
      }
      for (let i = 0; i < coopRuns; i++) {
        const r = await once({ graceMs, stubborn: false, tmp, n: ++n, wrapper: path });
        coopRatios[kind].push(r.elapsed / graceMs);
        leftovers += r.leftovers.length;
        rows.push({
          wrapper: kind,
          tree: "cooperative adapter",
          carriers: r.carriers,
          grace: `${graceMs} ms`,
          gone_after: `${r.elapsed.toFixed(1)} ms`,
          minus_grace: "-",
          leftovers: r.leftovers.length,
        });
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  printTable(`gateway SIGKILL → no process carries the lease id (grace ${graceMs} ms)`, rows);
  for (const [kind] of wrappers)
    console.log(
      `  ${kind} wrapper, stubborn: median ${median(overheads[kind]).toFixed(1)} ms over the grace, max ${Math.max(...overheads[kind]).toFixed(1)} ms`,
    );
  const perKind = wrappers.flatMap(([kind]) => [
    check(`${kind} wrapper: stubborn tree gone after grace + (median)`, median(overheads[kind]), "<=", 100, "ms"),
    check(
      `${kind} wrapper: stubborn tree: SIGKILL waited for the grace (min elapsed - grace)`,
      Math.min(...overheads[kind]),
      ">=",
      0,
      "ms",
    ),
    check(`${kind} wrapper: cooperative tree gone, fraction of grace (median)`, median(coopRatios[kind]), "<=", 0.5),
  ]);
  return [
    // Issue 10's target is 1.15×, held by the full run on the median of the
    // interleaved pairs. `started` follows libuv's wait for the adapter's
    // exec, which a loaded host slows more than a bare node start: quick runs
    // of the same build read 1.07–1.16× on a quiet 2-core host, 1.20–1.22× on
    // a slow one, and 1.37–1.49× beside two other test runs on 2 cores. So the
    // quick (CI) gate compares each side's quietest run, which load can only
    // lengthen: 1.3×, a regression guard that host load cannot trip and that
    // an ESM entry (1.46× when measured) still does.
    quick
      ? check(
          "wrapper start: spawn → started / node -e 0 (each side's quietest of the interleaved runs), regression guard",
          Math.min(...sc.wrapped) / Math.min(...sc.bare),
          "<=",
          1.3,
        )
      : check(
          "wrapper start: spawn → started / node -e 0 (median of interleaved pairs)",
          median(sc.ratios),
          "<=",
          1.15,
        ),
    // The target, 1.25×, is judged by the full run. Private memory is the
    // same on a fast host and a slow one, but not to the last page: quick
    // runs on one host read 1.21–1.22×, so the quick (CI) guard is 1.3×, a
    // regression guard that a few hundred kB of host variance cannot trip
    // and that a wrapper loading the ACP SDK or a second module graph does.
    check("Node wrapper private memory / idle bare node's (median)", pssMed("privRatio"), "<=", quick ? 1.3 : 1.25),
    ...perKind,
    check("processes still carrying the lease id afterwards", leftovers, "<=", 0, "processes"),
  ];
}
