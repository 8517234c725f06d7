/**
 * The Node wrapper's end record (the native wrapper's is
 * native/wrapper_record_linux.c; the reader, src/ownership/leases/end-records.ts):
 * when it ends its tree with nobody asking (its gateway went away without
 * "end"), it says so in `<PROCLEASE_END_DIR>/<lease id>.json`, "sweeping"
 * before the sweep and "done" with the pids after it, so the reconcile that
 * settles the lease names the wrapper as who ended it.
 */
import { renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { END_DIR_ENV_KEY } from "./protocol.js";

export type EndRecordWriter = (reason: "parent-gone", ended: readonly number[] | null, startTime: string) => void;

/** Takes the folder out of the environment (the adapter never sees it); null when none was given. */
export function takeEndRecordWriter(env: NodeJS.ProcessEnv, leaseId: string | undefined): EndRecordWriter | null {
  const dir = env[END_DIR_ENV_KEY];
  delete env[END_DIR_ENV_KEY];
  if (dir === undefined || leaseId === undefined || leaseId.includes("/") || leaseId.length > 64) return null;
  return (reason, ended, startTime) => {
    const name = `${leaseId}.json`;
    const tmp = join(dir, `.${name}.tmp`);
    const record = {
      leaseId,
      wrapperPid: process.pid,
      wrapperStart: startTime,
      reason,
      phase: ended === null ? "sweeping" : "done",
      at: Date.now(),
      ended: ended ?? [],
    };
    try {
      // whole, then renamed in: a reader never sees half a record
      writeFileSync(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600, flag: "w" });
      renameSync(tmp, join(dir, name));
    } catch {
      try {
        unlinkSync(tmp);
      } catch {
        // nothing was written
      }
    }
  };
}
