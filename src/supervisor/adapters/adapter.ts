import { constants } from "node:os";
import type { ManagedRunStdin } from "../shared/types.js";

/** How the root process ended, as the adapter saw it. */
export interface AdapterExit {
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  /** set when the OS never started the program (ENOENT, EACCES, bad cwd…) */
  spawnError?: Error;
}

/**
 * What the supervisor needs from a started process, whatever its transport.
 * Adapters never signal on their own: termination is the supervisor's call,
 * through `killTree`, which is the verified process-tree kill.
 */
export interface SpawnedProcess {
  readonly pid: number | undefined;
  readonly stdin?: ManagedRunStdin;
  /** true when the root leads its own process group (detached child, PTY session leader) */
  readonly leadsGroup: boolean;
  /**
   * true when the transport may never report the root's exit: node-pty
   * reaps on its own thread and has been seen to drop the exit report after
   * a forced kill. The supervisor then settles `wait()` on a fallback timer
   * once the root is verified gone (see ProcessSupervisorOptions.ptyExitFallbackMs).
   * Node's ChildProcess always reports the exit: false.
   */
  readonly mayMissExit: boolean;
  onStdout(listener: (chunk: string) => void): void;
  onStderr(listener: (chunk: string) => void): void;
  /** true as soon as the root's exit was observed (before the output flush) */
  readonly exitObserved: boolean;
  /**
   * Signals the root through the handle this process holds: the one signal
   * in the supervisor that is not derived from process facts, because the
   * handle itself is the identity. It is sent only while that holds:
   * - child: Node's ChildProcess has reported no exit (exitCode and
   *   signalCode both null). libuv reaps a child and reports its exit in one
   *   callback, so an unreported child is unreaped, and an unreaped child's pid
   *   cannot be reused (at worst it is our own zombie);
   * - PTY: never. node-pty reaps the child on its own thread (waitpid) and
   *   reports the exit later, so a live-looking handle does not prove the pid
   *   is still the child's: "not-identity-safe", nothing is sent.
   * The pid also has to pass the ownership guard (checkSignalTarget).
   */
  signalRoot(signal: NodeJS.Signals): RootSignalOutcome;
  /** Resolves once the root exited and its output was flushed (bounded wait). */
  wait(): Promise<AdapterExit>;
  /** Releases listeners and handles; never signals. */
  dispose(): void;
}

/**
 * What `signalRoot` did: "signalled"; "exited" (the handle already reported
 * the exit, or the kernel said the process is gone); "refused" (a guard
 * refused the pid); "not-identity-safe" (the handle cannot prove the pid is
 * still the child's). Only "signalled" sent anything.
 */
export type RootSignalOutcome = "signalled" | "exited" | "refused" | "not-identity-safe";

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(
  Object.entries(constants.signals).map(([name, num]) => [num, name as NodeJS.Signals]),
);

export function signalName(sig: number | string | null | undefined): NodeJS.Signals | null {
  if (sig === null || sig === undefined || sig === 0) return null;
  if (typeof sig === "string") return sig as NodeJS.Signals;
  return SIGNAL_NAMES.get(sig) ?? null;
}

/** A run's output may still be arriving when the root exits; wait for it at most this long. */
export const OUTPUT_FLUSH_MS = 250;
