/**
 * proclease's process supervisor in the shape OpenClaw's own has in
 * openclaw@2026.9.6 (src/process/supervisor/supervisor.ts there; read from
 * the published JS, it declares no types), so the gateway's exec tool can
 * run on it unchanged. Where the shapes differ:
 *
 * | OpenClaw                                   | here                                                        |
 * |--------------------------------------------|-------------------------------------------------------------|
 * | no sessionId / backendId                   | sessionId = the run id, backendId "openclaw"                |
 * | `maxCapturedOutputChars`                   | `maxOutputChars`                                            |
 * | pty `argv: [shell, ...args]`               | `ptyCommand` = `exec` + each argv entry single-quoted: the  |
 * |                                            | same argv, exactly (POSIX quoting is lossless)              |
 * | `resolveArgs()`                            | called once, appended to argv, as OpenClaw does             |
 * | `assertCurrent()` / `beforeSpawn()`        | called before the spawn; a throw rejects it, nothing starts |
 * | `onCancel(reason)`                         | called once, on a cancel or a deadline                      |
 * | `onStdoutRaw` / `onStderrRaw`              | the decoded chunk re-encoded as UTF-8 (no raw bytes kept)   |
 * | `activity`                                 | from the run record (last output) and the deadline          |
 * | `stdin.write(data, cb)`                    | the callback is called after the write                      |
 * | `acquireScopeCleanup(scope)`               | cancel the scope, wait for its runs                         |
 * | mode "anchored-shell", `secretInput`,      | refused (SupervisorAdapterError naming the field): nothing  |
 * | `argv0`                                    | here can carry them, and dropping one would change the run  |
 *
 * Every run is killed as a verified tree through proclease's guards either
 * way; exitSignal and timedOut follow proclease's rules (README "Process
 * supervisor", "The one difference from OpenClaw").
 */
import { randomUUID } from "node:crypto";
import type {
  ManagedRun,
  ManagedRunStdin,
  ProcessSupervisor,
  RunExit,
  SpawnInput,
  StdinMode,
  TerminationReason,
} from "../supervisor/index.js";

export interface OpenClawSpawnCommon {
  runId?: string;
  scopeKey?: string;
  replaceExistingScope?: boolean;
  cwd?: string;
  env?: Record<string, string | undefined>;
  exactEnv?: boolean;
  timeoutMs?: number;
  noOutputTimeoutMs?: number;
  captureOutput?: boolean;
  maxCapturedOutputChars?: number;
  onStdout?: (chunk: string) => void;
  onStderr?: (chunk: string) => void;
  cleanupOwnership?: "external" | string;
  assertCurrent?: () => void;
  beforeSpawn?: () => void;
  onCancel?: (reason: TerminationReason) => void;
}

export type OpenClawSpawnInput =
  | (OpenClawSpawnCommon & {
      mode: "child";
      argv: readonly string[];
      argv0?: string;
      resolveArgs?: () => readonly string[];
      windowsVerbatimArguments?: boolean;
      input?: string;
      stdinMode?: StdinMode;
      secretInput?: unknown;
      onStdoutRaw?: (chunk: Buffer) => void;
      onStderrRaw?: (chunk: Buffer) => void;
    })
  | (OpenClawSpawnCommon & { mode: "pty"; argv: readonly string[] })
  | (OpenClawSpawnCommon & { mode: "anchored-shell"; command: string });

export interface OpenClawRunStdin {
  readonly destroyed: boolean;
  readonly writable: boolean;
  write(data: string | Uint8Array, cb?: (err?: Error | null) => void): void;
  end(): void;
  destroy(): void;
}

export interface OpenClawRunActivity {
  readonly deadlineAtMs: number | undefined;
  readonly resultSettled: boolean;
  readonly lastOutputAtMs: number;
}

export interface OpenClawRunExit extends RunExit {
  oomScoreWrapperSelected: boolean;
}

export interface OpenClawManagedRun {
  readonly runId: string;
  readonly pid: number | undefined;
  readonly startedAtMs: number;
  readonly stdin: OpenClawRunStdin | undefined;
  readonly activity: OpenClawRunActivity;
  wait(): Promise<OpenClawRunExit>;
  cancel(reason?: TerminationReason): void;
  detachOutput(): void;
}

export interface OpenClawProcessSupervisor {
  spawn(input: OpenClawSpawnInput): Promise<OpenClawManagedRun>;
  cancel(runId: string, reason?: TerminationReason): void;
  cancelScope(scopeKey: string, reason?: TerminationReason): void;
  acquireScopeCleanup(scopeKey: string, options?: { processTree?: string }): () => Promise<void>;
  shutdown(): Promise<void>;
}

