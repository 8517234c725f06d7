/**
 * Starting one wrapper: `<wrapperPath> --grace-ms N -- <adapter argv>` (the
 * native wrapper) or `node <wrapperPath> …` (the Node one), with stdio
 * [pipe, pipe, pipe, pipe]. fd 0/1 carry ACP to the adapter (the wrapper
 * hands them over untouched), fd 2 is the adapter's stderr (its recent tail
 * kept, stderr-ring.ts), fd 3 is the lifeline (lifeline.ts): the wrapper
 * writes its reports there, and our end staying open is what tells it we
 * are alive. Its environment is wrapper-env.ts's; how it ends,
 * wrapper-end.ts; its first report, wrapper-start.ts. Nothing here decides
 * policy: the controller reads the reports and settles.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { enterCgroupAsync } from "../../containment/index.js";
import { wrapperKindOf } from "./install-wrapper.js";
import { readLifeline } from "./lifeline.js";
import { keepStderr } from "./stderr-ring.js";
import { hearSpawnErrors, watchEnd, watchExit, type ChildExit, type SessionEnd } from "./wrapper-end.js";
import { buildWrapperEnv } from "./wrapper-env.js";
import { waitStart, type StartOutcome } from "./wrapper-start.js";
import { wrapperArgs, type CleanupReport, type ExitReport, type WrapperReport } from "../wrapper/protocol.js";

export interface LaunchInput {
  nodePath: string;
  wrapperPath: string;
  command: readonly string[];
  graceMs: number;
  leaseId: string;
  gatewayInstanceId: string;
  cwd?: string;
  env?: Record<string, string>;
  /** keys dropped from the inherited environment before `env` is applied (never the markers) */
  envRemove?: readonly string[];
  /** the lease's cgroup: the Node wrapper is moved in right after the spawn, while its Node boots (it checks before it spawns the adapter); the native one joins by itself */
  joinCgroup?: string;
  /**
   * The native wrapper's executable when it is not wrapperPath: the sealed
   * copy of its verified bytes (`/proc/self/fd/N`, install-wrapper.ts); its
   * argv[0] stays wrapperPath
   */
  execFile?: string;
  /** the durable wrapper's argv (durable/protocol.ts durableArgs): the wrapper relays the adapter's pipes and waits for a re-adoption when the gateway goes */
  durableArgs?: readonly string[];
}

/** A session's processes as the controller speaks to them: a wrapper it spawned (LaunchedWrapper) or one it re-adopted (durable/attached.ts). */
export interface SessionPipes {
  /** the wrapper's pid */
  readonly pid: number | undefined;
  /** the wrapper keeps the tree when the gateway goes (durable mode) */
  readonly durable: boolean;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly reports: WrapperReport[];
  exitReport(): ExitReport | undefined;
  cleanupReport(): CleanupReport | undefined;
  /** set once the child has exited (we are its parent: Node reaped it) */
  exitStatus(): ChildExit | undefined;
  readonly exited: Promise<ChildExit>;
  /** resolves true when the child exits within ms */
  waitExit(ms: number): Promise<boolean>;
  /**
   * How the session ended (undefined while the wrapper runs and has not
   * reported an adapter exit). After the wrapper's exit the lifeline is
   * drained first, so a report written just before the exit is not missed.
   */
  howEnded(): SessionEnd | undefined;
  /** resolves with howEnded() once the wrapper has exited and its lifeline is drained */
  readonly ended: Promise<SessionEnd>;
  /**
   * Calls `listener` once with how the session ended (as `ended` resolves);
   * returns the unsubscribe. For per-prompt listeners on a long session, so
   * a finished prompt leaves nothing attached.
   */
  onEnd(listener: (end: SessionEnd) => void): () => void;
  /** the adapter's (and wrapper's) most recent stderr, at most STDERR_RING_BYTES, trimmed */
  stderrTail(): string;
  /**
   * Resolves once stderr has been quiet for `quietMs` (or has ended), at the
   * latest after `maxMs`. An adapter writes its cause to stderr just before
   * its error answer on stdout; the two pipes are read independently, so an
   * error message waits this long for the cause to arrive.
   */
  stderrSettled(quietMs?: number, maxMs?: number): Promise<void>;
  /**
   * ends our half of the lifeline = "the gateway is gone" to the wrapper (it
   * reads EOF); the other half stays open, so its cleanup and exit reports
   * (the adapter's exit, seen by the wrapper that reaps it) still arrive
   */
  endLifeline(): void;
  /** lets this process exit while the wrapper runs (dispose) */
  unref(): void;
  /**
   * Durable: lets the session go without ending it (detach): our ends of
   * its pipes close, and the wrapper starts its window. Otherwise the same
   * as endLifeline.
   */
  letGo(): void;
}

