// What does supervision cost, and how fast is the verified tree kill?
// 1. spawn-to-exit of `true` through the supervisor vs a bare
//    child_process.spawn with the same stdio, interleaved pair by pair so
//    machine noise hits both; the median of the per-pair ratios.
// 2. killProcessTree on a freshly built 201-process tree (sh → 10 sh → 19
//    sleeps each) vs tree-kill on an identical fresh tree, both timed until
//    every process of the tree is gone.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadNative } from "../dist/facts/index.js";
import { createProcessSupervisor, killProcessTree } from "../dist/supervisor/index.js";
import { check, fmtMs, median, now, printTable, alive } from "./lib.mjs";

const require = createRequire(import.meta.url);
const treeKill = require("tree-kill");

const FANOUT = 10;
const LEAVES = 19; // 1 + 10 + 10 × 19 = 201 processes

export async function run({ quick }) {
  const checks = [];
  checks.push(...(await spawnOverhead(quick ? 300 : 600, quick)));
  checks.push(...(await treeKillComparison(quick ? 1 : 3)));
  return checks;
}

// The target (1.1x) is judged by the full run. The quick run gates a
// regression guard above the spread of unchanged code on a loaded 2-core
// host: 1.08-1.16x at load 5-9 for this code and the code before its run
// object alike, 1.02-1.05x idle, and 1.19-1.20x on a host slow at process
// start (the same build, both tries of one CI run). An extra fsync'd lease
// write or process per run costs more than the 30% it leaves.
const SPAWN_TARGET = { quick: 1.3, full: 1.1 };

async function spawnOverhead(pairs, quick) {
  // the supervisor's own bookkeeping against a bare spawn: containment off, so both sides run the same one process
  // (a contained run adds its cgroup and the shim's exec, which bench/containment.bench.mjs measures)
  const sup = createProcessSupervisor({ containment: "off" });
  const bare = () =>
    new Promise((resolve, reject) => {
      const c = spawn("true", [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
      c.stdin.end();
      c.once("error", reject);
      c.once("close", resolve);
    });
  const supervised = async () => {
    const r = await sup.spawn({ mode: "child", sessionId: "bench", backendId: "bench", argv: ["true"] });
    await r.wait();
  };
  for (let i = 0; i < 10; i++) {
    await bare();
    await supervised();
  }
  const a = [];
  const b = [];
  const ratios = [];
  for (let i = 0; i < pairs; i++) {
    // alternate which one goes first so neither always gets the warmer cache
    const order = i % 2 ? [bare, supervised] : [supervised, bare];
    const t = [];
    for (const fn of order) {
      const t0 = now();
      await fn();
      t.push(now() - t0);
    }
    const [tb, ts] = i % 2 ? t : [t[1], t[0]];
    a.push(tb);
    b.push(ts);
    ratios.push(ts / tb);
  }
  const ratio = median(ratios);
  printTable("spawn-to-exit of `true` (median of interleaved pairs)", [
    { path: "child_process.spawn", median: fmtMs(median(a)), pairs },
    { path: "supervisor.spawn + wait", median: fmtMs(median(b)), pairs },
    { path: "ratio (median of per-pair ratios)", median: `${ratio.toFixed(3)}×`, pairs },
  ]);
  return [
    check(
      `supervisor spawn-to-exit / bare spawn${quick ? " (regression guard)" : ""}`,
      ratio,
      "<=",
      quick ? SPAWN_TARGET.quick : SPAWN_TARGET.full,
    ),
  ];
}

async function treeKillComparison(rounds) {
  // Orphans of a killed tree would stay zombies under a non-reaping pid 1: become
  // their subreaper and reap exactly the tree's pids after each round.
  const binding = loadNative();
  const subreaper = binding ? binding.setChildSubreaper() === 0 : false;
  const ours = [];
  const peer = [];
  for (let i = 0; i < rounds; i++) {
    for (const which of i % 2 ? ["tree-kill", "ours"] : ["ours", "tree-kill"]) {
      const tree = await buildTree();
      const t0 = now();
      if (which === "ours") {
        const r = await killProcessTree(tree.root, { graceMs: 3000 });
        if (r.outcome !== "killed") throw new Error(`killProcessTree: ${r.outcome}`);
        await allGone(tree.pids);
        ours.push(now() - t0);
      } else {
        await new Promise((resolve, reject) =>
          treeKill(tree.root, "SIGTERM", (err) => (err ? reject(err) : resolve())),
        );
        await allGone(tree.pids);
        peer.push(now() - t0);
      }
      if (subreaper) binding.reapChildren(tree.pids);
    }
  }
  const mo = median(ours);
  const mp = median(peer);
  printTable(
    `tree kill of ${1 + FANOUT + FANOUT * LEAVES} processes (median of ${rounds} fresh trees each, until all gone)`,
    [
      { tool: "killProcessTree (verified, leaves first)", median: fmtMs(mo) },
      { tool: "tree-kill 1.2.2", median: fmtMs(mp) },
      { tool: "ratio ours / tree-kill", median: `${(mo / mp).toFixed(3)}×` },
    ],
  );
  // measured 0.010–0.023× in quick runs on a loaded 2-core host (tree-kill runs ps per level);
  // a 1× gate sat 50–100× above that and would only catch a tree kill slower than a ps walk per level
  return [check("killProcessTree / tree-kill (201-process tree)", mo / mp, "<=", 0.1)];
}

/**
 * sh → FANOUT sh → LEAVES sleeps each; resolves once every sleep has exec'd,
 * so no process of the tree is still being forked when a kill starts (loops
 * use shell arithmetic, not $(seq), so no transient subshells inflate the count).
 */
async function buildTree() {
  const loop = (n, body) => `i=0; while [ $i -lt ${n} ]; do ${body} & i=$((i+1)); done; wait`;
  const script = loop(FANOUT, `sh -c '${loop(LEAVES, "sleep 1000")}'`);
  const root = spawn("sh", ["-c", script], { detached: true, stdio: "ignore" });
  const want = 1 + FANOUT + FANOUT * LEAVES;
  const end = Date.now() + 20_000;
  for (;;) {
    const pids = descendants(root.pid);
    const sleeps = pids.filter(isSleep).length;
    if (pids.length + 1 === want && sleeps === FANOUT * LEAVES) return { root: root.pid, pids: [root.pid, ...pids] };
    if (Date.now() > end) throw new Error(`tree reached ${pids.length + 1}/${want} processes (${sleeps} sleeps)`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function descendants(rootPid) {
  const out = [];
  let frontier = [rootPid];
  while (frontier.length) {
    const next = [];
    for (const p of frontier) {
      let kids = "";
      try {
        kids = readFileSync(`/proc/${p}/task/${p}/children`, "utf8");
      } catch {
        continue;
      }
      for (const k of kids.split(" ").filter(Boolean)) next.push(Number(k));
    }
    out.push(...next);
    frontier = next;
  }
  return out;
}

function isSleep(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").startsWith("sleep\0");
  } catch {
    return false;
  }
}

async function allGone(pids) {
  const end = Date.now() + 20_000;
  let left = pids;
  for (;;) {
    left = left.filter(alive);
    if (left.length === 0) return;
    if (Date.now() > end) throw new Error(`${left.length} processes survived`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
