/**
 * Starting one wrapper: `<wrapperPath> --grace-ms N -- <adapter argv>` (the
 * native wrapper) or `node <wrapperPath> …` (the Node one), with stdio [pipe, pipe, pipe, pipe]. fd 0/1 carry ACP to the adapter (the
 * wrapper hands them over untouched), fd 2 is the adapter's stderr (its most
 * recent 16 KB kept in a ring for error messages), fd 3 is the lifeline: the
 * wrapper writes its reports there, and our end staying open is what tells it
 * we are alive. The wrapper's environment, which the adapter inherits, is
 * built here: the gateway's, minus `envRemove`, plus `env`, plus the two
 * markers (which can be neither removed nor overridden). Nothing here decides
 * policy: the controller reads the reports and settles.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { enterCgroupAsync } from "../containment/index.js";
import { hostResourceError } from "../ownership/leases/host-faults.js";
import { MARKER_ENV_KEYS } from "../ownership/verify/markers.js";
import { wrapperKindOf } from "./install-wrapper.js";
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
  /** keys dropped from the inherited environment before `env` is applied (never the markers) */
  envRemove?: readonly string[];
  /** the lease's cgroup: the Node wrapper is moved in right after the spawn, while its Node boots (it checks before it spawns the adapter); the native one joins by itself */
  joinCgroup?: string;
}

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * How a session's processes ended, as far as the gateway can tell:
 * - adapter-exited: the wrapper reported the adapter's exit (code or signal);
 * - wrapper-killed: the wrapper itself died by a signal (SIGKILL, the OOM
 *   killer, a crash) without reporting an adapter exit: the adapter may still
 *   run, unsupervised, until a close or the startup reconcile finds it by lease;
 * - wrapper-exited: the wrapper exited with a status but reported no adapter
 *   exit (it could not start it, or failed itself).
 */
export type SessionEnd =
  | { kind: "adapter-exited"; code: number | null; signal: string | null }
  | { kind: "wrapper-killed"; wrapperPid: number | undefined; signal: NodeJS.Signals }
  | { kind: "wrapper-exited"; wrapperPid: number | undefined; code: number | null };

/**
 * One sentence naming who ended and how (`during`, e.g. "ACP initialize", says
 * when); a killed wrapper is named as such, never blamed on the adapter.
 */
export function describeEnd(end: SessionEnd, during?: string): string {
  const when = during !== undefined ? ` during ${during}` : "";
  const wrapper = `the wrapper${end.kind !== "adapter-exited" && end.wrapperPid !== undefined ? ` (pid ${end.wrapperPid})` : ""}`;
  switch (end.kind) {
    case "adapter-exited":
      return `the adapter exited${when} (${end.signal !== null ? `signal ${end.signal}` : `exit code ${end.code}`})`;
    case "wrapper-killed":
      return (
        `${wrapper} was killed by ${end.signal}${when}, before it reported an adapter exit; ` +
        "the adapter may still run unsupervised until its lease's tree is killed"
      );
    case "wrapper-exited":
      return `${wrapper} exited${when} (exit code ${end.code}) without reporting an adapter exit`;
  }
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
}

/** How much of the adapter's recent stderr is kept for diagnostics. */
export const STDERR_RING_BYTES = 16 * 1024;

/**
 * A bounded ring of the most recent bytes written to a stream: chunks are
 * kept as they arrive and dropped from the front once the total passes the
 * cap, so a chatty adapter costs at most `cap` bytes (plus one chunk) and no
 * copying per write. text() cuts at the cap and skips a UTF-8 sequence the
 * cut split.
 */
export class ByteRing {
  private chunks: Buffer[] = [];
  private size = 0;
  /** bytes dropped from the front so far */
  dropped = 0;

  constructor(readonly cap: number = STDERR_RING_BYTES) {
    if (!Number.isInteger(cap) || cap <= 0) throw new RangeError(`cap must be a positive integer, got ${String(cap)}`);
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - this.chunks[0]!.length >= this.cap) {
      const first = this.chunks.shift()!;
      this.size -= first.length;
      this.dropped += first.length;
    }
  }

  get length(): number {
    return Math.min(this.size, this.cap);
  }

  text(): string {
    let buf = Buffer.concat(this.chunks, this.size);
    if (buf.length > this.cap) buf = buf.subarray(buf.length - this.cap);
    let start = 0;
    // a cut in the middle of a UTF-8 sequence leaves continuation bytes (10xxxxxx) in front
    if (this.dropped > 0 || this.size > this.cap) while (start < buf.length && start < 3 && (buf[start]! & 0xc0) === 0x80) start++;
    return buf.subarray(start).toString("utf8");
  }
}

/**
 * Validates `envRemove` (ensureSession input): an array of non-empty strings
 * without "=" or NUL, never one of the two markers (a TypeError naming them:
 * without them neither verification nor the wrapper's escapee search can
 * tell the tree is ours).
 */