/** A spawn input this supervisor cannot run as asked; nothing was started. */
export class SupervisorAdapterError extends Error {
  override name = "SupervisorAdapterError";
  readonly code = "unsupported-spawn-input";
  constructor(
    readonly field: string,
    why: string,
  ) {
    super(`proclease supervisor (OpenClaw shape): ${field} is not supported: ${why}; nothing was started`);
  }
}

interface Tracked {
  scopeKey: string | undefined;
  done: Promise<unknown>;
  cancel(reason: TerminationReason): void;
}

export function createOpenClawProcessSupervisor(sup: ProcessSupervisor): OpenClawProcessSupervisor {
  const runs = new Map<string, Tracked>();
  const cancelScope = (scopeKey: string, reason: TerminationReason = "manual-cancel"): void => {
    if (scopeKey.trim() === "") return;
    for (const t of runs.values()) if (t.scopeKey === scopeKey) t.cancel(reason);
    sup.cancelScope(scopeKey, reason);
  };
  return {
    async spawn(input) {
      const { spawnInput, onCancelOnce, detach } = translate(input);
      const runId = spawnInput.runId!;
      if (runs.has(runId)) throw new Error(`runId ${runId} is already live`);
      input.assertCurrent?.();
      input.beforeSpawn?.();
      // a run is cancellable from the moment spawn is called (the supervisor registers it at once)
      const cancel = (reason: TerminationReason): void => {
        onCancelOnce(reason);
        sup.cancel(runId, reason);
      };
      const starting = sup.spawn(spawnInput);
      const tracked: Tracked = {
        scopeKey: input.scopeKey,
        done: starting
          .then((r) => r.wait())
          .finally(() => {
            if (runs.get(runId) === tracked) runs.delete(runId);
          }),
        cancel,
      };
      tracked.done.catch(() => undefined);
      runs.set(runId, tracked);
      return adaptRun(sup, await starting, input, cancel, onCancelOnce, detach);
    },
    cancel(runId, reason = "manual-cancel") {
      const t = runs.get(runId);
      if (t !== undefined) t.cancel(reason);
      else sup.cancel(runId, reason);
    },
    cancelScope,
    acquireScopeCleanup(scopeKey) {
      let closing: Promise<void> | undefined;
      return () =>
        (closing ??= (async () => {
          cancelScope(scopeKey);
          await Promise.allSettled([...runs.values()].filter((t) => t.scopeKey === scopeKey).map((t) => t.done));
        })());
    },
    async shutdown() {
      await sup.shutdown();
    },
  };
}

function translate(input: OpenClawSpawnInput): {
  spawnInput: SpawnInput;
  onCancelOnce: (r: TerminationReason) => void;
  detach: () => void;
} {
  if (input.mode === "anchored-shell")
    throw new SupervisorAdapterError('mode "anchored-shell"', "OpenClaw's service-relay shell has no counterpart here");
  if (input.mode === "child" && input.secretInput !== undefined)
    throw new SupervisorAdapterError("secretInput", "the run's extra descriptor for a secret cannot be passed");
  if (input.mode === "child" && input.argv0 !== undefined)
    throw new SupervisorAdapterError("argv0", "the run's argv[0] cannot be set apart from its executable");
  if (!Array.isArray(input.argv) || input.argv.length === 0) throw new TypeError("spawn argv cannot be empty");
  let cancelled = false;
  const onCancelOnce = (reason: TerminationReason): void => {
    if (cancelled) return;
    cancelled = true;
    try {
      input.onCancel?.(reason);
    } catch {
      // the caller's hook never changes the cancel
    }
  };
  let detached = false;
  const forward = (text?: (c: string) => void, raw?: (c: Buffer) => void): ((c: string) => void) | undefined =>
    text === undefined && raw === undefined
      ? undefined
      : (c) => {
          if (detached) return;
          text?.(c);
          raw?.(Buffer.from(c, "utf8"));
        };
  const runId = input.runId ?? randomUUID();
  const common = {
    runId,
    sessionId: runId,
    backendId: "openclaw",
    ...(input.scopeKey !== undefined ? { scopeKey: input.scopeKey } : {}),
    ...(input.replaceExistingScope !== undefined ? { replaceExistingScope: input.replaceExistingScope } : {}),
    ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
    ...(input.env !== undefined ? { env: input.env } : {}),
    ...(input.timeoutMs !== undefined && input.timeoutMs > 0 ? { timeoutMs: input.timeoutMs } : {}),
    ...(input.noOutputTimeoutMs !== undefined && input.noOutputTimeoutMs > 0
      ? { noOutputTimeoutMs: input.noOutputTimeoutMs }
      : {}),
    ...(input.captureOutput !== undefined ? { captureOutput: input.captureOutput } : {}),
    ...(input.maxCapturedOutputChars !== undefined
      ? { maxOutputChars: Math.max(1, Math.floor(input.maxCapturedOutputChars)) }
      : {}),
  };
  const rawOut = input.mode === "child" ? input.onStdoutRaw : undefined;
  const rawErr = input.mode === "child" ? input.onStderrRaw : undefined;
  const outputs = {
    ...withHandler("onStdout", forward(input.onStdout, rawOut)),
    ...withHandler("onStderr", forward(input.onStderr, rawErr)),
  };
  const detach = (): void => {
    detached = true;
  };
  if (input.mode === "pty")
    return {
      spawnInput: { ...common, ...outputs, mode: "pty", ptyCommand: execCommandLine(input.argv) },
      onCancelOnce,
      detach,
    };
  const argv = [...input.argv, ...(input.resolveArgs?.() ?? [])];
  return {
    spawnInput: {
      ...common,
      ...outputs,
      mode: "child",
      argv,
      ...(input.input !== undefined ? { input: input.input } : {}),
      ...(input.stdinMode !== undefined ? { stdinMode: input.stdinMode } : {}),
    },
    onCancelOnce,
    detach,
  };
}

