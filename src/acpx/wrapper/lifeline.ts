/**
 * The wrapper's end of the lifeline (fd 3): reports go out as JSON lines;
 * the read side is there to see EOF, which means the gateway is gone
 * (event-driven, no polling), and the "end" a gateway writes before it ends
 * a session.
 */
import { fstatSync, writeSync } from "node:fs";
import { Socket } from "node:net";
import { formatReport, LIFELINE_FD, type WrapperReport } from "./protocol.js";

export interface Lifeline {
  /** Synchronous, so a report is on the wire before a following process.exit(). Never throws. */
  send(report: WrapperReport): void;
  /**
   * Starts watching the read side: `onGone` fires once, on EOF, close or
   * error. Apart from send() because building the watcher (a net.Socket,
   * about 1 ms) need not delay the "started" report: the wrapper's start
   * runs synchronously, so an EOF could not be delivered before it anyway.
   */
  watch(onGone: () => void, onData?: (chunk: Buffer) => void): void;
}

/**
 * Opens fd 3 when it is a socket or a pipe (what the controller's "pipe"
 * stdio entry gives us); returns null when it is closed or something else,
 * so a wrapper started by hand works without one.
 */
export function openLifeline(fd = LIFELINE_FD): Lifeline | null {
  let ok = false;
  try {
    const st = fstatSync(fd);
    ok = st.isSocket() || st.isFIFO();
  } catch {
    ok = false;
  }
  if (!ok) return null;

  let writable = true;
  let watching = false;
  return {
    send(report) {
      if (!writable) return;
      const buf = Buffer.from(formatReport(report));
      let off = 0;
      // Once watched, the fd is non-blocking; a report is a few dozen bytes
      // into a socket buffer of hundreds of KB, so EAGAIN means the gateway
      // stopped reading for good: drop the report rather than spin. Before
      // (the start's one report) the buffer is empty and cannot fill.
      try {
        while (off < buf.length) off += writeSync(fd, buf, off);
      } catch {
        writable = false;
      }
    },
    watch(onGone, onData) {
      if (watching) return;
      watching = true;
      let gone = false;
      const fire = (): void => {
        if (gone) return;
        gone = true;
        onGone();
      };
      // A gateway that half-closes its end (a graceful "I am going") must
      // still get the cleanup report written after that EOF. So the Socket
      // keeps its write side open (never used: reports go through
      // writeSync) and allows a half-open state; a read-only Socket would be
      // auto-destroyed at EOF, closing fd 3 under our feet.
      const reader = new Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
      reader.on("data", (chunk: Buffer) => onData?.(chunk));
      reader.on("end", fire);
      reader.on("close", fire);
      reader.on("error", fire);
      // the adapter's exit handle keeps the loop alive; the lifeline must not
      reader.unref();
    },
  };
}
