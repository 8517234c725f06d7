/**
 * The exec sessions a process tool knows: each one's info, its output (the
 * capped log and what arrived since the last poll), and the polls waiting
 * for it. Finished sessions are forgotten once older than the TTL, looked at
 * whenever a session is asked for.
 */
import type { ManagedRun, ManagedRunStdin, RunExit } from "../shared/types.js";
import { capTail, tailStart } from "../shared/output.js";
import { UnknownSessionError } from "./errors.js";
import type { ExecSessionInfo } from "./types.js";

export interface Session {
  info: ExecSessionInfo;
  run?: ManagedRun;
  stdin?: ManagedRunStdin;
  pty: boolean;
  /** the log: the last `cap` characters */
  output: string;
  /** characters cut from the front of the log */
  dropped: number;
  /** what arrived since the previous poll (capped too) */
  pending: string;
  /** a supervised session's exit, once it is tracked */
  exitPromise?: Promise<RunExit>;
  waiters: Set<() => void>;
}

export function newSession(
  info: ExecSessionInfo,
  parts: Pick<Session, "run" | "stdin" | "pty"> = { pty: false },
): Session {
  return { info, ...parts, output: "", dropped: 0, pending: "", waiters: new Set() };
}

export class SessionTable {
  private readonly sessions = new Map<string, Session>();

  constructor(
    private readonly ttlMs: number,
    /** characters of output kept per session */
    private readonly cap: number,
  ) {}

  /** Drops finished sessions older than the TTL; returns how many went. */
  sweep(now = Date.now()): number {
    let n = 0;
    for (const [id, s] of this.sessions) {
      if (s.info.status === "exited" && s.info.exitedAtMs !== undefined && now - s.info.exitedAtMs >= this.ttlMs) {
        this.sessions.delete(id);
        n++;
      }
    }
    return n;
  }

  /** The session, after a sweep; UnknownSessionError when there is none. */
  get(id: string): Session {
    this.sweep();
    const s = this.sessions.get(id);
    if (!s) throw new UnknownSessionError(id);
    return s;
  }

  has(id: string): boolean {
    return this.sessions.has(id);
  }

  add(s: Session): void {
    this.sessions.set(s.info.id, s);
  }

  delete(id: string): void {
    this.sessions.delete(id);
  }

  /** Copies of every session's info, after a sweep. */
  list(): ExecSessionInfo[] {
    this.sweep();
    return [...this.sessions.values()].map((s) => ({ ...s.info }));
  }

  /** Adopted sessions still running (the adopted watch checks these). */
  adoptedRunning(): Session[] {
    return [...this.sessions.values()].filter((x) => x.info.mode === "adopted" && x.info.status === "running");
  }

  append(s: Session, chunk: string): void {
    s.output += chunk;
    s.pending += chunk;
    if (s.output.length > this.cap) {
      const at = tailStart(s.output, s.output.length - this.cap);
      s.dropped += at;
      s.output = s.output.slice(at);
    }
    s.pending = capTail(s.pending, this.cap);
    wake(s);
  }
}

/** The session ended (once): its exit is kept and every waiting poll wakes. */
export function markExited(s: Session, exit?: RunExit): void {
  if (s.info.status === "exited") return;
  s.info.status = "exited";
  s.info.exitedAtMs = Date.now();
  if (exit) s.info.exit = exit;
  wake(s);
}

/** The session's stdin while it runs and its stdin is open; else an Error naming the session. */
export function stdinOf(s: Session): ManagedRunStdin {
  if (s.info.status === "exited") throw new Error(`exec session ${s.info.id} has exited`);
  if (!s.stdin || s.stdin.destroyed) throw new Error(`exec session ${s.info.id} has no open stdin`);
  return s.stdin;
}

function wake(s: Session): void {
  for (const w of s.waiters) w();
  s.waiters.clear();
}
