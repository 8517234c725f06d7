/**
 * What every `proclease` command shares: its output sinks, the parsed
 * arguments it receives from dispatch.ts, the usage error, and the few
 * formatting rules (tables, ages, colour) that must read the same in every
 * command. Nothing here loads the facts or ownership layers, so `--help`
 * stays cheap.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import type { ProcessFacts } from "../../facts/types.js";

/** Output sinks for CLI commands, so tests can capture them without spawning. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** stdout is a terminal and colour is allowed (not piped, no NO_COLOR, TERM is not "dumb"); default false */
  readonly color?: boolean;
  /** stdout is a terminal (a `--watch` redraw clears the screen only then); default false */
  readonly tty?: boolean;
  /** true once the reader of stdout went away (EPIPE): long-running commands stop early; default never */
  closed?(): boolean;
}

/** Thrown for bad flags or arguments; main() maps it to exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Exit codes, the same for the same situation in every command (README "The CLI"). */
export const EXIT = {
  ok: 0,
  /** what was named does not exist (pid, lease), the facts could not answer, or a check failed */
  failed: 1,
  usage: 2,
} as const;

/** What dispatch.ts hands a command: options already checked against its table entry. */
export interface ParsedArgs {
  readonly values: Readonly<Record<string, string | boolean | string[] | undefined>>;
  readonly positionals: readonly string[];
}

export function flag(p: ParsedArgs, name: string): boolean {
  return p.values[name] === true;
}

export function option(p: ParsedArgs, name: string): string | undefined {
  const v = p.values[name];
  return typeof v === "string" ? v : undefined;
}

export function options(p: ParsedArgs, name: string): string[] {
  const v = p.values[name];
  return Array.isArray(v) ? v : typeof v === "string" ? [v] : [];
}

/** `--state-dir`, else $PROCLEASE_STATE_DIR, else ~/.proclease (an empty --state-dir= never gets here: dispatch rejects it). */
export function resolveStateDir(p: ParsedArgs): string {
  const flagged = option(p, "state-dir");
  if (flagged !== undefined) return resolve(flagged);
  const env = process.env.PROCLEASE_STATE_DIR;
  if (env) return resolve(env);
  return join(homedir(), ".proclease");
}

/** `--grace-ms`: an integer number of milliseconds, 0..600000; undefined when absent. */
export function graceMsOption(p: ParsedArgs): number | undefined {
  const raw = option(p, "grace-ms");
  if (raw === undefined) return undefined;
  const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n > 600_000)
    throw new UsageError(
      `--grace-ms must be an integer number of milliseconds, 0 to 600000; got ${JSON.stringify(raw)}`,
    );
  return n;
}

/** One JSON object on one line: the only shape `--json` prints (NDJSON when `status --watch` repeats it). */
type FactsHead = Pick<ProcessFacts, "backend" | "identityStrength">;

/** What every --json answer begins with: the facts backend that read it, how strong its identity is, and the state dir when there is one. */
export function factsHead(facts: FactsHead): FactsHead;
export function factsHead(facts: FactsHead, stateDir: string): FactsHead & { stateDir: string };
export function factsHead(facts: FactsHead, stateDir?: string): FactsHead & { stateDir?: string } {
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    ...(stateDir !== undefined ? { stateDir } : {}),
  };
}

export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}

/**
 * Columns padded to the widest cell. A cell holding several lines (an OS
 * error, a stderr tail) continues on the next rows in its own column, so it
 * never breaks the alignment of the rows after it.
 */
export function table(rows: readonly (readonly string[])[]): string {
  if (rows.length === 0) return "";
  const split = rows.map((r) => r.map((c) => c.replace(/\r/g, "").split("\n")));
  const cols = Math.max(...split.map((r) => r.length));
  const widths = Array.from({ length: cols }, (_, i) =>
    Math.max(0, ...split.map((r) => Math.max(...(r[i] ?? [""]).map(visibleLength)))),
  );
  const out: string[] = [];
  for (const r of split) {
    const height = Math.max(...r.map((c) => c.length));
    for (let line = 0; line < height; line++) {
      const cells = r.map((c, i) => {
        const text = c[line] ?? "";
        return i === r.length - 1 ? text : text + " ".repeat(widths[i]! - visibleLength(text));
      });
      out.push(cells.join("  ").trimEnd());
    }
  }
  return out.join("\n") + "\n";
}

// Characters a terminal acts on (or that change how the rest of a line reads)
// instead of showing them: controls C0, DEL and C1 (Cc; a C1 CSI is an escape
// sequence on some terminals), format characters (Cf: bidi overrides and
// isolates, zero-width ones), lone surrogates (Cs) and line/paragraph separators.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu;
const NAMED_ESCAPES: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Text read from a process or a record (a session key, a comm, an argv, a
 * path, a reason stored in a lease), as a text printer may show it: every
 * character of UNPRINTABLE becomes a visible escape (`\x1b`, `\u202e`; `\n`,
 * `\r`, `\t` by name), so an agent that names a binary `\x1b]0;…` or a record
 * holding a CR cannot rewrite an operator's terminal or forge a row.
 * Backslashes are kept as they are, so the escape is idempotent; `--json`
 * prints the exact value.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => NAMED_ESCAPES[c] ?? codeEscape(c.codePointAt(0)!));
}

function codeEscape(cp: number): string {
  const hex = cp.toString(16);
  if (cp < 0x100) return `\\x${hex.padStart(2, "0")}`;
  return cp <= 0xffff ? `\\u${hex.padStart(4, "0")}` : `\\u{${hex}}`;
}

/**
 * printable() applied to every string in `data` (arrays and plain objects,
 * recursively): what each text printer does to the facts and records it was
 * handed, once, before it adds its own labels and colours.
 */
export function printableDeep<T>(data: T): T {
  return deep(data) as T;
}

function deep(value: unknown): unknown {
  if (typeof value === "string") return printable(value);
  if (Array.isArray(value)) return value.map(deep);
  if (typeof value !== "object" || value === null) return value;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, deep(v)]));
}

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;
export function visibleLength(s: string): number {
  return s.replace(ANSI, "").length;
}

/** `42s`, `5m07s`, `2h13m`, `3d04h`; "-" when unknown (null) or in the future by more than the clock's slack. */
export function formatAge(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "-";
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, "0")}h`;
}

export type Hue = "green" | "red" | "yellow" | "blue" | "dim" | "bold";
const SGR: Record<Hue, string> = { green: "32", red: "31", yellow: "33", blue: "34", dim: "2", bold: "1" };

/** A painter that colours only when the io says so (a TTY without NO_COLOR). */
export type Paint = (hue: Hue, text: string) => string;
export function painter(io: CliIo): Paint {
  if (io.color !== true) return (_hue, text) => text;
  return (hue, text) => `\x1b[${SGR[hue]}m${text}\x1b[0m`;
}

/** The colour a verification result reads in, everywhere. */
export function resultHue(result: string): Hue {
  if (result === "match" || result === "owned" || result === "open") return "green";
  if (result === "mismatch") return "red";
  if (result === "unknown" || result === "closing") return "yellow";
  return "dim";
}

// the doctor's rows (below the CLI) count with it too
export { plural } from "../../facts/words.js";
