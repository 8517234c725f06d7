/**
 * Process actions for background exec sessions (OpenClaw's process tool: poll, log,
 * send-keys, paste, submit, kill, remove). A session is a background run the
 * supervisor spawned, or a process adopted by pid that it does not know
 * (e.g. one started by an earlier incarnation). A session the supervisor
 * started is terminated through supervisor.cancel only. An adopted one is
 * pinned to the exact process it named at adopt time (its start time) and
 * terminated by the guarded OS tree kill of that process only: a pid that now
 * names another process is never signalled.
 */
import { getProcessFacts } from "../facts/get.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import { assertPid } from "../facts/validate.js";
import { DEFAULT_GRACE_MS, reapStoppedPid } from "../ownership/index.js";
import { BRACKETED_PASTE_END, BRACKETED_PASTE_START, encodeKeySequence, type KeySequence } from "./keys.js";
import { killProcessTree, type KillTreeResult } from "./kill-tree.js";
import { capTail, DEFAULT_MAX_OUTPUT_CHARS, maxOutputOption, tailStart, truncationMarker } from "./output.js";
import type { ProcessSupervisor } from "./supervisor.js";
import type { ManagedRun, ManagedRunStdin, RunExit, SpawnInput } from "./types.js";
import { isAlive, provablyGone } from "../facts/liveness.js";

export const DEFAULT_FINISHED_TTL_MS = 30 * 60_000;
export const DEFAULT_MAX_POLL_WAIT_MS = 30_000;
export const DEFAULT_LOG_LINES = 200;
export const DEFAULT_ADOPTED_CHECK_MS = 1000;

export type ExecSessionStatus = "running" | "exited";

export interface ExecSessionInfo {
  id: string;
  /** the supervisor run id; absent for adopted processes */
  runId?: string;
  pid?: number;
  /** adopted sessions: the start time recorded at adopt time (ProcessInfo.startTime); kill/remove signal only that process */
  startTime?: string;
  mode: "child" | "pty" | "adopted";
  command: string;
  status: ExecSessionStatus;
  startedAtMs: number;
  exitedAtMs?: number;
  exit?: RunExit;
}

export interface PollResult {
  status: ExecSessionStatus;
  /** output that arrived since the previous poll */
  output: string;
  exit?: RunExit;
}

export interface LogResult {
  lines: string[];
  totalLines: number;
  /** index of the first returned line */
  offset: number;
}

export type TerminateResult =
  | { via: "supervisor"; exit: RunExit }
  | { via: "tree-kill"; result: KillTreeResult }
  | { via: "none"; reason: "already-exited" | "no-pid" };

export type ProcessActionRequest =
  | { action: "list" }
  | { action: "poll"; sessionId: string; timeoutMs?: number; signal?: AbortSignal }
  | { action: "log"; sessionId: string; offset?: number; limit?: number }
  | { action: "write"; sessionId: string; data: string; eof?: boolean }
  | ({ action: "send-keys"; sessionId: string } & KeySequence)
  | { action: "submit"; sessionId: string; text: string }
  | { action: "paste"; sessionId: string; text: string }
  | { action: "kill"; sessionId: string }
  | { action: "clear"; sessionId: string }
  | { action: "remove"; sessionId: string };

export type ProcessActionResult =
  | { action: "list"; sessions: ExecSessionInfo[] }
  | ({ action: "poll" } & PollResult)
  | ({ action: "log" } & LogResult)
  | { action: "write" | "send-keys" | "submit" | "paste" | "clear"; ok: true }
  | { action: "kill" | "remove"; result: TerminateResult };

export interface ExecSessionsOptions {
  supervisor: ProcessSupervisor;
  /** finished sessions are forgotten this long after they exit; default 30 min */
  finishedTtlMs?: number;
  /** upper bound for a poll's wait, whatever the caller asks; default 30 s */
  maxPollWaitMs?: number;
  /** aggregated output kept per session (the tail); default 1 000 000 characters */
  maxOutputChars?: number;
  /** for the tree kill of adopted sessions; default DEFAULT_GRACE_MS */
  graceMs?: number;
  /** how often adopted sessions are checked for an exit (so the TTL can expire them); default 1000 ms */
  adoptedCheckMs?: number;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
}

