/** What every run of one supervisor shares. */
import type { ContainmentSupport } from "../../containment/index.js";
import type { ProcessFacts } from "../../facts/types.js";
import type { PtyLoader } from "../adapters/pty.js";
import type { RunLeases } from "../durability.js";
import type { KillTreeResult } from "../kill-tree.js";
import type { RunRegistry } from "../registry.js";
import type { RunCgroups } from "../run-cgroups.js";
import type { Run } from "./run.js";

export interface RunContext {
  readonly registry: RunRegistry;
  /** one facts backend for the start-time read, the tree kill and the leases: the same unit everywhere */
  readonly facts: ProcessFacts;
  /** TERM → KILL grace of every kill */
  readonly graceMs: number;
  /** how often the PTY exit fallback looks the root up (pty-exit-fallback.ts) */
  readonly ptyFallbackMs: number;
  readonly loadPty: PtyLoader;
  /** the lease store of background runs (made on first use); undefined without a stateDir */
  leases(): RunLeases | undefined;
  /** the containment runs get, leased or not, detected once */
  containment(): Promise<ContainmentSupport>;
  /** the cgroups of runs without a lease */
  readonly runCgroups: RunCgroups;
  /** the identity-checked tree kill, bound to the root's start time read at spawn: a reused pid gets nothing */
  killTree(pid: number, expectedStartTime: string): Promise<KillTreeResult>;
  /** runs a stop request can reach: from spawn's first line until their exit is final */
  readonly live: Map<string, Run>;
  /** runs whose lease may not be settled yet: from spawn's first line until the last bookkeeping; reconcile never touches them */
  readonly unsettled: Map<string, Run>;
}
