import type { ManagedRunStdin, SpawnPtyInput } from "../shared/types.js";
import { signalName, type AdapterExit, type SpawnedProcess } from "./adapter.js";
import type { ShimCommand } from "./cgroup-shim.js";
import { hostResourceError } from "../../ownership/leases/host-faults.js";
import { isAlive, type LivenessFields } from "../../facts/liveness.js";

/**
 * The slice of node-pty the adapter uses, declared here so the optional
 * dependency's types never leak into the package's public surface.
 */
export interface PtyProcess {
  readonly pid: number;
  write(data: string): void;
  kill(signal?: string): void;
  onData(listener: (data: string) => void): { dispose(): void };
  onExit(listener: (e: { exitCode: number; signal?: number }) => void): { dispose(): void };
}

export interface PtyModule {
  spawn(
    file: string,
    args: string[],
    opts: { name?: string; cols?: number; rows?: number; cwd?: string; env?: Record<string, string | undefined> },
  ): PtyProcess;
}

export type PtyLoader = () => Promise<PtyModule>;

/** The shell a `ptyCommand` is handed to, literally: `/bin/sh -c <ptyCommand>`. */
export const PTY_SHELL = "/bin/sh";

export class PtyUnavailableError extends Error {
  override readonly name = "PtyUnavailableError";
  constructor(cause: unknown) {
    super(
      `PTY mode needs the optional dependency node-pty, which could not be loaded ` +
        `(${cause instanceof Error ? cause.message : String(cause)}); child mode still works`,
      { cause },
    );
  }
}

let cached: Promise<PtyModule> | undefined;

/** Dynamic import so the package loads (and child mode works) without node-pty. */
export const loadNodePty: PtyLoader = () => {
  cached ??= (async () => {
    // A variable specifier keeps bundlers and the type checker from requiring the optional module.
    const specifier = "node-pty";
    const mod = (await import(specifier)) as { spawn?: unknown; default?: { spawn?: unknown } };
    const spawnFn = typeof mod.spawn === "function" ? mod : mod.default;
    if (!spawnFn || typeof spawnFn.spawn !== "function") throw new Error("node-pty exports no spawn()");
    return spawnFn as PtyModule;
  })();
  cached.catch(() => (cached = undefined));
  return cached;
};

/** The exact argv a PTY run executes; also what its lease's command hash covers. */
export function ptyArgv(ptyCommand: string): string[] {
  return [PTY_SHELL, "-c", ptyCommand];
}

/**
 * Loads the PTY module (the one await of a PTY spawn), so the supervisor can
 * check for a cancel between loading and spawning: a run cancelled while the
 * loader ran never gets a process.
 */
export async function loadPtyModule(load: PtyLoader): Promise<PtyModule> {
  try {
    return await load();
  } catch (err) {
    throw new PtyUnavailableError(err);
  }
}

/**
 * Runs `/bin/sh -c <ptyCommand>` in a new terminal. node-pty makes the shell
 * a session (and group) leader, so the tree kill can address its group.
 * The terminal merges stdout and stderr: everything arrives on stdout.
 * Synchronous: the process exists when this returns. `shim`: what the
 * terminal starts instead, to enter the lease's cgroup (cgroup-shim.ts); it
 * execs the same shell in the same process.
 */
export function spawnPty(
  input: SpawnPtyInput,
  env: NodeJS.ProcessEnv,
  mod: PtyModule,
  shim?: ShimCommand,
): SpawnedProcess {
  const [shell, ...shellArgs] = ptyArgv(input.ptyCommand);
  const file = shim?.file ?? shell;
  const args = shim?.args ?? shellArgs;
  let pty: PtyProcess;
  try {
    pty = mod.spawn(file!, args, {
      name: env.TERM ?? "xterm-256color",
      cols: input.cols ?? 120,
      rows: input.rows ?? 30,
      cwd: input.cwd ?? process.cwd(),
      env,
    });
  } catch (err) {
    // a host limit (descriptors, processes, memory) is named with where its limit is read
    const spawnError =
      hostResourceError(err, `spawn ${file} (PTY)`) ?? (err instanceof Error ? err : new Error(String(err)));
    return failed(spawnError);
  }

  const stdoutListeners: Array<(c: string) => void> = [];
  const dataSub = pty.onData((d) => stdoutListeners.forEach((l) => l(d)));
  let ended = false;
  const stdin: ManagedRunStdin = {
    write: (data) => pty.write(typeof data === "string" ? data : Buffer.from(data).toString("utf8")),
    end: () => {
      ended = true;
      pty.write("\x04");
    },
    get destroyed() {
      return ended || exited;
    },
  };
  let exited = false;
  let exitSub: { dispose(): void } | undefined;
  // node-pty delivers the terminal's remaining output before onExit, so no flush wait is needed.
  const exit = new Promise<AdapterExit>((resolve) => {
    exitSub = pty.onExit((e) => {
      exited = true;
      resolve({ exitCode: e.signal ? null : e.exitCode, exitSignal: signalName(e.signal) });
    });
  });

  return {
    pid: pty.pid,
    stdin,
    leadsGroup: true,
    mayMissExit: true,
    get exitObserved() {
      return exited;
    },
    signalRoot() {
      // node-pty reaps on its own thread before onExit reaches us: a handle
      // that has not reported the exit does not prove the pid is still ours
      return exited ? "exited" : "not-identity-safe";
    },
    onStdout: (l) => void stdoutListeners.push(l),
    onStderr: () => {},
    wait: () => exit,
    dispose() {
      stdoutListeners.length = 0;
      dataSub.dispose();
      exitSub?.dispose();
    },
  };
}

/**
 * node-pty's child makes itself a session (and group) leader with setsid
 * after the fork, and spawn returns before it has necessarily run: on a
 * loaded host its group can still read as the gateway's for a while. Resolves
 * once `pid` leads its own group, is gone, or cannot be read (nothing to wait
 * for), or after `limitMs` (the lease then still records the pid as its group,
 * and a verification meanwhile fails closed: mismatch, never a signal).
 */
export async function untilSessionLeader(
  inspect: (pid: number) => Promise<(LivenessFields & { pgid: number }) | null>,
  pid: number,
  limitMs = 5000,
): Promise<void> {
  const end = Date.now() + limitMs;
  for (;;) {
    let d;
    try {
      d = await inspect(pid);
    } catch {
      return;
    }
    if (d === null || !isAlive(d) || d.pgid === pid || Date.now() > end) return;
    await new Promise((r) => setTimeout(r, 1));
  }
}

function failed(spawnError: Error): SpawnedProcess {
  return {
    pid: undefined,
    leadsGroup: false,
    mayMissExit: false,
    exitObserved: true,
    signalRoot: () => "exited",
    onStdout: () => {},
    onStderr: () => {},
    wait: async () => ({ exitCode: null, exitSignal: null, spawnError }),
    dispose: () => {},
  };
}