export interface ExecSessions {
  /** Spawns a background run through the supervisor and tracks it as a session (id = runId). */
  start(input: SpawnInput): Promise<ExecSessionInfo>;
  /**
   * Tracks a live process the supervisor does not know. Its start time is
   * read now (rejects when the process is not running or the facts backend
   * cannot tell its identity); kill/remove tree-kill that exact process only,
   * and the session is marked exited once that process is gone.
   */
  adopt(input: { pid: number; command: string; id?: string }): Promise<ExecSessionInfo>;
  list(): ExecSessionInfo[];
  /**
   * Output since the previous poll; with `timeoutMs`, waits (up to
   * maxPollWaitMs) for output or the exit first. An aborted `signal` ends
   * the wait at once and rejects with its reason (an AbortError by
   * default); the output stays pending for the next poll.
   */
  poll(id: string, opts?: { timeoutMs?: number; signal?: AbortSignal }): Promise<PollResult>;
  log(id: string, opts?: { offset?: number; limit?: number }): LogResult;
  write(id: string, data: string, opts?: { eof?: boolean }): void;
  sendKeys(id: string, seq: KeySequence): void;
  /** text then Enter (CR on a PTY, LF on a pipe) */
  submit(id: string, text: string): void;
  /** bracketed paste on a PTY, plain text on a pipe */
  paste(id: string, text: string): void;
  kill(id: string): Promise<TerminateResult>;
  /** Forgets a finished session; a running one must be killed or removed instead. */
  clear(id: string): void;
  /** Forgets the session at once (even while running) and still terminates it. */
  remove(id: string): Promise<TerminateResult>;
  run(request: ProcessActionRequest): Promise<ProcessActionResult>;
  /** Drops finished sessions older than the TTL; returns how many went. */
  sweep(now?: number): number;
}

interface Session {
  info: ExecSessionInfo;
  run?: ManagedRun;
  stdin?: ManagedRunStdin;
  pty: boolean;
  output: string;
  dropped: number;
  pending: string;
  exitPromise?: Promise<RunExit>;
  waiters: Set<() => void>;
}

/** adopt() could not pin the pid to one process: nothing was adopted. */
export class AdoptError extends Error {
  override readonly name = "AdoptError";
  constructor(
    readonly pid: number,
    reason: string,
  ) {
    super(`cannot adopt pid ${pid}: ${reason}`);
  }
}

export class UnknownSessionError extends Error {
  override readonly name = "UnknownSessionError";
  constructor(readonly sessionId: string) {
    super(`no exec session ${JSON.stringify(sessionId)}`);
  }
}

