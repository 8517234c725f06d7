/**
 * Starting one wrapper: `node <wrapperPath> --grace-ms N -- <adapter argv>`
 * with stdio [pipe, pipe, pipe, pipe]. fd 0/1 carry ACP to the adapter (the
 * wrapper hands them over untouched), fd 2 is the adapter's stderr (kept as a
 * short tail for error messages), fd 3 is the lifeline: the wrapper writes its
 * reports there, and our end staying open is what tells it we are alive.
 * Nothing here decides policy: the controller reads the reports and settles.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import {
  createReportReader,
  INSTANCE_ENV_KEY,
  LEASE_ENV_KEY,
  wrapperArgs,
  type CleanupReport,
  type ExitReport,
  type SpawnErrorReport,
  type StartedReport,
  type WrapperReport,
} from "./wrapper/protocol.js";

export interface LaunchInput {
  nodePath: string;
  wrapperPath: string;
  command: readonly string[];
  graceMs: number;
  leaseId: string;
  gatewayInstanceId: string;
  cwd?: string;
  env?: Record<string, string>;
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** The first thing the wrapper tells us, or why it never did. */
export type StartOutcome =
  | { kind: "started"; report: StartedReport }
  | { kind: "spawn-error"; report: SpawnErrorReport }
  | { kind: "exited"; exit: ChildExit }
  | { kind: "error"; error: Error }
  | { kind: "timeout"; ms: number };

export interface LaunchedWrapper {
  /** the exact argv of the root, argv[0] included: what commandHash covers */
  readonly rootArgv: readonly string[];
  readonly child: ChildProcess;
  readonly pid: number | undefined;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly reports: WrapperReport[];
  exitReport(): ExitReport | undefined;
  cleanupReport(): CleanupReport | undefined;
  /** set once the child has exited (we are its parent: Node reaped it) */
  exitStatus(): ChildExit | undefined;
  readonly exited: Promise<ChildExit>;
  waitStart(timeoutMs: number): Promise<StartOutcome>;
  /** resolves true when the child exits within ms */
  waitExit(ms: number): Promise<boolean>;
  stderrTail(): string;
  /** closing our lifeline end = "the gateway is gone" to the wrapper */
  endLifeline(): void;
  /** lets this process exit while the wrapper runs (dispose) */
  unref(): void;
}

const STDERR_TAIL = 4096;

/** The root argv for a wrapper launch (exactly what the kernel will report). */
export function rootArgvFor(nodePath: string, wrapperPath: string, command: readonly string[], graceMs: number): string[] {
  return [nodePath, ...wrapperArgs(wrapperPath, command, { graceMs })];
}

export function launchWrapper(input: LaunchInput): LaunchedWrapper {
  const rootArgv = rootArgvFor(input.nodePath, input.wrapperPath, input.command, input.graceMs);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...input.env,
    [LEASE_ENV_KEY]: input.leaseId,
    [INSTANCE_ENV_KEY]: input.gatewayInstanceId,
  };
  const child = spawn(rootArgv[0]!, rootArgv.slice(1), {
    stdio: ["pipe", "pipe", "pipe", "pipe"],
    env,
    cwd: input.cwd,
    windowsHide: true,
  });

  const reports: WrapperReport[] = [];
  const listeners = new Set<(r: WrapperReport) => void>();
  const reader = createReportReader((r) => {
    reports.push(r);
    for (const l of listeners) l(r);
  });
  const lifeline = child.stdio[3] as (Readable & Writable) | null;
  lifeline?.on("data", (chunk: Buffer) => reader.push(chunk));
  lifeline?.on("end", () => reader.end());
  // EPIPE/ECONNRESET on the lifeline only means the wrapper is gone; the exit event says how.
  lifeline?.on("error", () => undefined);
  const lifelineClosed = new Promise<void>((resolve) => {
    if (!lifeline) resolve();
    else lifeline.once("close", () => resolve());
  });

  let tail = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL);
  });
  child.stdin?.on("error", () => undefined);

  let exitStatus: ChildExit | undefined;
  let spawnError: Error | undefined;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once("exit", (code, signal) => {
      exitStatus = { code, signal };
      resolve(exitStatus);
    });
    child.once("error", (err) => {
      spawnError = err;
      // a failed spawn emits "error" and never "exit"
      if (child.pid === undefined) {
        exitStatus = { code: null, signal: null };
        resolve(exitStatus);
      }
    });
  });

  const find = <T extends WrapperReport["type"]>(t: T) =>
    reports.find((r) => r.type === t) as Extract<WrapperReport, { type: T }> | undefined;

  return {
    rootArgv,
    child,
    pid: child.pid,
    stdin: child.stdin!,
    stdout: child.stdout!,
    reports,
    exitReport: () => find("exit"),
    cleanupReport: () => find("cleanup"),
    exitStatus: () => exitStatus,
    exited,
    waitStart(timeoutMs) {
      return new Promise<StartOutcome>((resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const done = (o: StartOutcome) => {
          clearTimeout(timer);
          listeners.delete(onReport);
          resolve(o);
        };
        const onReport = (r: WrapperReport) => {
          if (r.type === "started") done({ kind: "started", report: r });
          else if (r.type === "spawn-error") done({ kind: "spawn-error", report: r });
        };
        const early = find("started") ?? find("spawn-error");
        if (early) return onReport(early);
        if (spawnError) return done({ kind: "error", error: spawnError });
        listeners.add(onReport);
        timer = setTimeout(() => done({ kind: "timeout", ms: timeoutMs }), timeoutMs);
        void exited.then(async (exit) => {
          // the lifeline may still hold the report that explains the exit
          await Promise.race([lifelineClosed, new Promise((r) => setTimeout(r, 200))]);
          const late = find("started") ?? find("spawn-error");
          if (late) onReport(late);
          else if (spawnError) done({ kind: "error", error: spawnError });
          else done({ kind: "exited", exit });
        });
      });
    },
    waitExit(ms) {
      if (exitStatus) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        void exited.then(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
    stderrTail: () => tail.trim(),
    endLifeline() {
      lifeline?.destroy();
    },
    unref() {
      child.unref();
      for (const s of child.stdio) (s as { unref?: () => void } | null)?.unref?.();
    },
  };
}
