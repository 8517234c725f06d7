/**
 * ACP client terminals (`clientCapabilities.terminal`), served by the
 * process supervisor as leased background runs that belong to the session:
 * - terminal/create spawns `command` with `args` (an argv, never a shell
 *   string) as a supervisor run: its own process group, a lease with the
 *   markers in its environment, and its own cgroup where the host allows it
 *   (the supervisor's containment). Its environment is what the adapter got
 *   (the gateway's minus the session's envRemove, plus its env), plus the
 *   request's `env`.
 * - output is stdout and stderr together, the tail kept within
 *   `outputByteLimit` bytes (cut on a UTF-8 character boundary; `truncated`
 *   says so).
 * - terminal/kill and terminal/release end the run's whole tree through its
 *   lease (escapees carrying its markers and whatever is in its cgroup
 *   included, also after the root itself exited), and resolve once it is
 *   gone. So does the session's close, the controller's shutdown, the end
 *   of the session's processes, the maintenance timer (for a lease left
 *   closing) and (through the startup reap, which reconciles these runs'
 *   leases) the gateway's own death. acpx's terminals kill only the direct
 *   child.
 * - A durable session's terminals (durable/terminals.ts) run under the
 *   terminal holder instead: their output and exit status are kept in the
 *   state dir, they wait with the session when the gateway goes, and the
 *   controller that re-adopts the session takes them back (`retake`) before
 *   it answers any terminal request.
 */
import { randomUUID } from "node:crypto";
import { isAbsolute } from "node:path";
import {
  RequestError,
  type CreateTerminalRequest,
  type CreateTerminalResponse,
  type KillTerminalRequest,
  type ReleaseTerminalRequest,
  type TerminalOutputRequest,
  type TerminalOutputResponse,
  type WaitForTerminalExitRequest,
  type WaitForTerminalExitResponse,
} from "@agentclientprotocol/sdk";
import type { ProcessSupervisor } from "../../supervisor/index.js";
import { utf8TailStart } from "../../supervisor/shared/output.js";
import { forgetFiles, type DurableTerminals } from "../durable/terminals.js";
import { exitStatusOf, spawnHeld, type Terminal } from "../durable/terminal-runs.js";
import type { ControllerLogger } from "../report/logger.js";
import type { AnswerBudget, SessionBudget } from "./session-budget.js";

/** run ids of ACP terminals start with this (the startup reap takes these runs only) */
export const TERMINAL_RUN_PREFIX = "acp-terminal-";
export const TERMINAL_BACKEND_ID = "proclease-acp-terminal";
export const DEFAULT_TERMINAL_OUTPUT_BYTES = 1024 * 1024;
export const DEFAULT_MAX_TERMINALS = 16;

/** The controller option `clientCapabilities.terminal` in its object form (`true` = these defaults). */
export interface ClientTerminalOptions {
  /** live terminals per session (default 16); one more is refused */
  maxTerminals?: number;
  /** output kept per terminal when the agent asks for no limit, and the most it may ask for (default 1 MiB) */
  maxOutputBytes?: number;
}

/** the JSON-RPC envelope around a terminal's output, counted with it */
const ANSWER_ENVELOPE_BYTES = 512;

export interface ClientTerminalHandlers {
  create(p: CreateTerminalRequest): Promise<CreateTerminalResponse>;
  /** `answer`: the request's share of the session's answer budget, charged with the output's size before it is copied */
  output(p: TerminalOutputRequest, answer?: AnswerBudget): Promise<TerminalOutputResponse>;
  waitForExit(p: WaitForTerminalExitRequest, signal: AbortSignal): Promise<WaitForTerminalExitResponse>;
  kill(p: KillTerminalRequest): Promise<void>;
  release(p: ReleaseTerminalRequest): Promise<void>;
}

