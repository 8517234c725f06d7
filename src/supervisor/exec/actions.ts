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
import { getProcessFacts } from "../../facts/get.js";
import type { ProcessFacts } from "../../facts/types.js";
import { assertPid } from "../../facts/validate.js";
import { DEFAULT_GRACE_MS } from "../../ownership/index.js";
import { BRACKETED_PASTE_END, BRACKETED_PASTE_START, encodeKeySequence } from "../shared/keys.js";
import { DEFAULT_MAX_OUTPUT_CHARS, maxOutputOption } from "../shared/output.js";
import { adoptedExited, pinAdopted, watchAdopted } from "./adopted.js";
import { runAction } from "./dispatch.js";
import { logOf, takePending, waitForOutput } from "./poll.js";
import { startSession } from "./start.js";
import { markExited, newSession, SessionTable, stdinOf } from "./table.js";
import { terminateSession, type TerminateDeps } from "./terminate.js";
import {
  DEFAULT_ADOPTED_CHECK_MS,
  DEFAULT_FINISHED_TTL_MS,
  DEFAULT_MAX_POLL_WAIT_MS,
  type ExecSessionInfo,
  type ExecSessions,
  type ExecSessionsOptions,
  type PollResult,
} from "./types.js";

export { AdoptError, UnknownSessionError } from "./errors.js";
export {
  DEFAULT_ADOPTED_CHECK_MS,
  DEFAULT_FINISHED_TTL_MS,
  DEFAULT_LOG_LINES,
  DEFAULT_MAX_POLL_WAIT_MS,
} from "./types.js";

export function createExecSessions(opts: ExecSessionsOptions): ExecSessions {
  const { supervisor } = opts;
  const maxPoll = opts.maxPollWaitMs ?? DEFAULT_MAX_POLL_WAIT_MS;
  const table = new SessionTable(
    opts.finishedTtlMs ?? DEFAULT_FINISHED_TTL_MS,
    maxOutputOption(opts.maxOutputChars, DEFAULT_MAX_OUTPUT_CHARS, "maxOutputChars"),
  );
  let factsCache: ProcessFacts | undefined;
  const facts = (): ProcessFacts => (factsCache ??= opts.facts ?? getProcessFacts());
  const adopted = watchAdopted(table, facts, Math.max(1, opts.adoptedCheckMs ?? DEFAULT_ADOPTED_CHECK_MS));
  const deps: TerminateDeps = {
    supervisor,
    graceMs: opts.graceMs ?? DEFAULT_GRACE_MS,
    facts,
    signaller: opts.signaller,
  };

  const api: ExecSessions = {
    start: (input) => startSession(table, supervisor, input),
    async adopt({ pid, command, id }) {
      const info = await adoptProcess(table, facts, pid, command, id);
      adopted.watch();
      return info;
    },
    list: () => table.list(),
    poll: (id, o = {}) => pollSession(table, facts, id, Math.min(Math.max(0, o.timeoutMs ?? 0), maxPoll), o.signal),
    log: (id, o = {}) => logOf(table.get(id), o),
    write(id, data, o = {}) {
      const stdin = stdinOf(table.get(id));
      stdin.write(data);
      if (o.eof) stdin.end();
    },
    sendKeys(id, seq) {
      const bytes = encodeKeySequence(seq);
      stdinOf(table.get(id)).write(bytes);
    },
    submit(id, text) {
      const s = table.get(id);
      stdinOf(s).write(text + (s.pty ? "\r" : "\n"));
    },
    paste(id, text) {
      const s = table.get(id);
      stdinOf(s).write(s.pty ? `${BRACKETED_PASTE_START}${text}${BRACKETED_PASTE_END}` : text);
    },
    // a call that returns a promise rejects, never throws: an unknown id too (docs/supervisor.md)
    kill: async (id) => terminateSession(table.get(id), deps),
    clear(id) {
      const s = table.get(id);
      if (s.info.status !== "exited") throw new Error(`exec session ${id} is still running; use kill or remove`);
      table.delete(id);
    },
    async remove(id) {
      const s = table.get(id);
      // dropped first, synchronously: the session is gone for every caller
      // even while its termination (up to the grace period) is still running
      table.delete(id);
      return terminateSession(s, deps);
    },
    run: (req) => runAction(api, req),
    sweep: (now) => table.sweep(now),
  };
  return api;
}

/** Tracks the live process at `pid`, pinned to its start time read now (exec/adopted.ts). */
async function adoptProcess(
  table: SessionTable,
  facts: () => ProcessFacts,
  pid: number,
  command: string,
  id: string | undefined,
): Promise<ExecSessionInfo> {
  assertPid(pid, "pid");
  const sid = id ?? `pid-${pid}-${Date.now()}`;
  if (table.has(sid)) throw new Error(`exec session ${sid} already exists`);
  const startTime = await pinAdopted(facts(), pid);
  if (table.has(sid)) throw new Error(`exec session ${sid} already exists`);
  const s = newSession({
    id: sid,
    pid,
    startTime,
    mode: "adopted",
    command,
    status: "running",
    startedAtMs: Date.now(),
  });
  table.add(s);
  return { ...s.info };
}

/**
 * Output since the previous poll, after waiting up to `waitMs` for output or
 * the exit. An aborted `signal` rejects with its reason (before the wait, or
 * ending it); the output then stays pending for the next poll.
 */
async function pollSession(
  table: SessionTable,
  facts: () => ProcessFacts,
  id: string,
  waitMs: number,
  signal: AbortSignal | undefined,
): Promise<PollResult> {
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError("signal must be an AbortSignal");
  signal?.throwIfAborted();
  const s = table.get(id);
  if (s.info.mode === "adopted" && s.info.status === "running" && (await adoptedExited(facts(), s))) markExited(s);
  await waitForOutput(s, waitMs, signal);
  // aborted after the wait ended (or while the adopted check ran): the output stays pending
  signal?.throwIfAborted();
  return takePending(s);
}