export function assertEnvRemove(value: unknown, name = "envRemove"): asserts value is readonly string[] {
  if (!Array.isArray(value)) throw new TypeError(`${name} must be an array of environment variable names`);
  value.forEach((k: unknown, i: number) => {
    if (typeof k !== "string" || k.length === 0 || k.includes("=") || k.includes("\0")) {
      throw new TypeError(`${name}[${i}] must be a non-empty environment variable name without "=" or NUL`);
    }
    if (MARKER_ENV_KEYS.includes(k)) {
      throw new TypeError(
        `${name}[${i}]: ${k} cannot be removed: ${MARKER_ENV_KEYS.join(" and ")} are the lease markers the wrapper and the adapter must carry`,
      );
    }
  });
}

/**
 * The wrapper's (and so the adapter's) environment: the gateway's, minus
 * `envRemove`, plus `env` (an explicit value wins over a removal: removal is
 * about what is inherited), plus the markers, which always win.
 */
export function buildWrapperEnv(input: Pick<LaunchInput, "env" | "envRemove" | "leaseId" | "gatewayInstanceId">, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  if (input.envRemove !== undefined) assertEnvRemove(input.envRemove);
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of input.envRemove ?? []) delete env[k];
  return {
    ...env,
    ...input.env,
    [LEASE_ENV_KEY]: input.leaseId,
    [INSTANCE_ENV_KEY]: input.gatewayInstanceId,
  };
}

/** The root argv (exactly what the kernel will report): the native wrapper is its own executable, the Node one runs under `nodePath`. */
export function rootArgvFor(nodePath: string, wrapperPath: string, command: readonly string[], graceMs: number): string[] {
  const args = wrapperArgs(wrapperPath, command, { graceMs });
  return wrapperKindOf(wrapperPath) === "native" ? args : [nodePath, ...args];
}

/**
 * Spawns the wrapper and wires it, as named steps: its spawn errors heard
 * first, the lifeline read into reports, the stderr ring, the exit, and how
 * the session ended once the lifeline is drained.
 */
export function launchWrapper(input: LaunchInput): LaunchedWrapper {
  const rootArgv = rootArgvFor(input.nodePath, input.wrapperPath, input.command, input.graceMs);
  const child = spawn(rootArgv[0]!, rootArgv.slice(1), {
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
    endLifeline: () => lifeline.end(),
    unref() {
      child.unref();
      for (const s of child.stdio ?? []) (s as { unref?: () => void } | null)?.unref?.();
    },
  };
}

/** The wrapper's spawn error (a host limit named with where its limit is read), and who else hears it. */
interface SpawnFailure {
  error(): Error | undefined;
  onError(listener: (err: Error) => void): void;
}

/**
 * Heard before anything else runs: a spawn that failed on EMFILE/ENFILE
 * emits "error" on the next tick and sets up no stdio at all (child.stdio is
 * then empty), and an "error" nobody listens to crashes the gateway.
 */
function hearSpawnErrors(child: ChildProcess, file: string): SpawnFailure {
  let spawnError: Error | undefined;
  const listeners: Array<(err: Error) => void> = [];
  child.on("error", (err) => {
    spawnError ??= hostResourceError(err, `spawn ${file}`) ?? err;
    for (const l of listeners) l(err);
  });
  return { error: () => spawnError, onError: (l) => void listeners.push(l) };
}

/** fd 3: the wrapper's reports, in arrival order, and whether our end has closed. */
interface Lifeline {
  readonly reports: WrapperReport[];
  find<T extends WrapperReport["type"]>(type: T): Extract<WrapperReport, { type: T }> | undefined;
  /** hears every later report; returns the unsubscribe */
  listen(listener: (r: WrapperReport) => void): () => void;
  readonly closed: Promise<void>;
  /** shuts down our writing half (the wrapper reads EOF) and keeps reading */
  end(): void;
}

function readLifeline(child: ChildProcess): Lifeline {
  const reports: WrapperReport[] = [];
  const listeners = new Set<(r: WrapperReport) => void>();
  const reader = createReportReader((r) => {
    reports.push(r);
    for (const l of listeners) l(r);
  });
  const pipe = (child.stdio?.[3] ?? null) as (Readable & Writable) | null;
  pipe?.on("data", (chunk: Buffer) => reader.push(chunk));
  pipe?.on("end", () => reader.end());
  // EPIPE/ECONNRESET on the lifeline only means the wrapper is gone; the exit event says how.
  pipe?.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => {
    if (!pipe) resolve();
    else pipe.once("close", () => resolve());
  });
  return {
    reports,
    find: <T extends WrapperReport["type"]>(t: T) => reports.find((r) => r.type === t) as Extract<WrapperReport, { type: T }> | undefined,
    listen(l) {
      listeners.add(l);
      return () => void listeners.delete(l);
    },
    closed,
    end: () => void pipe?.end(),
  };
}

