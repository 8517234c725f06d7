#!/usr/bin/env node
// An interrupted test run leaves nothing (issue 39, finding 9).
//
//   node .ci/interrupt-check.mjs [--signal SIGTERM|SIGINT] [test files...]
//
// Starts a subset of the suite (`npx vitest run <files>`, in its own process
// group, every process of it carrying a run marker in its environment),
// waits until a test has a leased process inside a lease cgroup, then sends
// the signal to the runner's whole group, as a CI timeout or Ctrl-C does.
// Once the group is gone it asserts, within a bound: no process of the run
// is left (none carrying the run marker, so none carrying a lease marker
// OPENCLAW_ACPX_LEASE_ID), and no cgroup folder the run made is left (the
// workers' own `pl-vitest-<runner>-<worker>` cgroups, holding every lease
// cgroup of the run, and test cgroups named by a pid of the run, such as
// `pl-orphan-<pid>-<n>`). Exit 0 when clean, 1 with the leftovers listed, 2
// when it could not run (not Linux, no cgroup v2, dist/ not built).
// Build first (`npm run build`). Kills what it finds left, after reporting it.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const RUN_KEY = "PROCLEASE_INTERRUPT_CHECK";
const LEASE_KEY = "OPENCLAW_ACPX_LEASE_ID";
const DEFAULT_FILES = [
  "test/acpx/client-terminal.test.ts",
  "test/adversarial/terminal-escapee.test.ts",
  "test/cli/orphan-cgroups.test.ts",
  "test/supervisor/containment.test.ts",
];

const args = process.argv.slice(2);
const sigAt = args.indexOf("--signal");
const signal = sigAt === -1 ? "SIGTERM" : args.splice(sigAt, 2)[1];
if (signal !== "SIGTERM" && signal !== "SIGINT") fail(2, `--signal must be SIGTERM or SIGINT, got ${signal}`);
const files = args.length > 0 ? args : DEFAULT_FILES;

function fail(code, msg) {
  process.stderr.write(`interrupt-check: ${msg}\n`);
  process.exit(code);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(cond, ms, step = 100) {
  const end = Date.now() + ms;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > end) return null;
    await sleep(step);
  }
}

if (process.platform !== "linux") fail(2, "Linux only (cgroups and /proc)");
if (!existsSync(join(ROOT, "dist/acpx/wrapper.cjs"))) fail(2, "dist/ is not built: run `npm run build` first");
const mount = readFileSync("/proc/self/mountinfo", "utf8")
  .split("\n")
  .map((l) => l.split(" - "))
  .find(([left, right]) => right?.split(" ")[0] === "cgroup2" && left.split(" ")[3] === "/")?.[0]
  .split(" ")[4];
if (mount === undefined) fail(2, "no cgroup2 mount");

/** pid -> { env: has run marker, lease: lease id or null, cmd, cgroup } for every process carrying the run marker */
function runProcesses(runId) {
  const needle = Buffer.from(`${RUN_KEY}=${runId}\0`);
  const out = new Map();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`);
      if (env.indexOf(needle) === -1) continue;
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      const lease = /(?:^|\0)OPENCLAW_ACPX_LEASE_ID=([^\0]*)/.exec(env.toString("latin1"))?.[1] ?? null;
      const cmd = readFileSync(`/proc/${d}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      const cgroup =
        readFileSync(`/proc/${d}/cgroup`, "utf8")
          .split("\n")
          .find((l) => l.startsWith("0::"))
          ?.slice(3) ?? "?";
      out.set(Number(d), { lease, cmd, cgroup });
    } catch {
      // gone, or not readable
    }
  }
  return out;
}

/** every cgroup directory under the mount (relative paths), to a bounded depth */
function cgroupDirs(dir = mount, rel = "", depth = 0, out = new Set()) {
  if (depth > 6) return out;
  let names;
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return out;
  }
  for (const n of names) {
    out.add(`${rel}/${n}`);
    cgroupDirs(join(dir, n), `${rel}/${n}`, depth + 1, out);
  }
  return out;
}

