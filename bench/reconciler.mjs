// reconcile.bench.mjs's startup reconcile: a controller on the bench's state dir, in the default mode (the
// reconcile on a worker thread) or on the calling thread with facts that count snapshot() calls (a caller's
// own facts object is what puts it there).
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { countedFacts } from "./lib.mjs";

const root = join(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..");
const lib = (p) => import(pathToFileURL(join(root, "dist", p)).href);
const { createAcpxLifecycleController } = await lib("acpx/index.js");
const { getProcessFacts, loadNative } = await lib("facts/index.js");

/** One startup reconcile, ready to run: reap() answers the report, the snapshot() calls (null where not counted) and this thread's CPU time in ms. */
export async function reconciler(dir, graceMs, mode) {
  const counting = mode === "calling-thread" ? countedFacts(getProcessFacts({ backend: "native" })) : null;
  const ctl = await createAcpxLifecycleController({
    stateDir: dir,
    graceMs,
    maintenanceIntervalMs: 0,
    ...(counting ? { facts: counting.facts } : {}),
  });
  const cpu = loadNative().threadCpuTimeNs;
  return {
    reap: async () => {
      const c0 = cpu();
      const report = await ctl.reapStartupOrphans();
      return { report, snapshots: counting ? counting.counts.snapshot : null, cpuMs: (cpu() - c0) / 1e6 };
    },
    dispose: () => ctl.dispose(),
  };
}

// Run as a worker thread started by the bench itself (the floor row), the whole controller lives on that thread:
// it says "ready" once made, then answers one "reap" with the report's actions, the snapshot count and its CPU time.
if (!isMainThread && parentPort !== null) {
  const r = await reconciler(workerData.dir, workerData.graceMs, "calling-thread");
  parentPort.postMessage("ready");
  parentPort.once("message", async () => {
    const { report, snapshots, cpuMs } = await r.reap();
    await r.dispose();
    parentPort.postMessage({
      report: { entries: report.entries.map((e) => ({ action: e.action })) },
      snapshots,
      cpuMs,
    });
  });
}