function withHandler(
  name: "onStdout" | "onStderr",
  fn: ((c: string) => void) | undefined,
): Partial<Record<"onStdout" | "onStderr", (c: string) => void>> {
  return fn === undefined ? {} : { [name]: fn };
}

/** `exec 'a' 'b' …`: the PTY's /bin/sh runs exactly this argv (single quotes keep every byte but the quote, written '\''). */
export function execCommandLine(argv: readonly string[]): string {
  return `exec ${argv.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(" ")}`;
}

function adaptRun(
  sup: ProcessSupervisor,
  run: ManagedRun,
  input: OpenClawSpawnInput,
  cancel: (reason: TerminationReason) => void,
  onCancelOnce: (reason: TerminationReason) => void,
  detach: () => void,
): OpenClawManagedRun {
  let settled = false;
  const exit = run.wait().then((e): OpenClawRunExit => {
    settled = true;
    if (e.reason === "overall-timeout" || e.reason === "no-output-timeout") onCancelOnce(e.reason);
    return { ...e, oomScoreWrapperSelected: false };
  });
  exit.catch(() => undefined);
  const timeout = input.timeoutMs !== undefined && input.timeoutMs > 0 ? input.timeoutMs : undefined;
  const activity: OpenClawRunActivity = {
    get deadlineAtMs() {
      return timeout === undefined ? undefined : run.startedAtMs + timeout;
    },
    get resultSettled() {
      return settled;
    },
    get lastOutputAtMs() {
      return sup.getRecord(run.runId)?.lastOutputAtMs ?? run.startedAtMs;
    },
  };
  return {
    runId: run.runId,
    pid: run.pid,
    startedAtMs: run.startedAtMs,
    stdin: run.stdin === undefined ? undefined : adaptStdin(run.stdin),
    activity,
    wait: () => exit,
    cancel: (reason = "manual-cancel") => cancel(reason),
    detachOutput: detach,
  };
}

function adaptStdin(s: ManagedRunStdin): OpenClawRunStdin {
  let ended = false;
  return {
    get destroyed() {
      return s.destroyed;
    },
    get writable() {
      return !ended && !s.destroyed;
    },
    write(data, cb) {
      try {
        s.write(data);
        cb?.(null);
      } catch (err) {
        cb?.(err instanceof Error ? err : new Error(String(err)));
      }
    },
    end() {
      ended = true;
      s.end();
    },
    destroy() {
      if (!ended) this.end();
    },
  };
}

const HOLDER = Symbol.for("openclaw.processSupervisorHolder");

/**
 * Makes OpenClaw's getProcessSupervisor() (the exec tool's) answer with
 * `supervisor`: OpenClaw keeps its supervisor in a process-wide holder
 * (`globalThis[Symbol.for("openclaw.processSupervisorHolder")].current`,
 * 2026.9.6). Returns the undo. OpenClaw resets the holder when its plugin
 * registry restarts, so install again after a reload.
 */
export function installOpenClawProcessSupervisor(supervisor: OpenClawProcessSupervisor): () => void {
  const g = globalThis as unknown as Record<symbol, { current: unknown } | undefined>;
  const holder = g[HOLDER] ?? (g[HOLDER] = { current: null });
  const before = holder.current;
  holder.current = supervisor;
  return () => {
    if (holder.current === supervisor) holder.current = before;
  };
}
