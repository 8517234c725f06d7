/**
 * The one rule for an agent's ACP session id, checked where the agent gives
 * it (the handshake's session/new, resume or load answer) and before
 * anything stores or resumes it. The id goes into the session record, every
 * later request of the session and the gateway's messages; an agent is
 * hostile input, so an id that would make the record unreadable (the record
 * store refuses files over 256 KiB), a log line forged, or a terminal
 * escape sequence printed is refused rather than stored.
 */

/** At most this many UTF-16 code units (real agents answer UUIDs, 36). */
export const MAX_ACP_SESSION_ID_LENGTH = 1024;

/**
 * Control (C0, DEL, C1), format (bidi overrides, zero-width), surrogate,
 * private-use and unassigned code points, and line/paragraph separators:
 * nothing that is not printed as itself.
 */
const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u;
const NOT_PRINTABLE_ALL = new RegExp(NOT_PRINTABLE.source, "gu");

/** The start of `value`, quoted, with every character that is not printed as itself escaped: safe in a message. */
function head(value: string): string {
  const u = (c: string) => `\\u{${c.codePointAt(0)!.toString(16)}}`;
  return JSON.stringify(value.slice(0, 32)).replace(NOT_PRINTABLE_ALL, u);
}

/** Why `value` is not an acceptable ACP session id, or null when it is. The message never holds the value raw. */
export function sessionIdProblem(value: unknown): string | null {
  if (typeof value !== "string") return `a ${value === null ? "null" : typeof value}, not a string`;
  if (value.length === 0) return "an empty string";
  if (value.length > MAX_ACP_SESSION_ID_LENGTH)
    return `${value.length} characters long, over the ${MAX_ACP_SESSION_ID_LENGTH} allowed (starting ${head(value)})`;
  const bad = NOT_PRINTABLE.exec(value);
  if (bad !== null) {
    const code = bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
    return `not printable: U+${code} at index ${bad.index} (starting ${head(value)})`;
  }
  return null;
}
