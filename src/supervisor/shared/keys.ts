/**
 * Named keys → terminal bytes for `send-keys` (xterm sequences, the ones a
 * PTY program expects). On a pipe the same bytes are just written.
 */

const NAMED: Readonly<Record<string, string>> = Object.freeze({
  Enter: "\r",
  Return: "\r",
  Tab: "\t",
  Escape: "\x1b",
  Esc: "\x1b",
  Backspace: "\x7f",
  Space: " ",
  Delete: "\x1b[3~",
  Insert: "\x1b[2~",
  Up: "\x1b[A",
  Down: "\x1b[B",
  Right: "\x1b[C",
  Left: "\x1b[D",
  Home: "\x1b[H",
  End: "\x1b[F",
  PageUp: "\x1b[5~",
  PageDown: "\x1b[6~",
});

export const BRACKETED_PASTE_START = "\x1b[200~";
export const BRACKETED_PASTE_END = "\x1b[201~";

/** Names accepted by `encodeKey`, besides `C-<x>`, `M-<key>` and single characters. */
export const KEY_NAMES: readonly string[] = Object.freeze(Object.keys(NAMED));

/**
 * One key token → bytes. Accepted: a name from KEY_NAMES (case-insensitive),
 * `C-<letter or @[\]^_?>` (control byte), `M-<token>` (ESC prefix), or a
 * single character (sent as is). Anything else is a TypeError: guessing
 * would send bytes the caller did not mean. Literal text goes through
 * `literal`, never through key names.
 */
export function encodeKey(token: string): string {
  if (typeof token !== "string" || token.length === 0) {
    throw new TypeError(`key must be a non-empty string, got ${JSON.stringify(token)}`);
  }
  if ([...token].length === 1) return token;
  const named = lookup(token);
  if (named !== undefined) return named;
  const m = /^([CM])-(.+)$/i.exec(token);
  if (m) {
    const [, mod, rest] = m as unknown as [string, string, string];
    if (mod.toUpperCase() === "M") return "\x1b" + encodeKey(rest);
    if (rest.length === 1) {
      const c = rest.toUpperCase();
      if (c === "?") return "\x7f";
      const code = c.charCodeAt(0);
      if (code >= 0x40 && code <= 0x5f) return String.fromCharCode(code - 0x40);
    }
  }
  throw new TypeError(
    `unknown key ${JSON.stringify(token)}; use one of ${KEY_NAMES.join(", ")}, C-<letter>, M-<key>, or send text as literal`,
  );
}

export interface KeySequence {
  keys?: readonly string[];
  /** raw ASCII bytes as hex pairs, e.g. ["1b", "5b41"]; bytes >= 0x80 are refused (text goes through `literal`) */
  hex?: readonly string[];
  /** text sent exactly as given, after keys and hex */
  literal?: string;
}

export function encodeKeySequence(seq: KeySequence): string {
  let out = "";
  for (const k of seq.keys ?? []) out += encodeKey(k);
  for (const h of seq.hex ?? []) {
    if (!/^(?:[0-7][0-9a-fA-F])+$/.test(h)) {
      throw new TypeError(`hex must be pairs of hex digits below 80, got ${JSON.stringify(h)}`);
    }
    out += Buffer.from(h, "hex").toString("latin1");
  }
  if (seq.literal !== undefined) out += seq.literal;
  return out;
}

function lookup(token: string): string | undefined {
  if (Object.hasOwn(NAMED, token)) return NAMED[token];
  const lower = token.toLowerCase();
  for (const [name, bytes] of Object.entries(NAMED)) if (name.toLowerCase() === lower) return bytes;
  return undefined;
}