/** The adapter's (and wrapper's) most recent stderr, and when it has gone quiet (LaunchedWrapper.stderrSettled). */
function keepStderr(child: ChildProcess): { tail(): string; settled: LaunchedWrapper["stderrSettled"] } {
  const ring = new ByteRing(STDERR_RING_BYTES);
  let lastStderrAt = 0;
  let stderrEnded = child.stderr === null;
  child.stderr?.on("data", (chunk: Buffer) => {
    ring.push(chunk);
    lastStderrAt = Date.now();
  });
  child.stderr?.once("close", () => (stderrEnded = true));
  child.stderr?.on("error", () => undefined);
  const settled = async (quietMs = 30, maxMs = 250): Promise<void> => {
    const deadline = Date.now() + maxMs;
    // at least one quiet period from now: data already in the pipe is read before it ends
    const since = Date.now();
    for (;;) {
      if (stderrEnded) return;
      const quietFor = Date.now() - Math.max(lastStderrAt, since);
      if (quietFor >= quietMs || Date.now() >= deadline) return;
      await new Promise((r) => setTimeout(r, Math.min(quietMs - quietFor, Math.max(1, deadline - Date.now()))).unref());
    }
  };
  return { tail: () => ring.text().trim(), settled };
}

/** The wrapper's exit (we are its parent: Node reaped it); a failed spawn emits "error" and never "exit", and counts as exited. */
interface ExitWatch {
  status(): ChildExit | undefined;
  readonly exited: Promise<ChildExit>;
}

function watchExit(child: ChildProcess, failure: SpawnFailure): ExitWatch {
  let exitStatus: ChildExit | undefined;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once("exit", (code, signal) => {
      exitStatus = { code, signal };
      resolve(exitStatus);
    });
    failure.onError(() => {
      if (child.pid === undefined) {
        exitStatus = { code: null, signal: null };
        resolve(exitStatus);
      }
    });
  });
  return { status: () => exitStatus, exited };
}

/** How the session ended (LaunchedWrapper.howEnded, ended, onEnd): after the wrapper's exit the lifeline is drained first. */
function watchEnd(child: ChildProcess, lifeline: Lifeline, exit: ExitWatch): Pick<LaunchedWrapper, "howEnded" | "ended" | "onEnd"> {
  const howEnded = (): SessionEnd | undefined => {
    const report = lifeline.find("exit");
    if (report) return { kind: "adapter-exited", code: report.code, signal: report.signal };
    const status = exit.status();
    if (!status) return undefined;
    if (status.signal !== null) return { kind: "wrapper-killed", wrapperPid: child.pid, signal: status.signal };
    return { kind: "wrapper-exited", wrapperPid: child.pid, code: status.code };
  };
  const listeners = new Set<(end: SessionEnd) => void>();
  const ended = exit.exited.then(async () => {
    // the lifeline may still hold the report that explains the exit
    await Promise.race([lifeline.closed, new Promise((r) => setTimeout(r, 200).unref())]);
    const end = howEnded()!;
    for (const l of listeners) l(end);
    listeners.clear();
    return end;
  });
  let endedValue: SessionEnd | undefined;
  void ended.then((e) => (endedValue = e));
  const onEnd = (listener: (end: SessionEnd) => void): (() => void) => {
    if (endedValue !== undefined) {
      const e = endedValue;
      queueMicrotask(() => listener(e));
      return () => undefined;
    }
    listeners.add(listener);
    return () => void listeners.delete(listener);
  };
  return { howEnded, ended, onEnd };
}

/** The first thing the wrapper tells us ("started" or "spawn-error"), or why it never did: its spawn error, its exit, or the timeout. */
function waitStart(lifeline: Lifeline, failure: SpawnFailure, exit: ExitWatch, timeoutMs: number): Promise<StartOutcome> {
  return new Promise<StartOutcome>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let unlisten: () => void = () => undefined;
    const done = (o: StartOutcome) => {
      clearTimeout(timer);
      unlisten();
      resolve(o);
    };
    const onReport = (r: WrapperReport) => {
      if (r.type === "started") done({ kind: "started", report: r });
      else if (r.type === "spawn-error") done({ kind: "spawn-error", report: r });
    };
    const early = lifeline.find("started") ?? lifeline.find("spawn-error");
    if (early) return onReport(early);
    const spawnError = failure.error();
    if (spawnError) return done({ kind: "error", error: spawnError });
    unlisten = lifeline.listen(onReport);
    timer = setTimeout(() => done({ kind: "timeout", ms: timeoutMs }), timeoutMs);
    void exit.exited.then(async (status) => {
      // the lifeline may still hold the report that explains the exit
      await Promise.race([lifeline.closed, new Promise((r) => setTimeout(r, 200))]);
      const late = lifeline.find("started") ?? lifeline.find("spawn-error");
      const error = failure.error();
      if (late) onReport(late);
      else if (error) done({ kind: "error", error });
      else done({ kind: "exited", exit: status });
    });
  });
}

function endedStream(): PassThrough {
  const s = new PassThrough();
  s.on("error", () => undefined);
  s.end();
  return s;
}

