// Parent death → tree gone. A stand-in gateway spawns the wrapper (lifeline
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
import { fileURLToPath } from "node:url";
import { check, median, now, printTable } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WRAPPER = join(root, "dist/acpx/wrapper/main.js");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");
const GATEWAY = join(root, "test/fixtures/acpx/gateway.mjs");

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

async function once({ graceMs, stubborn, grandchild, tmp, n }) {
  const lease = `wrapper-bench-${process.pid}-${n}`;
  const needle = Buffer.from(`OPENCLAW_ACPX_LEASE_ID=${lease}\0`);
  const pidfile = join(tmp, `agent-${n}.json`);
  const agentArgs = ["--survive-stdin-close", `--pidfile=${pidfile}`];
  if (stubborn) agentArgs.push("--ignore-sigterm", `--grandchild=${grandchild}`);
  const gw = spawn(
    process.execPath,
    [GATEWAY, "--wrapper", WRAPPER, "--lease", lease, "--grace-ms", String(graceMs), "--", "node", AGENT, ...agentArgs],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  gw.stdout.on("data", (d) => (out += d));
  try {
    await until("started report", () => out.includes('"type":"started"'), 15_000);
    await until("agent pidfile", () => existsSync(pidfile), 15_000);
    const expected = stubborn ? 3 : 2; // wrapper + agent (+ grandchild)
    const carriers = await until("every lease carrier", () => {
      const c = scan(needle);
      return c.length >= expected ? c : null;
    }, 15_000);
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
    console.log("wrapper bench: Linux only (reads /proc/<pid>/environ to see the lease id)");
    return [];
  }
  if (!existsSync(WRAPPER)) throw new Error(`${WRAPPER} missing: run \`npx tsc -p tsconfig.build.json\` first`);
  const graceMs = quick ? 500 : 1000;
  const kinds = ["plain", "setsid", "double-fork"];
  const stubbornRuns = quick ? 3 : 9;
  const coopRuns = quick ? 2 : 5;
  const tmp = mkdtempSync(join(tmpdir(), "proclease-wrapper-bench-"));
  const rows = [];
  const overheads = [];
  const coopRatios = [];
  let leftovers = 0;
  let n = 0;
  try {
    for (let i = 0; i < stubbornRuns; i++) {
      const grandchild = kinds[i % kinds.length];
      const r = await once({ graceMs, stubborn: true, grandchild, tmp, n: ++n });
      overheads.push(r.elapsed - graceMs);
      leftovers += r.leftovers.length;
      rows.push({ tree: `stubborn + ${grandchild} grandchild`, carriers: r.carriers, grace: `${graceMs} ms`, gone_after: `${r.elapsed.toFixed(1)} ms`, minus_grace: `${(r.elapsed - graceMs).toFixed(1)} ms`, leftovers: r.leftovers.length });
    }
    for (let i = 0; i < coopRuns; i++) {
      const r = await once({ graceMs, stubborn: false, tmp, n: ++n });
      coopRatios.push(r.elapsed / graceMs);
      leftovers += r.leftovers.length;
      rows.push({ tree: "cooperative adapter", carriers: r.carriers, grace: `${graceMs} ms`, gone_after: `${r.elapsed.toFixed(1)} ms`, minus_grace: "-", leftovers: r.leftovers.length });
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  printTable(`gateway SIGKILL → no process carries the lease id (grace ${graceMs} ms)`, rows);
  console.log(`  stubborn: median ${median(overheads).toFixed(1)} ms over the grace, max ${Math.max(...overheads).toFixed(1)} ms`);
  return [
    check("stubborn tree gone after grace + (median)", median(overheads), "<=", 100, "ms"),
    check("stubborn tree: SIGKILL waited for the grace (min elapsed - grace)", Math.min(...overheads), ">=", 0, "ms"),
    check("cooperative tree gone, fraction of grace (median)", median(coopRatios), "<=", 0.5),
    check("processes still carrying the lease id afterwards", leftovers, "<=", 0, "processes"),
  ];
}
