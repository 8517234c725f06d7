/**
 * A re-adopted wrapper, spoken to through its socket (durable/protocol.ts
 * has the frames), in the shape the controller speaks to a wrapper it
 * spawned (launch.ts SessionPipes): the adapter's stdin and stdout, its
 * stderr's tail, the wrapper's reports, and how the session ended.
 *
 * We are not the wrapper's parent, so its exit is not ours to see: the
 * socket's close is (the wrapper holds it until it exits, and writes its
 * "exit" and "cleanup" reports on it first). A close without an "exit"
 * report reads as the wrapper's exit without one (`wrapper-exited`, code
 * null).
 *
 * The replay waits for start(): the session's update router and the turn's
 * queue are in place before the first replayed line reaches the ACP client.
 */
import type { Socket } from "node:net";
import { PassThrough, Writable } from "node:stream";
import type { SessionPipes } from "../launch/launch.js";
import { keepStderr } from "../launch/stderr-ring.js";
import type { ChildExit, SessionEnd } from "../launch/wrapper-end.js";
import { createReportReader, type CleanupReport, type ExitReport, type WrapperReport } from "../wrapper/protocol.js";
import { frame, FRAME, FrameReader, parseHeader, type AttachHeader } from "./protocol.js";

export interface AttachedWrapper extends SessionPipes {
  readonly header: AttachHeader;
  /** the journal's replay flows from here on */
  start(): void;
}

export type AttachOutcome =
  | { kind: "attached"; wrapper: AttachedWrapper }
  /** the wrapper said no (its code), closed, or sent nothing usable in time */
  | { kind: "refused"; code: string };

/**
 * Sends the auth frame on a connected socket and reads the answer: the
 * wrapper's header (attached), or its refusal. The socket is the caller's
 * until attached; a refused one is destroyed here.
 */
export function attachOver(
  sock: Socket,
  wrapperPid: number,
  auth: { leaseId: string; gatewayInstanceId: string },
  timeoutMs: number,
): Promise<AttachOutcome> {
  return new Promise((resolve) => {
    const link = new Link(sock, wrapperPid);
    let done = false;
    const finish = (o: AttachOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (o.kind === "refused") sock.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({ kind: "refused", code: "no-answer" }), timeoutMs);
    link.onAnswer = (a) =>
      finish(
        a.kind === "header" ? { kind: "attached", wrapper: link.wrapper(a.header) } : { kind: "refused", code: a.code },
      );
    sock.write(frame(FRAME.auth, `${auth.leaseId}\n${auth.gatewayInstanceId}`));
  });
}

type Answer = { kind: "header"; header: AttachHeader } | { kind: "refused"; code: string };

/** The socket's frames, sorted: the answer first, then stdout (held until start), stderr and reports. */
class Link {
  onAnswer: (a: Answer) => void = () => undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly reports: WrapperReport[] = [];
  private answered = false;
  private started = false;
  private held: Buffer[] = [];
  private closed = false;
  private paused = false;
  private readonly listeners = new Set<(end: SessionEnd) => void>();
  private endedValue: SessionEnd | undefined;
  readonly exited: Promise<ChildExit>;
  private readonly reader = createReportReader((r) => this.reports.push(r));

  constructor(
    readonly sock: Socket,
    readonly pid: number,
  ) {
    const frames = new FrameReader((type, payload) => this.frame(type, payload));
    sock.on("data", (chunk: Buffer) => frames.push(chunk));
    // a reset only means the wrapper is gone; its close says so
    sock.on("error", () => undefined);
    this.stdout.on("error", () => undefined);
    this.stderr.on("error", () => undefined);
    this.exited = new Promise((resolve) =>
      sock.once("close", () => {
        this.closed = true;
        this.reader.end();
        if (!this.answered) this.answer({ kind: "refused", code: "closed" });
        this.flushHeld();
        this.stdout.end();
        this.stderr.end();
        const end = this.howEnded()!;
        this.endedValue = end;
        for (const l of this.listeners) l(end);
        this.listeners.clear();
        resolve({ code: null, signal: null });
      }),
    );
  }