export interface LaunchedWrapper extends SessionPipes {
  /** the exact argv of the root, argv[0] included: what commandHash covers */
  readonly rootArgv: readonly string[];
  readonly child: ChildProcess;
  waitStart(timeoutMs: number): Promise<StartOutcome>;
}

/**
 * The root argv (exactly what the kernel will report): the Node wrapper runs
 * under `nodePath` with its shim as argv[1]; the native one is its own
 * executable, named twice (argv[0] and argv[1], which it skips), because it
 * runs from a sealed copy whose exe link names no file: verification knows
 * it by argv[1], as it knows the Node wrapper.
 */
export function rootArgvFor(
  nodePath: string,
  wrapperPath: string,
  command: readonly string[],
  graceMs: number,
  durable?: readonly string[],
): string[] {
  const args = wrapperArgs(wrapperPath, command, { graceMs, ...(durable !== undefined ? { extra: durable } : {}) });
  return [wrapperKindOf(wrapperPath) === "native" ? wrapperPath : nodePath, ...args];
}

/**
 * Spawns the wrapper and wires it, as named steps: its spawn errors heard
 * first, the lifeline read into reports, the stderr ring, the exit, and how
 * the session ended once the lifeline is drained.
 */
export function launchWrapper(input: LaunchInput): LaunchedWrapper {
  const rootArgv = rootArgvFor(input.nodePath, input.wrapperPath, input.command, input.graceMs, input.durableArgs);
  const durable = input.durableArgs !== undefined;
  const child = spawn(input.execFile ?? rootArgv[0]!, rootArgv.slice(1), {
    argv0: rootArgv[0]!,
    stdio: ["pipe", "pipe", "pipe", "pipe"],
    env: buildWrapperEnv(input),
    cwd: input.cwd,
    windowsHide: true,
  });
  const failure = hearSpawnErrors(child, rootArgv[0]!);
  // the Node wrapper is moved while its Node boots (a failed move is its to make or report, wrapper/main.ts
  // enterLeaseCgroup); the native one joins by itself at once (native/wrapper_cgroup_linux.c): not twice
  const join = wrapperKindOf(input.wrapperPath) === "node" ? input.joinCgroup : undefined;
  if (join !== undefined && child.pid !== undefined) void enterCgroupAsync(join, child.pid).catch(() => undefined);
  const lifeline = readLifeline(child);
  const stderr = keepStderr(child);
  // every stream we own has an "error" listener: an unheard one crashes the gateway; the exit says what happened
  child.stdin?.on("error", () => undefined);
  child.stdout?.on("error", () => undefined);
  const exit = watchExit(child, failure);
  const end = watchEnd(child, lifeline, exit);
  return {
    rootArgv,
    child,
    pid: child.pid,
    // durable only once the wrapper said it listens (one whose socket could not listen runs as a plain wrapper)
    get durable() {
      return durable && lifeline.find("started")?.durable === "listening";
    },
    // a spawn that failed on EMFILE/ENFILE set up no pipes: ended streams stand in, so no caller meets a null
    stdin: child.stdin ?? endedStream(),
    stdout: child.stdout ?? endedStream(),
    reports: lifeline.reports,
    exitReport: () => lifeline.find("exit"),
    cleanupReport: () => lifeline.find("cleanup"),
    exitStatus: exit.status,
    exited: exit.exited,
    waitStart: (timeoutMs) => waitStart(lifeline, failure, exit, timeoutMs),
    waitExit(ms) {
      if (exit.status()) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        void exit.exited.then(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
    howEnded: end.howEnded,
    ended: end.ended,
    onEnd: end.onEnd,
    stderrTail: stderr.tail,
    stderrSettled: stderr.settled,
    // "end" first: the lifeline's EOF alone means the gateway went away (a durable wrapper's window, an end record)
    endLifeline: () => lifeline.end("end\n"),
    letGo() {
      lifeline.end();
      for (const s of [child.stdin, child.stdout, child.stderr]) s?.destroy();
      // the wrapper runs on after this process lets go: nothing of it may keep this process alive
      child.unref();
      for (const s of child.stdio ?? []) (s as { unref?: () => void } | null)?.unref?.();
    },
    unref() {
      child.unref();
      for (const s of child.stdio ?? []) (s as { unref?: () => void } | null)?.unref?.();
    },
  };
}

function endedStream(): PassThrough {
  const s = new PassThrough();
  s.on("error", () => undefined);
  s.end();
  return s;
}
