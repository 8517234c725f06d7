import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import type { ManagedRunStdin, SpawnChildInput, StdinMode } from "../shared/types.js";
import { signalUnreapedChild } from "../../facts/signal.js";
import { OUTPUT_FLUSH_MS, type AdapterExit, type SpawnedProcess } from "./adapter.js";
import type { ShimCommand } from "./cgroup-shim.js";
import { hostResourceError } from "../../ownership/leases/host-faults.js";

/**
 * Spawns argv directly (no shell), detached into its own process group so a
 * tree kill can address the group without touching the gateway's. stdout
 * and stderr are decoded as UTF-8 with multi-byte sequences kept whole.
 * `shim`: what is exec'd first to enter the lease's cgroup (cgroup-shim.ts),
 * with its own environment; it execs argv with `env` in the same process.
 */
export function spawnChild(
  input: SpawnChildInput,
  env: NodeJS.ProcessEnv,
  shim?: ShimCommand & { env: NodeJS.ProcessEnv },
): SpawnedProcess {
  const [program, ...rest] = input.argv;
  if (program === undefined || program === "") throw new TypeError("argv must start with a non-empty program name");
  const file = shim?.file ?? program;
  const args = shim?.args ?? rest;
  if (shim) env = shim.env;
  const stdinMode = input.stdinMode ?? "pipe-closed";
  const stdio: StdioOptions = [stdinMode === "inherit" ? "inherit" : "pipe", "pipe", "pipe"];
  // env left to Node when it is process.env itself: measurably cheaper than passing it
  const child = spawn(file, args, {
    cwd: input.cwd,
    env: env === process.env ? undefined : env,
    detached: true,
    stdio,
  });

  const stdoutListeners: Array<(c: string) => void> = [];
  const stderrListeners: Array<(c: string) => void> = [];
  child.stdout?.setEncoding("utf8");
  child.stderr?.setEncoding("utf8");
  // a pipe error is reported by the exit; unheard, it would crash the gateway
  child.stdout?.on("error", () => {});
  child.stderr?.on("error", () => {});
  child.stdout?.on("data", (c: string) => stdoutListeners.forEach((l) => l(c)));
  child.stderr?.on("data", (c: string) => stderrListeners.forEach((l) => l(c)));

  const stdin = pipeStdin(child, input.input, stdinMode);
  const exit = watchExit(child, file);

  return {
    pid: child.pid,
    stdin,
    leadsGroup: true,
    mayMissExit: false,
    get exitObserved() {
      return exit.observed();
    },
    signalRoot(signal) {
      // unreaped = Node has not reported the exit: the pid is still this child's (see SpawnedProcess.signalRoot)
      return signalUnreapedChild(child, signal, exit.observed());
    },
    onStdout: (l) => void stdoutListeners.push(l),
    onStderr: (l) => void stderrListeners.push(l),
    wait: () => exit.exited,
    dispose() {
      stdoutListeners.length = 0;
      stderrListeners.length = 0;
      child.stdout?.destroy();
      child.stderr?.destroy();
      if (child.stdin && !child.stdin.destroyed) child.stdin.destroy();
    },
  };
}

/** The run's stdin: `input` written first, then closed unless kept open (`pipe-open`); none when inherited. */
function pipeStdin(child: ChildProcess, input: string | undefined, stdinMode: StdinMode): ManagedRunStdin | undefined {
  // A child that exits (or fails to start) before the reader closes stdin
  // would otherwise surface EPIPE as an uncaught error.
  child.stdin?.on("error", () => {});
  if (!child.stdin) return undefined;
  const s = child.stdin;
  if (input !== undefined) s.write(input);
  if (stdinMode === "pipe-closed") s.end();
  return {
    write: (data) => void s.write(data),
    end: () => void s.end(),
    get destroyed() {
      return s.destroyed || s.writableEnded;
    },
  };
}

/**
 * The root's exit: observed as soon as Node reports it (or the program never
 * started), resolved once the output is flushed, at most OUTPUT_FLUSH_MS
 * later (a backgrounded grandchild can hold the pipes open forever).
 */
function watchExit(child: ChildProcess, file: string): { exited: Promise<AdapterExit>; observed(): boolean } {
  let exitObserved = false;
  const exited = new Promise<AdapterExit>((resolve) => {
    let exit: AdapterExit | undefined;
    let closed = false;
    let flushTimer: NodeJS.Timeout | undefined;
    const done = () => {
      if (flushTimer) clearTimeout(flushTimer);
      resolve(exit!);
    };
    // "on", not "once": Node can emit "error" more than once for one child (EMFILE at spawn, a failed kill)
    child.on("error", (err) => {
      // 'error' without a pid = the program never started; with a pid it is a
      // kill/IPC failure, which the exit event still reports.
      if (child.pid === undefined && exit === undefined) {
        exitObserved = true;
        // a host limit (descriptors, processes, memory) is named with where its limit is read
        exit = { exitCode: null, exitSignal: null, spawnError: hostResourceError(err, `spawn ${file}`) ?? err };
        done();
      }
    });
    child.once("exit", (code, signal) => {
      exitObserved = true;
      exit = { exitCode: code, exitSignal: signal };
      if (closed) return done();
      flushTimer = setTimeout(done, OUTPUT_FLUSH_MS);
      flushTimer.unref();
    });
    child.once("close", () => {
      closed = true;
      if (exit !== undefined) done();
    });
  });
  return { exited, observed: () => exitObserved };
}