export function assertTerminalOption(v: unknown, name: string): void {
  if (v === undefined || typeof v === "boolean") return;
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${name} must be a boolean or { maxTerminals?, maxOutputBytes? }`);
  for (const [k, x] of Object.entries(v)) {
    if (k !== "maxTerminals" && k !== "maxOutputBytes")
      throw new TypeError(`${name}.${k} is not an option (maxTerminals, maxOutputBytes)`);
    if (x !== undefined && (typeof x !== "number" || !Number.isSafeInteger(x) || x < 1))
      throw new TypeError(`${name}.${k} must be a positive integer`);
  }
}

export interface SessionTerminalsInput {
  supervisor: ProcessSupervisor;
  sessionKey: string;
  /** the agent session id requests must name */
  sessionId: () => string | undefined;
  cwd: string;
  /** the environment the adapter was given */
  env: Record<string, string | undefined>;
  options: ClientTerminalOptions;
  log: ControllerLogger;
  /** the session's budget: terminal slots are taken from it at acceptance */
  budget: SessionBudget;
  /** durable sessions: terminals under the holder, and the session's lease and wrapper they wait with (once known) */
  durable?: {
    terminals: DurableTerminals;
    /** the session's wrapper with its start time as its lease recorded it; undefined until the session is up */
    session: () => { leaseId: string; pid: number; startTicks: string } | undefined;
  };
}

/** The terminals of one session. */
export class SessionTerminals implements ClientTerminalHandlers {
  private readonly terminals = new Map<string, Terminal>();
  /** spawns accepted and not finished (each holds a slot); a close waits for them */
  private readonly spawning = new Set<Promise<unknown>>();
  private closed = false;
  /** the terminals an earlier gateway left, being taken back: every request waits for them */
  private ready: Promise<void> | undefined;

  constructor(private readonly i: SessionTerminalsInput) {}

  get size(): number {
    return this.terminals.size;
  }

  /** run ids of the live terminals (for status) */
  runIds(): string[] {
    return [...this.terminals.values()].map((t) => t.runId);
  }

  /**
   * The terminals of a re-adopted session (durable/terminal-runs.ts
   * retakeTerminals), kept as this session's before any request is
   * answered; each holds a slot, whatever the limit (it was counted when
   * it was made).
   */
  retake(taken: Promise<Terminal[]>): void {
    this.ready = taken.then(
      (ts) => {
        for (const t of ts) {
          this.i.budget.takeTerminal(Number.MAX_SAFE_INTEGER);
          this.terminals.set(t.runId, t);
        }
      },
      (e: unknown) =>
        void this.i.log.warn?.(
          `the terminals of re-adopted ${JSON.stringify(this.i.sessionKey)} could not be taken back: ${e instanceof Error ? e.message : String(e)}`,
        ),
    );
  }

  /**
   * Accepted or refused before anything is awaited: the session's slot is
   * taken at once, so requests sent together cannot pass the limit between
   * a check and a spawn; a close that began meanwhile ends what the spawn
   * made and refuses it.
   */
  create(p: CreateTerminalRequest): Promise<CreateTerminalResponse> {
    // in order, after the terminals being taken back are counted
    if (this.ready !== undefined) return this.ready.then(() => this.accept(p));
    return this.accept(p);
  }

  private accept(p: CreateTerminalRequest): Promise<CreateTerminalResponse> {
    try {
      this.checkSession(p.sessionId);
    } catch (e) {
      return Promise.reject(e);
    }
    if (this.closed)
      return Promise.reject(
        RequestError.invalidRequest({ refusal: "session-closing" }, "the session is closing: no new terminal"),
      );
    const max = this.i.options.maxTerminals ?? DEFAULT_MAX_TERMINALS;
    if (!this.i.budget.takeTerminal(max)) {
      this.i.budget.refuse("too-many-terminals", `terminal/create refused: at most ${max} terminals per session`);
      return Promise.reject(
        RequestError.invalidRequest(
          { refusal: "too-many-terminals", max },
          `at most ${max} terminals per session; release one first`,
        ),
      );
    }
    const spawned = this.spawn(p).catch((e: unknown) => {
      this.i.budget.returnTerminal();
      throw e;
    });
    const tracked = spawned.catch(() => undefined);
    this.spawning.add(tracked);
    void tracked.then(() => this.spawning.delete(tracked));
    return spawned;
  }

  private async spawn(p: CreateTerminalRequest): Promise<CreateTerminalResponse> {
    if (typeof p.command !== "string" || p.command === "")
      throw RequestError.invalidParams({ refusal: "no-command" }, "terminal/create needs a command");
    const cwd = p.cwd ?? this.i.cwd;
    if (!isAbsolute(cwd))
      throw RequestError.invalidParams({ refusal: "not-absolute", cwd }, "terminal cwd must be absolute");
    const ceiling = this.i.options.maxOutputBytes ?? DEFAULT_TERMINAL_OUTPUT_BYTES;
    const limit = Math.max(0, Math.min(ceiling, p.outputByteLimit ?? ceiling));
    const env: Record<string, string | undefined> = { ...this.i.env };
    for (const e of p.env ?? []) env[e.name] = e.value;
    const terminalId = `${TERMINAL_RUN_PREFIX}${randomUUID()}`;
    const argv = [p.command, ...(p.args ?? [])];
    const t = await this.start(terminalId, argv, cwd, env, limit).catch((e: unknown) => {
      throw RequestError.internalError(
        { refusal: "spawn-failed" },
        `terminal/create: ${e instanceof Error ? e.message : String(e)}`,
      );
    });
    if (this.closed) {
      // the close began while this spawned: it is ended here, and the close waits for this
      await this.end(t, "the session closed while the terminal was spawned");
      await this.forget(t);
      throw RequestError.invalidRequest({ refusal: "session-closing" }, "the session is closing: no new terminal");
    }
    this.terminals.set(terminalId, t);
    this.i.log.info?.(
      `terminal ${terminalId} started for ${JSON.stringify(this.i.sessionKey)}: ${p.command} (pid ${t.pid ?? "none"})`,
      { sessionKey: this.i.sessionKey, terminalId, pid: t.pid },
    );
    return { terminalId };
  }

  /**
   * A durable session's terminal runs under the holder (it waits with the
   * session); any other, or one whose session's wrapper cannot be read
   * (not spawned yet, gone), runs as before: its output held here, ended
   * with the gateway.
   */
  private async start(
    terminalId: string,
    argv: string[],
    cwd: string,
    env: Record<string, string | undefined>,
    limit: number,
  ): Promise<Terminal> {
    const common = {
      backendId: TERMINAL_BACKEND_ID,
      scopeKey: `acp-terminal:${this.i.sessionKey}`,
      sessionKey: this.i.sessionKey,
    };
    const session = this.i.durable?.session();
    if (this.i.durable !== undefined && session !== undefined)
      return spawnHeld(this.i.supervisor, this.i.durable.terminals, {
        ...common,
        terminalId,
        session,
        command: argv,
        cwd,
        env,
        limit,
      });
    const out = new OutputTail(limit);
    const run = await this.i.supervisor.spawn({
      mode: "child",
      runId: terminalId,
      sessionId: this.i.sessionKey,
      backendId: common.backendId,
      scopeKey: common.scopeKey,
      argv,
      cwd,
      env,
      background: true,
      captureOutput: false,
      onStdout: (c) => out.append(c),
      onStderr: (c) => out.append(c),
    });
    const t: Terminal = {
      runId: terminalId,
      pid: run.pid,
      read: () => Promise.resolve({ bytes: out.byteLength, text: () => out.text(), truncated: out.truncated }),
      exit: undefined,
      exited: run.wait().then(exitStatusOf),
      retaken: false,
      files: undefined,
    };
    void t.exited.then((x) => {
      t.exit = x;
    });
    return t;
  }

  async output(p: TerminalOutputRequest, answer?: AnswerBudget): Promise<TerminalOutputResponse> {
    const t = await this.get(p.sessionId, p.terminalId);
    // the exit first: output read after it is all the command wrote
    const exit = t.exit;
    const out = await t.read();
    await answer?.reserve(out.bytes + ANSWER_ENVELOPE_BYTES);
    const res: TerminalOutputResponse = { output: out.text(), truncated: out.truncated };
    if (exit !== undefined) res.exitStatus = exit;
    return res;
  }

  async waitForExit(p: WaitForTerminalExitRequest, signal: AbortSignal): Promise<WaitForTerminalExitResponse> {
    const t = await this.get(p.sessionId, p.terminalId);
    const aborted = new Promise<never>((_, reject) => {
      const fail = (): void => reject(RequestError.requestCancelled(undefined, "terminal/wait_for_exit withdrawn"));
      if (signal.aborted) fail();
      else signal.addEventListener("abort", fail, { once: true });
    });
    aborted.catch(() => undefined);
    return await Promise.race([t.exited, aborted]);
  }

  async kill(p: KillTerminalRequest): Promise<void> {
    const t = await this.get(p.sessionId, p.terminalId);
    await this.end(t, "killed by the agent");
  }

  async release(p: ReleaseTerminalRequest): Promise<void> {
    const t = await this.get(p.sessionId, p.terminalId);
    this.terminals.delete(p.terminalId);
    try {
      await this.end(t, "released by the agent");
      await this.forget(t);
    } finally {
      this.i.budget.returnTerminal();
    }
  }

  /** Resolves once the terminals being taken back (retake) are this session's. Never rejects. */
  async whenReady(): Promise<void> {
    await this.ready;
  }

  /** From now on terminal/create is refused (a close began); what is spawning now is ended by closeAll. */
  refuseNew(): void {
    this.closed = true;
  }

  /**
   * Ends every terminal of the session (close, the adapter's end) and
   * refuses new ones; waits for the spawns in flight (each ends what it
   * made, seeing the close) and resolves once all are gone.
   */
  async closeAll(why: string): Promise<void> {
    this.closed = true;
    await this.ready;
    const all = [...this.terminals.values()];
    this.terminals.clear();
    await Promise.all([...all.map(async (t) => this.end(t, why).then(() => this.forget(t))), ...this.spawning]);
    for (const _ of all) this.i.budget.returnTerminal();
  }

  /**
   * The terminal's whole contained run, whatever its root did: a live root's
   * tree is killed, and a root that already exited may have left processes
   * in its cgroup (a `setsid` + `env -i` child carries no marker) that end
   * through its lease too (supervisor endRun). A lease it cannot settle is
   * left closing, for the maintenance timer and the startup reap.
   */
  private async end(t: Terminal, why: string): Promise<void> {
    const fields = { sessionKey: this.i.sessionKey, terminalId: t.runId };
    const state = await this.endRun(t).catch((e: unknown) => {
      this.i.log.error?.(`ending terminal ${t.runId} failed: ${e instanceof Error ? e.message : String(e)}`, fields);
      return undefined;
    });
    await t.exited;
    if (state === "open" || state === "closing") {
      this.i.log.warn?.(
        `terminal ${t.runId} of ${JSON.stringify(this.i.sessionKey)}: its lease is still ${state} (retried by the maintenance timer)`,
        fields,
      );
    } else {
      this.i.log.info?.(`terminal ${t.runId} of ${JSON.stringify(this.i.sessionKey)} ended: ${why}`, fields);
    }
  }

  /**
   * A run of this supervisor through endRun; a re-taken one (an earlier
   * gateway's run) through a reconcile of its lease alone, never spared:
   * verified, TERM, grace, KILL, settled.
   */
  private async endRun(t: Terminal): Promise<string | undefined> {
    if (!t.retaken) return this.i.supervisor.endRun(t.runId, "manual-cancel");
    const r = await this.i.supervisor.reconcileOrphans({
      isSessionTracked: (run) => run.runId !== t.runId,
      spareDurable: false,
    });
    return r.runs.find((x) => x.runId === t.runId)?.state;
  }

  /** A released terminal's files go (durable terminals). */
  private async forget(t: Terminal): Promise<void> {
    if (t.files !== undefined) await forgetFiles(t.files);
  }

  private async get(sessionId: string, terminalId: string): Promise<Terminal> {
    await this.ready;
    this.checkSession(sessionId);
    const t = this.terminals.get(terminalId);
    if (t === undefined)
      throw RequestError.invalidParams(
        { refusal: "unknown-terminal", terminalId },
        `no terminal ${JSON.stringify(terminalId)} in this session`,
      );
    return t;
  }

  private checkSession(sessionId: string): void {
    if (sessionId !== this.i.sessionId())
      throw RequestError.invalidParams(
        { refusal: "wrong-session", sessionId },
        `the request names session ${JSON.stringify(sessionId)}, not this one`,
      );
  }
}

/**
 * The last `limit` bytes of a terminal's output. Cut from the front, then
 * forward to the next UTF-8 character start, so the text never begins with
 * half a character.
 */
export class OutputTail {
  private buf = Buffer.alloc(0);
  truncated = false;

  constructor(private readonly limit: number) {}

  /** bytes held now */
  get byteLength(): number {
    return this.buf.length;
  }

  append(chunk: string): void {
    const add = Buffer.from(chunk, "utf8");
    let next = this.buf.length === 0 ? add : Buffer.concat([this.buf, add]);
    if (next.length > this.limit) {
      const from = utf8TailStart(next, next.length - this.limit);
      // a copy: a view would keep the whole concatenation alive
      next = Buffer.from(next.subarray(from));
      this.truncated = true;
    }
    this.buf = next;
  }

  text(): string {
    return this.buf.toString("utf8");
  }
}
