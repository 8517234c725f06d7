/**
 * Identity-checked signalling: a signal goes to `pid` only while its start
 * time is still the one the caller recorded.
 *
 * - Linux with the addon and pidfd support: pidfd_open → re-read start time
 *   → pidfd_send_signal. The pidfd pins the process, so no pid reuse can slip
 *   between the check and the send (raceFree).
 * - macOS with the addon: the addon re-reads the start time and calls kill(2)
 *   straight away: a window of one syscall (raceFree=false).
 * - Otherwise: re-inspect through the facts backend, then process.kill. The
 *   window spans a /proc read or a `ps` run plus the kill; a pid reused inside
 *   it would receive the signal (raceFree=false). pid_max wraparound makes
 *   that rare, not impossible, and callers are told through `raceFree`.
 *
 * Fail closed throughout: whenever identity cannot be established nothing is
 * sent and the answer is "unknown" (or "gone"/"mismatch" when we know).
 *
 * This is the one module that sends signals (test/architecture.test.ts finds
 * any other call of process.kill, a child's kill or the addon's signalIfSame):
 * createSignaller for a process named by pid and start time, and
 * signalUnreapedChild for a child this process still holds.
 */
import { constants } from "node:os";
import type { NativeBinding, NativeSignalOutcome } from "./native-binding.js";
import type { ProcessFacts, ProcessSignaller, SignalOutcome } from "./types.js";
import { checkSignalTarget } from "./guards.js";
import { assertPid } from "./validate.js";
import { loadNative } from "./native.js";
import { sameProcess } from "./identity.js";
import { factsFault } from "./errno.js";

const DECIMAL = /^(0|[1-9][0-9]*)$/;

function signalNumber(signal: NodeJS.Signals): number {
  const table = constants.signals as Readonly<Record<string, number | undefined>>;
  const n = typeof signal === "string" ? table[signal] : undefined;
  if (n === undefined)
    throw new TypeError(`signal must be a signal name such as "SIGTERM", got ${JSON.stringify(signal)}`);
  return n;
}

/**
 * @param binding the addon; undefined = `loadNative()` (race-free whenever the
 *   addon loads); null forces the inspect-then-kill path.
 */
export function createSignaller(facts: ProcessFacts, binding: NativeBinding | null = loadNative()): ProcessSignaller {
  // The addon compares start times in its own unit (Linux clock ticks, macOS
  // µs). Start times recorded by another backend are only comparable when the
  // unit is the same: procfs on Linux also counts ticks; ps counts seconds,
  // which would turn every check into "mismatch".
  const sameUnit = facts.backend === "native" || (binding?.platform === "linux" && facts.backend === "procfs");
  if (binding && sameUnit && binding.platform === "linux" && binding.pidfdSupported())
    return nativeSignaller(binding, true);
  if (binding && sameUnit && binding.platform === "darwin") return nativeSignaller(binding, false);
  return inspectThenKill(facts);
}

function nativeSignaller(binding: NativeBinding, raceFree: boolean): ProcessSignaller {
  return {
    raceFree,
    async signal(pid, expectedStartTime, signal): Promise<SignalOutcome> {
      assertPid(pid);
      const sig = signalNumber(signal);
      if (!checkSignalTarget(pid).allowed) return "refused";
      const expected = parseStart(expectedStartTime);
      if (expected === null) return "unknown";
      const outcome: NativeSignalOutcome = binding.signalIfSame(pid, expected, sig);
      return outcome;
    },
  };
}

/** A start time the native side can compare exactly, or null. */
function parseStart(s: unknown): number | null {
  if (typeof s !== "string" || !DECIMAL.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}

function inspectThenKill(facts: ProcessFacts): ProcessSignaller {
  return {
    raceFree: false,
    async signal(pid, expectedStartTime, signal): Promise<SignalOutcome> {
      assertPid(pid);
      signalNumber(signal);
      if (!checkSignalTarget(pid).allowed) return "refused";
      // A backend that cannot verify identity must never lead to a signal.
      if (facts.identityStrength === "none") return "unknown";
      if (typeof expectedStartTime !== "string" || expectedStartTime.length === 0) return "unknown";
      const live = await facts.inspect(pid);
      if (live === null) return "gone";
      if (!sameProcess(live, { pid, startTime: expectedStartTime })) return "mismatch";
      // The window: between the inspect above and this kill the process may
      // exit and its pid be reused. See the module comment.
      try {
        process.kill(pid, signal);
        return "signalled";
      } catch (err) {
        const fault = factsFault(err);
        if (fault === "no-process") return "gone";
        if (fault === "denied") return "denied";
        return "unknown";
      }
    },
  };
}

/**
 * Signals a child this process spawned and still holds, the one signal that
 * needs no facts: while Node has not reported the child's exit (exitCode and
 * signalCode both null, and the caller saw no exit event), libuv has not
 * reaped it, so its pid cannot have been reused and the handle itself is the
 * identity. Still asks checkSignalTarget. "exited" when the handle can no
 * longer prove anything (the signal is not sent).
 */
export function signalUnreapedChild(
  child: {
    pid?: number | undefined;
    exitCode: number | null;
    signalCode: NodeJS.Signals | null;
    kill(signal: NodeJS.Signals): boolean;
  },
  signal: NodeJS.Signals,
  exitSeen = false,
): "signalled" | "exited" | "refused" {
  if (exitSeen || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return "exited";
  if (!checkSignalTarget(child.pid).allowed) return "refused";
  return child.kill(signal) ? "signalled" : "exited";
}
