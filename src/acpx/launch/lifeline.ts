/**
 * fd 3, the lifeline: the wrapper writes its reports there, and our end
 * staying open is what tells it we are alive. Read into reports in arrival
 * order; ending our writing half tells the wrapper we are gone while its
 * last reports still arrive.
 */
import type { ChildProcess } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { createReportReader, type WrapperReport } from "../wrapper/protocol.js";

/** fd 3: the wrapper's reports, in arrival order, and whether our end has closed. */
export interface Lifeline {
  readonly reports: WrapperReport[];
  find<T extends WrapperReport["type"]>(type: T): Extract<WrapperReport, { type: T }> | undefined;
  /** hears every later report; returns the unsubscribe */
  listen(listener: (r: WrapperReport) => void): () => void;
  readonly closed: Promise<void>;
  /** shuts down our writing half (the wrapper reads EOF; `last`, a control line, before it) and keeps reading */
  end(last?: string): void;
}

export function readLifeline(child: ChildProcess): Lifeline {
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
    find: <T extends WrapperReport["type"]>(t: T) =>
      reports.find((r) => r.type === t) as Extract<WrapperReport, { type: T }> | undefined,
    listen(l) {
      listeners.add(l);
      return () => void listeners.delete(l);
    },
    closed,
    end: (last) => {
      if (pipe && !pipe.writableEnded) pipe.end(last);
    },
  };
}
