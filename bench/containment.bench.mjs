// What does cgroup containment add to a session? Per session it is one mkdir
// (the lease cgroup, plus a stat for its identity), one write to cgroup.procs
// (the wrapper moving itself in) and one rmdir once the session's processes
// have exited. Measured against the same child spawned and exited without
// it, interleaved pair by pair so machine noise hits both, for two children:
// - `cat` (stdin closed to end it): the cheapest child, so the worst ratio;
// - node: the floor of a real session (the wrapper is a node process, and
//   ensureSession spawns it plus the adapter and speaks ACP on top), so its
//   ratio bounds the containment share of ensureSession from above. Target
//   (issue 13): under 1.02×.
// Also prints the absolute cost of each step (µs), for the README.
//
// Where the time goes: the move (a write to cgroup.procs) write-locks the
// kernel's cgroup_threadgroup_rwsem, which waits for an RCU grace period
// unless cgroup2 is mounted with `favordynmods` (Linux >= 6.0). An idle host
// pays a fraction of a millisecond; a loaded one pays the grace period at its
// current length, and forks everywhere wait for it meanwhile. Spawning
// straight into the cgroup (clone3 with CLONE_INTO_CGROUP) would skip it;
// Node's spawn cannot do that.
import { spawn } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { check, fmtMs, median, now, printTable } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const MODULE = join(root, "dist/containment/cgroup.js");

function runChild(argv, cg, step) {
  return new Promise((resolve, reject) => {
    const c = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "ignore", "ignore"] });
    c.once("error", reject);
    c.once("close", resolve);
    c.once("spawn", async () => {
      if (cg) {
        const t0 = now();
        const r = await cg.moveInto(c.pid);
        step.move.push(now() - t0);
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

async function pairs({ label, argv, n, lib, support, steps }) {
  let seq = 0;
  const plain = () => runChild(argv, null, steps);
  const contained = async () => {
    let t0 = now();
    const made = await lib.createLeaseCgroup(support, `bench-${process.pid}-${++seq}`);
    steps.mkdir.push(now() - t0);
    if (!made.ok) throw new Error(made.why);
    const path = made.cgroup.path;
    await runChild(argv, { moveInto: (pid) => lib.moveInto(path, pid) }, steps);
    t0 = now();
    const rm = await lib.removeCgroup(path, { waitMs: 5000 });
    steps.rmdir.push(now() - t0);
    if (rm.outcome !== "removed") throw new Error(`rmdir ${path}: ${JSON.stringify(rm)}`);
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

export async function run({ quick }) {
  if (process.platform !== "linux") {
    console.log("containment bench: Linux only (cgroup v2)");
    return [];
  }
  if (!existsSync(MODULE)) throw new Error(`${MODULE} missing: run \`npm run build\` first`);
  const lib = await import(MODULE);
  const support = await lib.detectContainment();
  if (!support.available) {
    // a host without writable cgroups runs without containment: nothing to cost
    console.log(`containment bench: containment is off here, nothing to measure (${support.why})`);
    return [];
  }
  const steps = { mkdir: [], move: [], rmdir: [] };
  const cat = await pairs({ label: "cat (cheapest child)", argv: ["cat"], n: quick ? 150 : 400, lib, support, steps });
  const stepRows = Object.entries(steps).map(([step, xs]) => ({ step, median: fmtMs(median(xs)), p90: fmtMs([...xs].sort((x, y) => x - y)[Math.floor(xs.length * 0.9)]), samples: xs.length }));
  const nodeSteps = { mkdir: [], move: [], rmdir: [] };
  const node = await pairs({ label: "node (a wrapper's floor)", argv: [process.execPath, "-e", "process.stdin.resume()"], n: quick ? 40 : 120, lib, support, steps: nodeSteps });
  const favordynmods = readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((l) => l.includes(" - cgroup2 ") && /\bfavordynmods\b/.test(l));
  printTable(`containment cost per session (cgroup under ${support.root}, kill via ${support.kill}, favordynmods ${favordynmods ? "on" : "off"})`, stepRows);
  printTable("spawn-to-exit, plain vs contained (mkdir + move + rmdir), median of interleaved pairs", [cat, node].map((r) => ({ child: r.label, plain: fmtMs(r.plain), contained: fmtMs(r.contained), ratio: `${r.ratio.toFixed(3)}×`, pairs: r.n })));
  const added = median(steps.mkdir) + median(steps.move) + median(steps.rmdir);
  console.log(`  mkdir + move + rmdir: ${fmtMs(added)} per session (medians of the cat run); load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores`);
  return [check("node child contained / plain (bounds the share of ensureSession)", node.ratio, "<=", 1.02)];
}