  private answer(a: Answer): void {
    this.answered = true;
    this.onAnswer(a);
  }

  private frame(type: number, payload: Buffer): void {
    if (!this.answered) {
      if (type === FRAME.header) {
        const header = parseHeader(payload);
        return this.answer(header === null ? { kind: "refused", code: "bad-header" } : { kind: "header", header });
      }
      return this.answer({ kind: "refused", code: type === FRAME.refused ? codeOf(payload) : "bad-answer" });
    }
    if (type === FRAME.stdout) {
      // a copy: the frame reader's buffer is reused
      const chunk = Buffer.from(payload);
      if (!this.started) this.held.push(chunk);
      else if (!this.stdout.write(chunk) && !this.paused) {
        // the ACP client holds the adapter's stdout (a lagging turn): so does the socket, and the wrapper, and the agent
        this.paused = true;
        this.sock.pause();
        this.stdout.once("drain", () => {
          this.paused = false;
          this.sock.resume();
        });
      }
    } else if (type === FRAME.stderr) this.stderr.write(Buffer.from(payload));
    else if (type === FRAME.report) this.reader.push(payload);
  }

  private flushHeld(): void {
    if (!this.started && !this.closed) return;
    for (const c of this.held) this.stdout.write(c);
    this.held = [];
  }

  start(): void {
    this.started = true;
    this.flushHeld();
  }

  howEnded(): SessionEnd | undefined {
    const exit = this.reports.find((r): r is ExitReport => r.type === "exit");
    if (exit) return { kind: "adapter-exited", code: exit.code, signal: exit.signal };
    return this.closed ? { kind: "wrapper-exited", wrapperPid: this.pid, code: null } : undefined;
  }

  onEnd(listener: (end: SessionEnd) => void): () => void {
    if (this.endedValue !== undefined) {
      const e = this.endedValue;
      queueMicrotask(() => listener(e));
      return () => undefined;
    }
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  wrapper(header: AttachHeader): AttachedWrapper {
    const sock = this.sock;
    const stderr = keepStderr({ stderr: this.stderr });
    // our stdin: frames to the wrapper; destroying it ends nothing (endLifeline does, with "end")
    const stdin = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        if (sock.destroyed || sock.writableEnded) return cb(new Error("the wrapper's socket is closed"));
        sock.write(frame(FRAME.stdin, chunk), (err) => cb(err ?? null));
      },
    });
    stdin.on("error", () => undefined);
    const ended = this.exited.then(() => this.howEnded()!);
    return {
      header,
      pid: this.pid,
      durable: true,
      stdin,
      stdout: this.stdout,
      reports: this.reports,
      exitReport: () => this.reports.find((r): r is ExitReport => r.type === "exit"),
      cleanupReport: () => this.reports.find((r): r is CleanupReport => r.type === "cleanup"),
      exitStatus: () => (this.closed ? { code: null, signal: null } : undefined),
      exited: this.exited,
      waitExit: (ms) => waitFor(this.exited, ms),
      howEnded: () => this.howEnded(),
      ended,
      onEnd: (l) => this.onEnd(l),
      stderrTail: stderr.tail,
      stderrSettled: stderr.settled,
      start: () => this.start(),
      endLifeline() {
        if (sock.destroyed || sock.writableEnded) return;
        sock.write(frame(FRAME.control, "end"));
        sock.end();
      },
      letGo() {
        if (!sock.destroyed && !sock.writableEnded) sock.end();
      },
      unref: () => void sock.unref(),
    };
  }
}

function waitFor(p: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void p.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** A refusal's code as the wrapper sends it: a short token, never free text. */
function codeOf(payload: Buffer): string {
  const s = payload.toString("latin1");
  return /^[a-z][a-z-]{0,39}$/.test(s) ? s : "refused";
}
