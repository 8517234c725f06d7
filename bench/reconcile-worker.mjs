// reconcile.bench.mjs's startup reconcile, on whichever thread imports this:
// the controller on the bench's state dir, with facts that count snapshot()
// calls. Run as a worker thread, it says "ready" once made, then answers one
// "reap" with the report's actions, the snapshot count and its CPU time.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { countedFacts } from "./lib.mjs";

const root = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const lib = (p) => import(pathToFileURL(join(root, "dist", p)).href);
const { createAcpxLifecycleController } = await lib("acpx/index.js");
const { getProcessFacts, loadNative } = await lib("facts/index.js");

/** One startup reconcile, ready to run: reap() answers the report, the snapshot() calls and this thread's CPU time in ms. */
export async function reconciler(dir, graceMs) {
  const counting = countedFacts(getProcessFacts({ backend: "native" }));
  const ctl = await createAcpxLifecycleController({ stateDir: dir, facts: counting.facts, graceMs, maintenanceIntervalMs: 0 });
  const cpu = loadNative().threadCpuTimeNs;
  return {
    reap: async () => {
      const c0 = cpu();
      const report = await ctl.reapStartupOrphans();
      return { report, snapshots: counting.counts.snapshot, cpuMs: (cpu() - c0) / 1e6 };
    },
    dispose: () => ctl.dispose(),
  };
}

if (!isMainThread && parentPort !== null) {
  const r = await reconciler(workerData.dir, workerData.graceMs);
  parentPort.postMessage("ready");
  parentPort.once("message", async () => {
    const { report, snapshots, cpuMs } = await r.reap();
    await r.dispose();
    parentPort.postMessage({ report: { entries: report.entries.map((e) => ({ action: e.action })) }, snapshots, cpuMs });
  });
}
