/**
 * Command identity. A lease stores the hash of the root's argv exactly as
 * spawned (the JSON of the array), never of a shell-quoted string: quoting is
 * not canonical ("a b" vs 'a b' vs a\ b), an argv is.
 */
import * as crypto from "node:crypto";

// the one-shot crypto.hash (Node >= 20.12, 21.7) skips a Hash object per call
const sha256Hex: (data: string) => string =
  typeof crypto.hash === "function"
    ? (data) => crypto.hash("sha256", data, "hex")
    : (data) => crypto.createHash("sha256").update(data).digest("hex");

/**
 * sha256 (hex) of JSON.stringify(argv). `argv` is the full argv of the root
 * as the kernel will report it: argv[0] included. With Node's spawn(file, args)
 * that is [file, ...args] (unless `argv0` is given), e.g.
 * [process.execPath, wrapperPath, ...wrapperArgs]. The wrapper must not set
 * process.title, which rewrites the live argv.
 */
export function computeCommandHash(argv: readonly string[]): string {
  if (!Array.isArray(argv) || argv.length === 0) {
    throw new TypeError("argv must be a non-empty array of strings");
  }
  argv.forEach((a: unknown, i) => {
    if (typeof a !== "string") throw new TypeError(`argv[${i}] must be a string, got ${typeof a}`);
  });
  return sha256Hex(JSON.stringify(argv));
}

/**
 * Splits a POSIX-shell-quoted command line into words, for legacy records
 * that stored a string. Handles whitespace, single quotes, double quotes
 * (with \\ \" \$ \` and backslash-newline escapes) and backslashes outside
 * quotes. Returns null for what it cannot tokenise faithfully: an unterminated
 * quote, a trailing backslash, or shell syntax that is not a plain word list
 * (expansions, operators, $'…'). Callers treat null as "unknown", never as a
 * match.
 */
export function tokenizeShellCommand(command: string): string[] | null {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  let i = 0;
  const n = command.length;
  while (i < n) {
    const c = command[i]!;
    if (c === " " || c === "\t" || c === "\n") {
      if (inWord) words.push(cur);
      cur = "";
      inWord = false;
      i++;
      continue;
    }
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      if (end === -1) return null;
      cur += command.slice(i + 1, end);
      inWord = true;
      i = end + 1;
      continue;
    }
    if (c === '"') {
      i++;
      let closed = false;
      while (i < n) {
        const d = command[i]!;
        if (d === '"') {
          closed = true;
          i++;
          break;
        }
        if (d === "\\" && i + 1 < n) {
          const e = command[i + 1]!;
          if (e === "\n") {
            i += 2;
            continue;
          }
          if (e === "\\" || e === '"' || e === "$" || e === "`") {
            cur += e;
            i += 2;
            continue;
          }
        }
        if (d === "$" || d === "`") return null; // expansion: not a literal word
        cur += d;
        i++;
      }
      if (!closed) return null;
      inWord = true;
      continue;
    }
    if (c === "\\") {
      if (i + 1 >= n) return null;
      const e = command[i + 1]!;
      if (e !== "\n") {
        cur += e;
        inWord = true;
      }
      i += 2;
      continue;
    }
    // unquoted shell syntax: the string is not a plain word list
    if ("$`|&;<>()*?[{".includes(c)) return null;
    if (!inWord && (c === "#" || c === "~")) return null;
    cur += c;
    inWord = true;
    i++;
  }
  if (inWord) words.push(cur);
  return words;
}
