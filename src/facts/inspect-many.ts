/**
 * inspectMany's input rule, and the loop the backends without a batch read
 * (procfs, ps) answer it with.
 */
import type { InspectOptions, ProcessDetails } from "./types.js";
import { assertEnvKeys, assertPid } from "./validate.js";

/** Throws as inspect would for the first bad pid or key, before anything is read. */
export function assertBatch(pids: unknown, keys: readonly string[] | undefined): asserts pids is readonly number[] {
  if (!Array.isArray(pids)) throw new TypeError("pids must be an array of process ids");
  pids.forEach((pid: unknown, i) => assertPid(pid, `pids[${i}]`));
  assertEnvKeys(keys, "opts.envKeys");
}

/** inspect for each pid, `concurrency` at a time, results in request order. */
export async function inspectEach(
  inspect: (pid: number, opts?: InspectOptions) => Promise<ProcessDetails | null>,
  pids: readonly number[],
  opts: InspectOptions | undefined,
  concurrency: number,
): Promise<Array<ProcessDetails | null>> {
  assertBatch(pids, opts?.envKeys);
  const out = new Array<ProcessDetails | null>(pids.length);
  let next = 0;
  const worker = async () => {
    while (next < pids.length) {
      const i = next++;
      out[i] = await inspect(pids[i]!, opts);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, pids.length) }, worker));
  return out;
}
