// What one child_process.spawn costs the calling thread as the process's
// memory grows (Node 20's libuv forks on Linux, and a fork copies the
// page tables of the parent's memory): the main-thread CPU of one bare spawn
// with the wrapper's four pipes (bench/session-cost/start-cpu.mjs bareSpawnCpuMs),
// median of 30, after filling 0, 100 and 300 MB more of this process.
//
//   node bench/fork-cost.mjs
import { printTable } from "./lib.mjs";
import { bareSpawnCpuMs } from "./session-cost/start-cpu.mjs";

const ballast = [];
const rows = [];
for (const more of [0, 100, 200]) {
  for (let i = 0; i < more; i++) ballast.push(Buffer.alloc(1 << 20, 1));
  const ms = await bareSpawnCpuMs(30);
  rows.push({
    RSS: `${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MB`,
    "one spawn's main-thread CPU (median of 30)": `${ms.toFixed(2)} ms`,
  });
}
printTable("one bare spawn against the spawning process's memory", rows);
