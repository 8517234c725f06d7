// What does cgroup containment add to a session? Per session it is one mkdir
// (the lease cgroup, plus a stat for its identity), one write to cgroup.procs
// (the wrapper moving itself in) and one rmdir once the session's processes
// have exited. Measured against the same session shape without it,
// interleaved pair by pair so machine noise hits both:
// - `cat`, moved in by the parent right after spawn: the cheapest child, so
//   the worst ratio there can be (printed, not a target);
// - a wrapper-shaped chain: node starts, (contained: moves ITSELF into the
//   lease cgroup with moveSelfInto, as the wrapper will,) spawns a node
//   "adapter", and both exit on stdin EOF. ensureSession does all of this plus
//   the ACP handshake, so this ratio bounds containment's share of
//   ensureSession from above. Target (issue 13): under 1.02×.
// Also prints the absolute cost of each step, for the README.
//
// Where the time goes: the move (a write to cgroup.procs) write-locks the
// kernel's cgroup_threadgroup_rwsem, which waits for an RCU grace period
// unless cgroup2 is mounted with `favordynmods` (Linux >= 6.0). An idle host
// pays a fraction of a millisecond; a loaded one pays the grace period at its
// current length, and forks everywhere wait for it meanwhile. Spawning
// straight into the cgroup (clone3 with CLONE_INTO_CGROUP) would skip it;
// Node's spawn cannot do that.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { fmtMs, median, now, printTable } from "./lib.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const MODULE = join(root, "dist/containment/cgroup.js");

// The wrapper stand-in. argv: <module> [lease cgroup]. Prints "moved <ms>"
// when it moved itself; the adapter stand-in ends on stdin EOF.
const CHAIN = `
const { spawn } = await import("node:child_process");
const [mod, path] = process.argv.slice(1);
const { moveSelfInto } = await import(mod);
if (path) {
  const t0 = performance.now();
  const r = await moveSelfInto(path);
  if (r.outcome !== "moved") { console.error(JSON.stringify(r)); process.exit(3); }
  process.stdout.write("moved " + (performance.now() - t0) + "\\n");
}
const a = spawn(process.execPath, ["-e", "process.stdin.resume()"], { stdio: ["pipe", "ignore", "inherit"] });
process.stdin.on("end", () => a.stdin.end());
process.stdin.resume();
a.on("close", (code) => process.exit(code ?? 4));
`;

/** One child from spawn to close; `cg.moveInto` (parent-side move) or the child reports its own move. */
function runChild(argv, { moveInto, steps }) {
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
      if (moveInto) {
        const t0 = now();
        const r = await moveInto(c.pid);
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
    const made = await lib.createLeaseCgroup(support, `bench-${process.pid}-${++seq}`);
    steps.mkdir.push(now() - t0);
    if (!made.ok) throw new Error(made.why);
    const path = made.cgroup.path;
    try {
      await runChild(containedArgv(path), { moveInto: parentMoves ? (pid) => lib.moveInto(path, pid) : null, steps });
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
  const catSteps = { mkdir: [], move: [], rmdir: [] };
  const cat = await pairs({
    label: "cat, moved by the parent",
    n: quick ? 150 : 400,
    lib,
    support,
    plainArgv: ["cat"],
    containedArgv: () => ["cat"],
    parentMoves: true,
    steps: catSteps,
  });
  const chainSteps = { mkdir: [], move: [], rmdir: [] };
  const node = process.execPath;
  const chain = await pairs({
    label: "node wrapper → node adapter, wrapper moves itself",
    n: quick ? 40 : 120,
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
  for (const [run, steps] of [["cat", catSteps], ["chain", chainSteps]]) {
    for (const [step, xs] of Object.entries(steps)) stepRows.push({ run, step, median: fmtMs(median(xs)), p90: fmtMs(p90(xs)), samples: xs.length });
  }
  printTable(`containment steps (under ${support.root}; kill via ${support.kill}; favordynmods ${favordynmods ? "on" : "off"})`, stepRows);
  printTable(
    "session spawn-to-exit, plain vs contained (mkdir + move + rmdir), median of interleaved pairs",
    [cat, chain].map((r) => ({ session: r.label, plain: fmtMs(r.plain), contained: fmtMs(r.contained), ratio: `${r.ratio.toFixed(3)}×`, pairs: r.n })),
  );
  console.log(`  load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores while measuring`);
  // Issue 13's target is containment's share of ensureSession (< 1.02×). This
  // chain is far shorter than ensureSession (no ACP handshake), so its ratio
  // is a stricter upper bound, and on a 2-core host its pair-to-pair noise is
  // as large as the margin (1.005× to 1.056× across runs): printed, not gated,
  // until the bench measures ensureSession itself with containment on and off.
  console.log(`  chain ratio ${chain.ratio.toFixed(3)}× (an upper bound on containment's share of ensureSession; issue 13's < 1.02× is not checked here)`);
  return [];
}
