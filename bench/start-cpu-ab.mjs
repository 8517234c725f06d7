// Before and after, in one process: the main thread's busiest gap while
// sessions start 16 at a time (session-cost.bench.mjs's row), for this
// checkout's build and another's (a build of the commit before a change),
// in alternating rounds so a noisy minute of the host falls on both.
//
//   node bench/start-cpu-ab.mjs --baseline /path/to/other/checkout [--rounds 6] [--sessions 100]
//
// The other checkout needs its own `npm run build` and native build/ (a copy
// of this one's works when native/ did not change).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { median, printTable } from "./lib.mjs";
import { closeMany, startMany } from "./session-cost/sessions.mjs";
import { bareSpawnCpuMs } from "./session-cost/start-cpu.mjs";
import { spin } from "./spinner.mjs";

const { values } = parseArgs({
  options: {
    baseline: { type: "string" },
    rounds: { type: "string", default: "6" },
    sessions: { type: "string", default: "100" },
  },
});
if (values.baseline === undefined) throw new Error("--baseline <checkout> is required");
const here = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const sides = [
  ["before (baseline)", resolve(values.baseline)],
  ["after (this checkout)", here],
];
const rounds = Number(values.rounds);
const sessions = Number(values.sessions);

const made = [];
for (const [name, root] of sides) {
  const acpx = await import(pathToFileURL(join(root, "dist/acpx/index.js")).href);
  const dir = mkdtempSync(join(tmpdir(), "proclease-bench-startab-"));
  const ctl = await acpx.createAcpxLifecycleController({ stateDir: dir, graceMs: 300, containment: "auto" });
  // a first session each: the code paths warm before any round is measured
  await closeMany(ctl, await warm(ctl));
  made.push({ name, ctl, dir, maxCpu: [], maxGap: [], floor: [] });
}

async function warm(ctl) {
  const hs = [];
  await startMany(ctl, 16, "warm", hs);
  return hs;
}

try {
  for (let r = 0; r < rounds; r++) {
    for (const m of r % 2 ? [...made].reverse() : made) {
      const handles = [];
      const busy = await spin(() => startMany(m.ctl, sessions, `ab:${r}`, handles));
      const floor = await bareSpawnCpuMs();
      await closeMany(m.ctl, handles);
      m.floor.push(floor);
      m.maxCpu.push(busy.maxCpu);
      m.maxGap.push(busy.maxGap);
      console.log(
        `  round ${r + 1} ${m.name}: most main-thread CPU between two ticks ${busy.maxCpu.toFixed(2)} ms; one bare spawn ${floor.toFixed(2)} ms`,
      );
    }
  }
  printTable(
    `most main-thread CPU between two ticks while ${sessions} sessions start 16 at a time, ${rounds} alternating rounds each`,
    made.map((m) => ({
      build: m.name,
      "median of rounds": `${median(m.maxCpu).toFixed(2)} ms`,
      "lowest round": `${Math.min(...m.maxCpu).toFixed(2)} ms`,
      "highest round": `${Math.max(...m.maxCpu).toFixed(2)} ms`,
      "one bare spawn (median of rounds)": `${median(m.floor).toFixed(2)} ms`,
      "busiest gap / bare spawn (median of rounds)": `${median(m.maxCpu.map((c, i) => c / m.floor[i])).toFixed(1)}×`,
      "longest gap (median of rounds)": `${median(m.maxGap).toFixed(1)} ms`,
    })),
  );
} finally {
  for (const m of made) {
    await m.ctl.dispose().catch(() => undefined);
    rmSync(m.dir, { recursive: true, force: true });
  }
}