/** new cgroups this run made: a worker cgroup of one of its pids, a test cgroup named by one, or anything below those */
function runCgroups(before, pids) {
  const ours = (name) => {
    const m = /^pl-[a-z]+-(\d+)-/.exec(name);
    return m !== null && pids.has(Number(m[1]));
  };
  return [...cgroupDirs()].filter((p) => !before.has(p) && p.split("/").some(ours)).sort();
}

const runId = randomUUID();
const before = cgroupDirs();
const t0 = Date.now();
const runner = spawn("npx", ["vitest", "run", ...files], {
  cwd: ROOT,
  detached: true,
  stdio: ["ignore", "pipe", "pipe"],
  env: { ...process.env, [RUN_KEY]: runId, CI: "1", FORCE_COLOR: "0" },
});
let log = "";
runner.stdout.on("data", (d) => (log += d));
runner.stderr.on("data", (d) => (log += d));
let runnerExit = null;
runner.on("exit", (code, sig) => (runnerExit = { code, sig }));

// mid-run: a leased process of a test inside a lease cgroup
const seen = new Set();
const inLease = await until(() => {
  const procs = runProcesses(runId);
  for (const p of procs.keys()) seen.add(p);
  if (runnerExit !== null) return "finished";
  return [...procs.values()].some((p) => p.lease !== null && p.cgroup.includes("/proclease/")) ? "leased" : null;
}, 180_000);
if (inLease !== "leased") {
  try {
    process.kill(-runner.pid, "SIGKILL");
  } catch {}
  fail(
    2,
    inLease === "finished"
      ? `the run finished before any leased process was seen:\n${log.slice(-3000)}`
      : "no leased process appeared within 180 s",
  );
}
const atSignal = runProcesses(runId);
for (const p of atSignal.keys()) seen.add(p);
const leased = [...atSignal.values()].filter((p) => p.lease !== null).length;
process.kill(-runner.pid, signal);
const signalledAt = Date.now();
process.stdout.write(
  `interrupt-check: ${signal} to the runner's group after ${signalledAt - t0} ms, with ${atSignal.size} process(es) of the run alive (${leased} leased)\n`,
);

// the group gone, then (bounded) nothing of the run
const groupGone = await until(
  () =>
    runnerExit !== null &&
    ![...runProcesses(runId).keys()].some((p) => {
      try {
        const s = readFileSync(`/proc/${p}/stat`, "utf8");
        return Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[2]) === runner.pid;
      } catch {
        return false;
      }
    }),
  30_000,
);
const clean = await until(() => runProcesses(runId).size === 0 && runCgroups(before, seen).length === 0, 15_000);
const elapsed = Date.now() - signalledAt;
const leftProcs = runProcesses(runId);
const leftCgroups = runCgroups(before, seen);
if (clean) {
  process.stdout.write(
    `interrupt-check: clean ${elapsed} ms after the signal (runner ${runnerExit?.sig ?? `exit ${runnerExit?.code}`}): no process of the run, no cgroup of the run\n`,
  );
  process.exit(0);
}
let report = `interrupt-check: left behind ${elapsed} ms after ${signal}${groupGone ? "" : " (the runner's group did not exit within 30 s)"}:\n`;
for (const [pid, p] of leftProcs)
  report += `  process ${pid}${p.lease ? ` (lease ${p.lease})` : ""} in ${p.cgroup}: ${p.cmd}\n`;
for (const c of leftCgroups) report += `  cgroup ${mount}${c}\n`;
process.stderr.write(report);
// then clean up what the check found, so a failed check does not leave it either
for (const pid of leftProcs.keys()) {
  try {
    process.kill(pid, "SIGKILL");
  } catch {}
}
for (const c of leftCgroups.reverse()) {
  try {
    writeFileSync(join(mount, c, "cgroup.kill"), "1");
  } catch {}
}
await until(() => runProcesses(runId).size === 0, 5_000);
for (const c of leftCgroups) {
  await until(() => {
    try {
      rmdirSync(join(mount, c));
      return true;
    } catch (e) {
      return e.code === "ENOENT";
    }
  }, 5_000);
}
process.exit(1);
