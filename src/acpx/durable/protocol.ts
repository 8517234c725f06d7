/**
 * The durable wrapper's contract (docs/wrapper.md "Durable sessions"), the
 * controller's side of what native/wrapper_relay_linux.c and
 * native/wrapper_attach_linux.c do. Kept free of I/O: the option, the
 * wrapper's extra argv, the attach folder, and the frames of the socket.
 *
 * argv (native wrapper only; the four go together):
 *   --durable-ms N       the window, 1..600000
 *   --journal-bytes N    the journal's bound, 4096..2^30
 *   --attach-dir D       <stateDir>/acpx/attach (0700): the socket is D/<lease id>.sock
 *   --state-lock F       <stateDir>/gateway.lock: a peer must hold its flock
 *
 * The socket speaks frames: one type byte, a 4-byte big-endian length, the
 * payload. The controller sends "A" (`<lease id>\n<instance id>`) first, then
 * "I" (the adapter's stdin bytes) and "C" (`end`: end the tree as without
 * durability). The wrapper answers "X" (a refusal's code) and closes, or
 * "H" (the header, JSON), then "O" (the journal, then the agent's stdout),
 * "E" (stderr), "L" once (the journal is over: live from here), "R"
 * (reports, as on the lifeline).
 */
import { MAX_GRACE_MS } from "../wrapper/protocol.js";

/** The window's upper bound, as for a grace: a typo must not keep an unattended agent for days. */
export const MAX_REATTACH_WITHIN_MS = MAX_GRACE_MS;
/** What the wrapper holds of the agent's output for one turn, or while nobody is attached, unless `journalBytes` says otherwise. */
export const DEFAULT_JOURNAL_BYTES = 4 * 1024 * 1024;
export const MIN_JOURNAL_BYTES = 4096;
export const MAX_JOURNAL_BYTES = 2 ** 30;
/** the attach folder, under `<stateDir>/acpx/` */
export const ATTACH_DIR = "attach";

export interface DurableOptions {
  /** how long a session's tree keeps running, waiting for a controller to re-adopt it, once its gateway went away */
  reattachWithinMs: number;
  /** the journal's bound in bytes (default 4 MiB) */
  journalBytes?: number;
}

export interface ResolvedDurable {
  reattachWithinMs: number;
  journalBytes: number;
}

/** The `durable` option, checked: undefined when absent; a TypeError naming the field otherwise. */
export function resolveDurable(v: unknown, name = "opts.durable"): ResolvedDurable | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${name} must be an object { reattachWithinMs, journalBytes? }`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (k !== "reattachWithinMs" && k !== "journalBytes")
      throw new TypeError(`${name}.${k} is not an option (reattachWithinMs, journalBytes)`);
  const w = o.reattachWithinMs;
  if (typeof w !== "number" || !Number.isInteger(w) || w < 1 || w > MAX_REATTACH_WITHIN_MS)
    throw new TypeError(
      `${name}.reattachWithinMs must be an integer number of milliseconds from 1 to ${MAX_REATTACH_WITHIN_MS}, got ${String(w)}`,
    );
  const j = o.journalBytes ?? DEFAULT_JOURNAL_BYTES;
  if (typeof j !== "number" || !Number.isInteger(j) || j < MIN_JOURNAL_BYTES || j > MAX_JOURNAL_BYTES)
    throw new TypeError(
      `${name}.journalBytes must be an integer from ${MIN_JOURNAL_BYTES} to ${MAX_JOURNAL_BYTES}, got ${String(j)}`,
    );
  return { reattachWithinMs: w, journalBytes: j };
}

/** The wrapper's durable argv, placed before its `--`. */
export function durableArgs(d: ResolvedDurable, attachDir: string, stateLock: string): string[] {
  return [
    "--durable-ms",
    String(d.reattachWithinMs),
    "--journal-bytes",
    String(d.journalBytes),
    "--attach-dir",
    attachDir,
    "--state-lock",
    stateLock,
  ];
}

/** The socket's name in the attach folder. */
export function socketName(leaseId: string): string {
  return `${leaseId}.sock`;
}

export const FRAME = {
  auth: 0x41, // A
  stdin: 0x49, // I
  control: 0x43, // C
  refused: 0x58, // X
  header: 0x48, // H
  stdout: 0x4f, // O
  stderr: 0x45, // E
  live: 0x4c, // L
  report: 0x52, // R
} as const;
export const FRAME_HEAD = 5;

export function frame(type: number, payload: Buffer | string): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload, "utf8") : payload;
  const head = Buffer.allocUnsafe(FRAME_HEAD);
  head[0] = type;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

/** Frames from chunks, in order; a frame's payload is handed over whole. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (type: number, payload: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let at = 0;
    while (this.pending.length - at >= FRAME_HEAD) {
      const len = this.pending.readUInt32BE(at + 1);
      if (this.pending.length - at < FRAME_HEAD + len) break;
      this.onFrame(this.pending[at]!, this.pending.subarray(at + FRAME_HEAD, at + FRAME_HEAD + len));
      at += FRAME_HEAD + len;
    }
    this.pending = at === 0 ? this.pending : this.pending.subarray(at);
  }
}

/** The wrapper's header on an adoption: what it kept while nobody was attached. */
export interface AttachHeader {
  /** the turn in flight when the gateway went away: its request id, whether it ended meanwhile, the session/update lines replayed for it, and whether the journal lost some */
  turn: { id: number | string; ended: boolean; updates: number; gap: boolean } | null;
  /** the highest numeric request id the gateway side ever sent: a new connection's ids start above it */
  idFloor: number;
  /** answers to the gone gateway's other requests, dropped (nobody can take them) */
  droppedAnswers: number;
  /** what the journal held at the adoption, and whether that was its bound (the agent's stdout was held) */
  journalBytes: number;
  held: boolean;
}

/** Parses the header frame; null for anything malformed (the wrapper is verified, but its bytes are still checked). */
export function parseHeader(payload: Buffer): AttachHeader | null {
  let v: unknown;
  try {
    v = JSON.parse(payload.toString("utf8"));
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null) return null;
  const h = v as Record<string, unknown>;
  const count = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
  if (
    h.v !== 1 ||
    !count(h.idFloor) ||
    !count(h.droppedAnswers) ||
    !count(h.journalBytes) ||
    typeof h.held !== "boolean"
  )
    return null;
  let turn: AttachHeader["turn"] = null;
  if (h.turn !== null) {
    const t = h.turn as Record<string, unknown> | undefined;
    if (
      typeof t !== "object" ||
      (typeof t.id !== "string" && !count(t.id)) ||
      typeof t.ended !== "boolean" ||
      !count(t.updates) ||
      typeof t.gap !== "boolean"
    )
      return null;
    turn = { id: t.id, ended: t.ended, updates: t.updates, gap: t.gap };
  }
  return { turn, idFloor: h.idFloor, droppedAnswers: h.droppedAnswers, journalBytes: h.journalBytes, held: h.held };
}
