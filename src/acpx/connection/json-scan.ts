/**
 * What one JSON line would cost, read from its bytes before JSON.parse
 * builds anything: its nesting depth and how many values it holds. A
 * bounded line can still be 12 MiB of `0,` (six million numbers, over a
 * second of JSON.parse) or a thousand-deep nest that a recursive walk later
 * overflows on; both are refused here, in one pass that stops at the first
 * bound passed.
 *
 * Strings are skipped, never counted byte by byte: a short stretch is
 * walked (escapes handled), then Buffer.indexOf jumps to the next quote,
 * so a 10 MiB file's content costs about a millisecond, and a string made
 * of escaped quotes stays linear. Brackets and commas inside strings are
 * not structure. The scan does not validate JSON (JSON.parse does that);
 * on malformed input it only says what it counted.
 *
 * Also here: the id and method of a line too large or too deep to parse,
 * read from its first bytes (peekEnvelope), so the agent's request can be
 * refused by id and the gateway's own request failed, instead of either
 * waiting forever.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COLON = 0x3a;
/** bytes walked one by one inside a string before an indexOf jump (short strings and escape runs stay cheap) */
const WALK = 64;

export type ScanVerdict = { ok: true; depth: number; values: number } | { ok: false; over: "depth" | "values" };

/**
 * The index of the quote that closes the string opened at `open`, or -1
 * when the buffer ends first.
 */
export function stringEnd(buf: Uint8Array, open: number): number {
  const n = buf.length;
  let j = open + 1;
  for (;;) {
    const stop = Math.min(n, j + WALK);
    for (; j < stop; j++) {
      const c = buf[j];
      if (c === BACKSLASH) j++;
      else if (c === QUOTE) return j;
    }
    if (j >= n) return -1;
    // j starts a fresh character (not escaped): the quote found is escaped iff an odd run of backslashes precedes it
    const q = buf.indexOf(QUOTE, j);
    if (q < 0) return -1;
    let k = q - 1;
    while (k >= j && buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q;
    j = q + 1;
  }
}

/**
 * Depth and values of one JSON text: each object and array counts two
 * values (itself and its first member), each comma one more.
 */
export function scanJson(buf: Uint8Array, maxDepth: number, maxValues: number): ScanVerdict {
  let depth = 0;
  let deepest = 0;
  let values = 0;
  const n = buf.length;
  for (let i = 0; i < n; i++) {
    const c = buf[i];
    if (c === QUOTE) {
      const end = stringEnd(buf, i);
      if (end < 0) break;
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > maxDepth) return { ok: false, over: "depth" };
      if (depth > deepest) deepest = depth;
      values += 2;
      if (values > maxValues) return { ok: false, over: "values" };
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    } else if (c === COMMA) {
      if (++values > maxValues) return { ok: false, over: "values" };
    }
  }
  return { ok: true, depth: deepest, values };
}

/** A JSON-RPC id as JSON-RPC allows it: a string, a number or null. */
export type JsonRpcId = string | number | null;

/** What the first bytes of a refused line say about it. */
export interface Envelope {
  /** present when an `"id"` member was read whole at the top level */
  id?: JsonRpcId;
  /** present when a string `"method"` member was read whole at the top level */
  method?: string;
  /** a `"method"` key was seen at the top level (a request or notification, whatever its value) */
  hasMethod: boolean;
}

/** ids and methods longer than this are not read out of a refused line */
const MAX_PEEKED_STRING = 256;

/**
 * The top-level `id` and `method` of an object whose text starts with
 * `prefix` (the rest of the line unread), as far as the prefix goes.
 */
export function peekEnvelope(prefix: Uint8Array): Envelope {
  const out: Envelope = { hasMethod: false };
  const text = Buffer.from(prefix.buffer, prefix.byteOffset, prefix.byteLength);
  let i = skipSpace(text, 0);
  if (text[i] !== OPEN_OBJECT) return out;
  i++;
  while (i < text.length) {
    i = skipSpace(text, i);
    if (text[i] !== QUOTE) return out;
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return out;
    const key = text.toString("latin1", i + 1, keyEnd);
    i = skipSpace(text, keyEnd + 1);
    if (text[i] !== COLON) return out;
    i = skipSpace(text, i + 1);
    const valueEnd = skipValue(text, i);
    if (valueEnd < 0) {
      if (key === "method") out.hasMethod = true;
      return out;
    }
    if (key === "id" || key === "method") {
      const v = smallValue(text, i, valueEnd);
      if (key === "method") {
        out.hasMethod = true;
        if (typeof v === "string") out.method = v;
      } else if (v !== undefined && (v === null || typeof v === "string" || typeof v === "number")) {
        out.id = v;
      }
    }
    i = skipSpace(text, valueEnd);
    if (text[i] !== COMMA) return out;
    i++;
  }
  return out;
}

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d)) i++;
  return i;
}

/** The end (exclusive) of the value starting at i, or -1 when the prefix ends inside it. */
function skipValue(b: Buffer, i: number): number {
  let depth = 0;
  for (let j = i; j < b.length; j++) {
    const c = b[j];
    if (c === QUOTE) {
      const end = stringEnd(b, j);
      if (end < 0) return -1;
      if (depth === 0) return end + 1;
      j = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
    else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (depth === 0) return j;
      if (--depth === 0) return j + 1;
    } else if (depth === 0 && (c === COMMA || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) return j;
  }
  return -1;
}

/** A scalar of at most MAX_PEEKED_STRING bytes, parsed; undefined otherwise. */
function smallValue(b: Buffer, from: number, to: number): unknown {
  if (to - from > MAX_PEEKED_STRING + 2 || b[from] === OPEN_OBJECT || b[from] === OPEN_ARRAY) return undefined;
  try {
    return JSON.parse(b.toString("utf8", from, to)) as unknown;
  } catch {
    return undefined;
  }
}