export function createExecSessions(opts: ExecSessionsOptions): ExecSessions {
  const { supervisor } = opts;
  const ttl = opts.finishedTtlMs ?? DEFAULT_FINISHED_TTL_MS;
  const maxPoll = opts.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS;
  const cap = maxOutputOption(opts.maxOutputChars, DEFAULT_MAX_OUTPUT_CHARS, "maxOutputChars");
  const graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
  const checkMs = Math.max(1, opts.adoptedCheckMs ?? DEFAULT_ADOPTED_CHECK_MS);
  let factsCache: ProcessFacts | undefined;
  const facts = (): ProcessFacts => (factsCache ??= opts.facts ?? getProcessFacts());
  const sessions = new Map<string, Session>();

  const sweep = (now = Date.now()): number => {
    let n = 0;
    for (const [id, s] of sessions) {
      if (s.info.status === "exited" && s.info.exitedAtMs !== undefined && now - s.info.exitedAtMs >= ttl) {
        sessions.delete(id);
        n++;
      }
    }
    return n;
  };

  const get = (id: string): Session => {
    sweep();
    const s = sessions.get(id);
    if (!s) throw new UnknownSessionError(id);
    return s;
  };

  const notify = (s: Session) => {
    for (const w of s.waiters) w();
    s.waiters.clear();
  };

  const append = (s: Session, chunk: string) => {
    s.output += chunk;
    s.pending += chunk;
    if (s.output.length > cap) {
      const at = tailStart(s.output, s.output.length - cap);
      s.dropped += at;
      s.output = s.output.slice(at);
    }
    s.pending = capTail(s.pending, cap);
    notify(s);
  };

  const markExited = (s: Session, exit?: RunExit) => {
    if (s.info.status === "exited") return;
    s.info.status = "exited";
    s.info.exitedAtMs = Date.now();
    if (exit) s.info.exit = exit;
    notify(s);
  };

  const stdinOf = (s: Session): ManagedRunStdin => {
    if (s.info.status === "exited") throw new Error(`exec session ${s.info.id} has exited`);
    if (!s.stdin || s.stdin.destroyed) throw new Error(`exec session ${s.info.id} has no open stdin`);
    return s.stdin;
  };

  const terminate = async (s: Session): Promise<TerminateResult> => {
    if (s.info.status === "exited") return { via: "none", reason: "already-exited" };
    if (s.info.runId !== undefined && s.exitPromise) {
      if (supervisor.cancel(s.info.runId, "manual-cancel")) return { via: "supervisor", exit: await s.exitPromise };
      // the supervisor has no live record: the root already exited and its
      // exit is on its way; its pid may be someone else's by now, so no kill by pid
      await s.exitPromise;
      return { via: "none", reason: "already-exited" };
    }
    if (s.info.pid === undefined || s.info.startTime === undefined) return { via: "none", reason: "no-pid" };
    const pid = s.info.pid;
    const result = await killProcessTree(pid, {
      graceMs,
      facts: facts(),
      signaller: opts.signaller,
      expectedStartTime: s.info.startTime,
    });
    // gone or mismatch: the adopted process is no longer there (a pid reused by
    // another process means ours exited); reaped: only if the reaper saw it stop
    if (result.outcome === "gone" || result.outcome === "mismatch" || (result.outcome === "reaped" && reapStoppedPid(result.report, pid))) {
      markExited(s);
    }
    return { via: "tree-kill", result };
  };

  /**
   * Adopted sessions have no exit event: one unref'd timer checks them while
   * any is running, so a process that exits on its own becomes a finished
   * session (and the TTL can expire it). Unknown evidence changes nothing.
   */
  let checkTimer: NodeJS.Timeout | undefined;
  let checking = false;
  const adoptedRunning = () => [...sessions.values()].filter((x) => x.info.mode === "adopted" && x.info.status === "running");
  const checkAdopted = async (): Promise<void> => {
    if (checking) return;
    checking = true;
    try {
      await Promise.all(
        adoptedRunning().map(async (x) => {
          if (await adoptedExited(facts(), x.info.pid!, x.info.startTime!)) markExited(x);
        }),
      );
    } finally {
      checking = false;
      if (adoptedRunning().length === 0 && checkTimer) {
        clearInterval(checkTimer);
        checkTimer = undefined;
      }
    }
  };
  const watchAdopted = () => {
    if (checkTimer) return;
    checkTimer = setInterval(() => void checkAdopted(), checkMs);
    checkTimer.unref();
  };

  const api: ExecSessions = {
    async start(input) {
      // Output can arrive while spawn() is still settling (lease bookkeeping):
      // it is buffered until the session exists, never dropped.
      let session: Session | undefined;
      const early: string[] = [];
      const sink = (c: string) => (session ? append(session, c) : void early.push(c));
      const run = await supervisor.spawn({
        ...input,
        background: true,
        captureOutput: false,
        onStdout: (c) => {
          sink(c);
          input.onStdout?.(c);
        },
        onStderr: (c) => {
          sink(c);
          input.onStderr?.(c);
        },
      });
      const s: Session = {
        info: {
          id: run.runId,
          runId: run.runId,
          pid: run.pid,
          mode: input.mode,
          command: input.mode === "pty" ? input.ptyCommand : input.argv.join(" "),
          status: "running",
          startedAtMs: run.startedAtMs,
        },
        run,
        stdin: run.stdin,
        pty: input.mode === "pty",
        output: "",
        dropped: 0,
        pending: "",
        waiters: new Set(),
      };
      sessions.set(run.runId, s);
      session = s;
      for (const c of early) append(s, c);
      s.exitPromise = run.wait().then((exit) => {
        markExited(s, exit);
        return exit;
      });
      return { ...s.info };
    },

    async adopt({ pid, command, id }) {
      assertPid(pid, "pid");
      const sid = id ?? `pid-${pid}-${Date.now()}`;
      if (sessions.has(sid)) throw new Error(`exec session ${sid} already exists`);
      const f = facts();
      if (f.identityStrength === "none") {
        throw new AdoptError(pid, `the facts backend "${f.backend}" cannot read process identity, so a later kill could not be pinned to this process`);
      }
      let details;
      try {
        details = await f.inspect(pid);
      } catch (err) {
        throw new AdoptError(pid, `it could not be inspected (${err instanceof Error ? err.message : String(err)})`);
      }
      if (details === null || !isAlive(details)) throw new AdoptError(pid, "no such running process");
      const startTime = String(details.startTime);
      if (!/^\d+$/.test(startTime)) throw new AdoptError(pid, "its start time could not be read");
      if (sessions.has(sid)) throw new Error(`exec session ${sid} already exists`);
      const s: Session = {
        info: { id: sid, pid, startTime, mode: "adopted", command, status: "running", startedAtMs: Date.now() },
        pty: false,
        output: "",
        dropped: 0,
        pending: "",
        waiters: new Set(),
      };
      sessions.set(sid, s);
      watchAdopted();
      return { ...s.info };
    },

    list() {
      sweep();
      return [...sessions.values()].map((s) => ({ ...s.info }));
    },

    async poll(id, o = {}) {
      const signal = o.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError("signal must be an AbortSignal");
      signal?.throwIfAborted();
      const s = get(id);
      if (s.info.mode === "adopted" && s.info.status === "running" && (await adoptedExited(facts(), s.info.pid!, s.info.startTime!))) {
        markExited(s);
      }
      const wait = Math.min(Math.max(0, o.timeoutMs ?? 0), maxPoll);
      if (s.pending === "" && s.info.status === "running" && wait > 0) {
        await new Promise<void>((resolve, reject) => {
          const finish = (aborted: boolean) => {
            clearTimeout(t);
            s.waiters.delete(wake);
            signal?.removeEventListener("abort", onAbort);
            if (aborted) reject(signal!.reason);
            else resolve();
          };
          const wake = () => finish(false);
          const onAbort = () => finish(true);
          const t = setTimeout(wake, wait);
          s.waiters.add(wake);
          signal?.addEventListener("abort", onAbort, { once: true });
        });
      }
      // aborted after the wait ended (or while the adopted check ran): the output stays pending
      signal?.throwIfAborted();
      const output = s.pending;
      s.pending = "";
      return { status: s.info.status, output, ...(s.info.exit ? { exit: s.info.exit } : {}) };
    },

    log(id, o = {}) {
      const s = get(id);
      const text = (s.dropped > 0 ? truncationMarker(s.dropped) : "") + s.output;
      const all = text.split(/\r?\n/);
      if (all.length > 0 && all[all.length - 1] === "") all.pop();
      const limit = o.limit ?? DEFAULT_LOG_LINES;
      if (!Number.isInteger(limit) || limit < 0) throw new RangeError(`limit must be an integer >= 0, got ${limit}`);
      let offset: number;
      if (o.offset === undefined) offset = Math.max(0, all.length - limit);
      else {
        if (!Number.isInteger(o.offset) || o.offset < 0) throw new RangeError(`offset must be an integer >= 0, got ${o.offset}`);
        offset = o.offset;
      }
      return { lines: all.slice(offset, offset + limit), totalLines: all.length, offset };
    },

    write(id, data, o = {}) {
      const stdin = stdinOf(get(id));
      stdin.write(data);
      if (o.eof) stdin.end();
    },

    sendKeys(id, seq) {
      const bytes = encodeKeySequence(seq);
      stdinOf(get(id)).write(bytes);
    },

    submit(id, text) {
      const s = get(id);
      stdinOf(s).write(text + (s.pty ? "\r" : "\n"));
    },

    paste(id, text) {
      const s = get(id);
      stdinOf(s).write(s.pty ? `${BRACKETED_PASTE_START}${text}${BRACKETED_PASTE_END}` : text);
    },

    kill(id) {
      return terminate(get(id));
    },

    clear(id) {
      const s = get(id);
      if (s.info.status !== "exited") throw new Error(`exec session ${id} is still running; use kill or remove`);
      sessions.delete(id);
    },

    remove(id) {
      const s = get(id);
      // dropped first, synchronously: the session is gone for every caller
      // even while its termination (up to the grace period) is still running
      sessions.delete(id);
      return terminate(s);
    },

    async run(req) {
      switch (req.action) {
        case "list":
          return { action: "list", sessions: api.list() };
        case "poll":
          return { action: "poll", ...(await api.poll(req.sessionId, { timeoutMs: req.timeoutMs, signal: req.signal })) };
        case "log":
          return { action: "log", ...api.log(req.sessionId, { offset: req.offset, limit: req.limit }) };
        case "write":
          api.write(req.sessionId, req.data, { eof: req.eof });
          return { action: "write", ok: true };
        case "send-keys":
          api.sendKeys(req.sessionId, req);
          return { action: "send-keys", ok: true };
        case "submit":
          api.submit(req.sessionId, req.text);
          return { action: "submit", ok: true };
        case "paste":
          api.paste(req.sessionId, req.text);
          return { action: "paste", ok: true };
        case "kill":
          return { action: "kill", result: await api.kill(req.sessionId) };
        case "clear":
          api.clear(req.sessionId);
          return { action: "clear", ok: true };
        case "remove":
          return { action: "remove", result: await api.remove(req.sessionId) };
        default:
          throw new TypeError(`unknown process action ${JSON.stringify((req as { action?: unknown }).action)}`);
      }
    },

    sweep,
  };
  return api;
}

/** true when the adopted process is provably gone (liveness.ts provablyGone). */
function adoptedExited(facts: ProcessFacts, pid: number, startTime: string): Promise<boolean> {
  return provablyGone(facts, { pid, startTime });
}
