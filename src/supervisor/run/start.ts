/**
 * A run's startup, from spawn's first line to its process, as named steps:
 * 1. containment: a leased run's lease, written BEFORE the spawn (rootPid 0:
 *    a crash between the two leaves a lease that verifies as "gone", never
 *    an untracked process), with its cgroup; a run without a lease gets a
 *    cgroup of its own (run-cgroups.ts). Either way, the shim that starts
 *    the run inside its cgroup, or none (then the cgroup is let go first).
 * 2. the PTY module (a PTY run);
 * 3. the spawn itself, synchronous.
 * A stop request is checked before every step that could create a process;
 * how a run that never got one ends is unstarted.ts's.
 */
import type { SpawnedProcess } from "../adapters/adapter.js";
import { containedChild, containedPty, executableFound, type ShimCommand } from "../adapters/cgroup-shim.js";
import { spawnChild } from "../adapters/child.js";
import { loadPtyModule, ptyArgv, spawnPty, type PtyModule } from "../adapters/pty.js";
import type { RunLeases } from "../hold/durability.js";
import type { SpawnInput, TerminationReason } from "../shared/types.js";
import type { Run, RunContext } from "./run.js";

export type StartResult =
  | { kind: "started"; proc: SpawnedProcess }
  /** asked to stop while starting: no process was made */
  | { kind: "stopped"; reason: TerminationReason }
  /** a step threw: the lease write, the cgroup, the PTY module, a spawn that threw */
  | { kind: "failed"; error: unknown };

/** What the spawn is handed. */
export interface Launch {
  readonly argv: readonly string[];
  /** copied only when a lease adds to it: copying process.env costs more than the spawn bookkeeping */
  env: NodeJS.ProcessEnv;
  /** how a contained run starts: the shim that enters its cgroup, then execs the run */
  shim?: ShimCommand;
  ptyModule?: PtyModule;
}

/** Steps 1 and 2, each skipped once a stop was asked (the lease is still written: it settles as never started). */
export async function prepareLaunch(
  run: Run,
  ctx: RunContext,
): Promise<{ kind: "ready"; launch: Launch } | { kind: "failed"; error: unknown }> {
  const { input } = run;
  const launch: Launch = {
    argv: input.mode === "child" ? [...input.argv] : ptyArgv(input.ptyCommand),
    env: input.env ?? process.env,
  };
  try {
    if (run.store !== undefined) await openLease(run, run.store, launch);
    else if (run.requested === undefined) await openOwnCgroup(run, ctx, launch);
    if (run.requested === undefined && input.mode === "pty") launch.ptyModule = await loadPtyModule(ctx.loadPty);
  } catch (error) {
    return { kind: "failed", error };
  }
  return { kind: "ready", launch };
}

/**
 * Step 3, synchronous: the last check for a stop request, then the spawn.
 * Its caller moves the run to "running" in the same turn (running.ts), so a
 * stop request falls either before the check or after the run is running.
 */
export function launchProcess(run: Run, launch: Launch): StartResult {
  if (run.requested !== undefined) return { kind: "stopped", reason: run.requested };
  try {
    return { kind: "started", proc: spawnProcess(run.input, launch, run.lease?.env ?? {}) };
  } catch (error) {
    return { kind: "failed", error };
  }
}

async function openLease(run: Run, store: RunLeases, launch: Launch): Promise<void> {
  const lease = await store.open(run.runId, launch.argv, run.input.mode === "child" ? run.input.durable : undefined);
  run.lease = lease;
  launch.env = { ...launch.env, ...lease.env };
  if (lease.cgroup === undefined) return;
  launch.shim = shimFor(run.input, lease.cgroup.path, launch.argv, launch.env) ?? undefined;
  // not startable inside it: out of the lease before anything runs (never a claim the run is outside of)
  if (launch.shim === undefined) await store.dropCgroup(lease.leaseId, lease.cgroup);
}

async function openOwnCgroup(run: Run, ctx: RunContext, launch: Launch): Promise<void> {
  const own = (await ctx.runCgroups.open().catch(() => null)) ?? undefined;
  if (own === undefined) return;
  run.ownCgroup = own;
  launch.shim = shimFor(run.input, own.path, launch.argv, launch.env) ?? undefined;
  if (launch.shim !== undefined) return;
  await ctx.runCgroups.settle(own);
  run.ownCgroup = undefined;
}

/** The shim starts with the lease markers only (`markers`; a run without a lease: none); it execs the run with `env`. */
function spawnProcess(input: SpawnInput, launch: Launch, markers: Record<string, string>): SpawnedProcess {
  if (input.mode === "child") return spawnChild(input, launch.env, launch.shim && { ...launch.shim, env: markers });
  if (launch.ptyModule === undefined) throw new Error("the PTY module was not loaded before the PTY spawn");
  return spawnPty(input, launch.env, launch.ptyModule, launch.shim);
}

/**
 * The shim that starts this run inside its cgroup, or null when it cannot: a
 * child program the exec would not find (started without the shim, Node then
 * reports the spawn error as for any run) or whose name env(1) would read as
 * an assignment.
 */
function shimFor(
  input: SpawnInput,
  cgroupPath: string,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ShimCommand | null {
  if (input.mode === "pty") return containedPty(cgroupPath, argv);
  if (!executableFound(argv[0]!, env, input.cwd ?? process.cwd())) return null;
  return containedChild(cgroupPath, argv, env);
}
