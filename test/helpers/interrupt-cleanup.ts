/**
 * What a test worker still cleans up when the run is interrupted (SIGTERM,
 * SIGINT or SIGHUP to the runner's process group, or the runner gone): the
 * cleanups test helpers register here (kill what they tracked, remove their
 * state dirs and the cgroups those name, remove cgroups they made outside the
 * worker's own), and the worker's cgroup (worker-cgroup.ts), killed and
 * removed with everything the worker's tests started inside it.
 *
 * Cleanups are synchronous: they run in a signal handler, and no test code
 * may run between them (an async one would let the interrupted test go on
 * spawning). Each runs at most once; one that throws does not stop the rest.
 * At a normal end they run too (the runner stops its workers with SIGTERM):
 * by then the helpers' own afterEach/afterAll hooks have emptied them.
 */
type Cleanup = () => void;

const cleanups: Cleanup[] = [];

/** Registers a synchronous cleanup for an interrupted run (and the worker's end). */
export function onInterrupt(fn: Cleanup): void {
  cleanups.push(fn);
}

/** Runs every registered cleanup once, the last registered first. */
export function runInterruptCleanups(): void {
  for (const fn of cleanups.splice(0).reverse()) {
    try {
      fn();
    } catch (e) {
      process.stderr.write(`interrupt cleanup failed: ${e instanceof Error ? e.message : String(e)}\n`);
    }
  }
}
