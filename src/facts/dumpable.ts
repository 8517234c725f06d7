/**
 * Making a process non-dumpable (Linux: prctl PR_SET_DUMPABLE 0, through the
 * addon). Its /proc files then belong to root: another process of the same
 * uid can no longer read its environment (`/proc/<pid>/environ`), memory,
 * descriptors or executable link, nor ptrace it; no core file is written
 * when it crashes. Root (CAP_SYS_PTRACE) still reads everything. The keeper
 * does this at its start; a gateway may call it for itself
 * (docs/lifecycle-controller.md, "What envRemove hides").
 *
 * What it costs the process that makes the call: debuggers and profilers
 * that attach (gdb, strace -p, perf) need root; no core dumps; a tool of its
 * own uid that reads its /proc (its exe, cwd, environ, fds) is refused. Its
 * children are dumpable again once they exec. /proc/<pid>/stat, status and
 * cmdline stay readable, so a reader still tells that it is alive.
 */
import { loadNative } from "./native.js";
import type { NativeBinding } from "./native-binding.js";

export type NonDumpableResult = { applied: true } | { applied: false; why: string };

/** Makes the calling process non-dumpable; says why not where it cannot (no addon, not Linux). Never throws. */
export function makeProcessNonDumpable(binding: NativeBinding | null = loadNative()): NonDumpableResult {
  if (process.platform !== "linux") return { applied: false, why: `not available on ${process.platform}` };
  if (binding === null)
    return { applied: false, why: "the native addon is not loaded (PROCLEASE_DISABLE_NATIVE=1, or not built)" };
  const r = binding.setDumpable(false);
  return r === 0 ? { applied: true } : { applied: false, why: `prctl(PR_SET_DUMPABLE, 0) failed: errno ${-r}` };
}

/** Whether the calling process is dumpable now: true, false, or null when it cannot tell (no addon, not Linux). */
export function processDumpable(binding: NativeBinding | null = loadNative()): boolean | null {
  if (process.platform !== "linux" || binding === null) return null;
  const r = binding.getDumpable();
  return r < 0 ? null : r !== 0;
}
