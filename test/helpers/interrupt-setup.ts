/**
 * vitest setupFile (vitest.config.ts): makes an interrupted run leave
 * nothing. In each worker, once: the worker moves into a cgroup of its own
 * (worker-cgroup.ts), and on SIGTERM, SIGINT or SIGHUP (the runner's group
 * signalled; also how the runner stops a worker at a normal end) or at exit,
 * the registered cleanups run (interrupt-cleanup.ts) and the worker cgroup is
 * killed and removed; then the signal is raised again with no handler left,
 * so the worker ends as it would have without this file.
 * The handlers are prepended, so a handler that exits at once cannot run
 * before them. PROCLEASE_TEST_WORKER_CGROUP=0 turns the cgroup off.
 */
import { isMainThread } from "node:worker_threads";
import { runInterruptCleanups } from "./interrupt-cleanup.js";
import { enterWorkerCgroup, type WorkerCgroup } from "./worker-cgroup.js";

const KEY = Symbol.for("proclease.test.interrupt-setup");
const g = globalThis as { [KEY]?: true };

if (g[KEY] !== true) {
  g[KEY] = true;
  // a cgroup holds processes, not threads: only a forked worker (the config's pool) moves
  const cg: WorkerCgroup | null =
    process.env.PROCLEASE_TEST_WORKER_CGROUP === "0" || !isMainThread ? null : enterWorkerCgroup(process.ppid);
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    // the cgroup first: whatever the interrupted test was starting ends before the helpers look for their processes
    const left = cg?.end() ?? [];
    runInterruptCleanups();
    if (left.length > 0 && process.env.PROCLEASE_TEST_REPORT_LEFTOVERS === "1") {
      process.stderr.write(
        `worker ${process.pid}: ${left.length} process(es) still in its cgroup were killed: ${left.join(" ")}\n`,
      );
    }
  };
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    process.prependListener(signal, () => {
      finish();
      // vitest makes process.exit throw inside a worker (the test would go on): the signal again, with no handler left, ends it
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    });
  }
  process.prependListener("exit", finish);
}
