import { constants } from "node:os";
import type { ManagedRunStdin } from "../types.js";

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
  onStdout(listener: (chunk: string) => void): void;
  onStderr(listener: (chunk: string) => void): void;
  /** true as soon as the root's exit was observed (before the output flush) */
  readonly exitObserved: boolean;
  /**
   * Signals the root through the handle this process holds. Identity-safe
   * without a facts check (Node never signals a child it has already reaped),
   * so the supervisor uses it as its fallback when the tree kill cannot verify
   * anything (facts backend "none"): the root at least, never a guess.
   */
  signalRoot(signal: NodeJS.Signals): void;
  /** Resolves once the root exited and its output was flushed (bounded wait). */
  wait(): Promise<AdapterExit>;
  /** Releases listeners and handles; never signals. */
  dispose(): void;
}

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
