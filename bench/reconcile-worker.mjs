// reconcile.bench.mjs's startup reconcile, run in a worker thread: the
// controller on the bench's state dir, with facts that count snapshot()
// calls. Says "ready" once made, then answers one "reap" with the report's
// actions, the snapshot count and this thread's CPU time.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parentPort, workerData } from "node:worker_threads";
import { countedFacts } from "./lib.mjs";

const root = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const lib = (p) => import(pathToFileURL(join(root, "dist", p)).href);
const { createAcpxLifecycleController } = await lib("acpx/index.js");
const { getProcessFacts, loadNative } = await lib("facts/index.js");

const counting = countedFacts(getProcessFacts({ backend: "native" }));
const ctl = await createAcpxLifecycleController({ stateDir: workerData.dir, facts: counting.facts, graceMs: workerData.graceMs, maintenanceIntervalMs: 0 });
parentPort.postMessage("ready");
parentPort.once("message", async () => {
  const cpu = loadNative().threadCpuTimeNs;
  const c0 = cpu();
  const report = await ctl.reapStartupOrphans();
  const cpuMs = (cpu() - c0) / 1e6;
  await ctl.dispose();
  parentPort.postMessage({ report: { entries: report.entries.map((e) => ({ action: e.action })) }, snapshots: counting.counts.snapshot, cpuMs });
});
