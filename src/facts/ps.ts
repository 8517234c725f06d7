/**
 * The portable fallback: parsed `ps` output, for macOS and the BSDs when the
 * addon is missing. What ps can and cannot tell, and what this backend does
 * about it:
 *
 * - start time: `lstart` (C locale, TZ=UTC) has one-second resolution, so two
 *   processes started in the same second on a reused pid look the same:
 *   identityStrength "coarse".
 * - session id: procps and FreeBSD accept `sid`; macOS ps has no session-id
 *   keyword at all (its `sess` is a kernel pointer, not the sid). On macOS
 *   `sid` is reported as -1 ("unknown"), which never equals a real sid.
 * - exePath: null. ps only has `comm`/`args`, which the process itself can
 *   rewrite; a guessed path would let a process impersonate another.
 * - argv: null. `args` is the argv joined with spaces, so "a b" and "a","b"
 *   look the same; splitting it would invent an argv. It is never split.
 * - env: every requested key is null and envReadable is false: ps cannot read
 *   another process's environment portably. "Unknown" makes verification
 *   fail closed rather than treat the key as absent.
 *
 * Every column is requested with its own `-o key=`: on BSD ps a "=" swallows
 * the rest of its argument, so `-o pid=,ppid=` would be one column there.
 */
import { execFile } from "node:child_process";
import { inspectEach } from "./inspect-many.js";
import { buildSnapshot } from "./snapshot.js";
import { assertEnvKeys, assertPid } from "./validate.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "./types.js";

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};
const DAYS = new Set(["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]);

/**
 * lstart tokens ("Mon", "Nov", "30", "04:24:50", "2026"), printed in UTC,
 * → epoch seconds as a decimal string. null when any piece is off.
 */
export function parseLstart(tokens: readonly string[]): string | null {
  if (tokens.length !== 5) return null;
  const [dow, mon, day, hms, year] = tokens as [string, string, string, string, string];
  const m = MONTHS[mon];
  if (!DAYS.has(dow) || m === undefined) return null;
  if (!/^\d{1,2}$/.test(day) || !/^\d{4}$/.test(year)) return null;
  const t = /^(\d{2}):(\d{2}):(\d{2})$/.exec(hms);
  if (t === null) return null;
  const ms = Date.UTC(Number(year), m, Number(day), Number(t[1]), Number(t[2]), Number(t[3]));
  const d = new Date(ms);
  // reject "Feb 31" and friends instead of letting Date roll them over
  if (d.getUTCDate() !== Number(day) || d.getUTCMonth() !== m) return null;
  return String(ms / 1000);
}

const INT_RE = /^-?\d+$/;

/** The columns asked for, in order; lstart is last because it spans five tokens. */
export function psColumns(platform: NodeJS.Platform): string[] {
  const cols = ["pid", "ppid", "pgid"];
  if (platform !== "darwin") cols.push("sid");
  cols.push("uid", "stat", "lstart");
  return cols;
}

/**
 * One line of `ps -o pid= -o ppid= -o pgid= [-o sid=] -o uid= -o stat= -o lstart=`.
 * null for anything that does not have exactly that shape.
 *
 * On Linux (`linux`), ps knows two more things: kernel threads are kthreadd
 * (pid 2) and its children, and procps adds "l" to the stat of a
 * multi-threaded process, so "Z…l" is a zombie leader whose threads still
 * run. Elsewhere both are false.
 */
export function parsePsLine(line: string, hasSid: boolean, linux = false): ProcessInfo | null {
  const tok = line.trim().split(/\s+/);
  const nInts = hasSid ? 5 : 4;
  if (tok.length !== nInts + 1 + 5) return null;
  const ints = tok.slice(0, nInts);
  if (!ints.every((t) => INT_RE.test(t))) return null;
  const n = ints.map(Number) as number[];
  const stat = tok[nInts]!;
  if (!/^[A-Za-z]/.test(stat)) return null;
  const startTime = parseLstart(tok.slice(nInts + 1));
  if (startTime === null) return null;
  const [pid, ppid, pgid] = n as [number, number, number];
  const sid = hasSid ? n[3]! : -1;
  const uid = n[nInts - 1]!;
  if (pid < 1) return null;
  const state = stat[0]!;
  return {
    pid,
    ppid,
    pgid,
    sid,
    uid,
    state,
    startTime,
    kernelThread: linux && (pid === 2 || ppid === 2),
    zombieLeader: linux && state === "Z" && stat.includes("l", 1),
  };
}

/**
 * Every row of a ps run. A line that is neither blank, nor pid 0 (macOS lists
 * kernel_task), nor a well-formed row throws: a table we could only partly
 * read must not look like "those processes are gone" to a caller deciding
 * whether a lease's root is still alive.
 */
export function parsePsOutput(stdout: string, hasSid: boolean, linux = false): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const line of stdout.split("\n")) {
    const t = line.trim();
    if (t === "" || /^0\s/.test(t)) continue;
    const p = parsePsLine(line, hasSid, linux);
    if (p === null) throw new Error(`ps printed a line that could not be parsed: ${JSON.stringify(t.slice(0, 120))}`);
    // a dead ("X") task is on its way out of the table: gone, like in every backend
    if (p.state === "X" || p.state === "x") continue;
    out.push(p);
  }
  return out;
}

interface PsResult {
  code: number;
  stdout: string;
  stderr: string;
}

function runPs(args: string[], bin: string): Promise<PsResult> {
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      args,
      { env: { ...process.env, LC_ALL: "C", TZ: "UTC" }, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ code: 0, stdout, stderr });
        const code = (err as { code?: unknown }).code;
        if (typeof code === "number") return resolve({ code, stdout, stderr });
        reject(err); // spawn failure (ENOENT …) or killed: not an answer
      },
    );
  });
}

export interface PsOptions {
  /** the ps binary; default "ps" from PATH */
  bin?: string;
  platform?: NodeJS.Platform;
}

export function createPsFacts(opts: PsOptions = {}): ProcessFacts {
  const bin = opts.bin ?? "ps";
  const platform = opts.platform ?? process.platform;
  const cols = psColumns(platform);
  const hasSid = cols.includes("sid");
  const linux = platform === "linux";
  const colArgs = cols.flatMap((c) => ["-o", `${c}=`]);

  async function snapshot(): Promise<ProcessSnapshot> {
    const takenAt = Date.now();
    const r = await runPs(["-A", ...colArgs], bin);
    if (r.code !== 0) throw new Error(`ps exited with ${r.code}: ${r.stderr.trim()}`);
    const rows = parsePsOutput(r.stdout, hasSid, linux);
    // ps -A always lists at least itself: an empty table is a failure, not a fact
    if (rows.length === 0) throw new Error("ps listed no processes");
    return buildSnapshot(takenAt, rows);
  }

  async function inspect(pid: number, o?: InspectOptions): Promise<ProcessDetails | null> {
    assertPid(pid);
    const envKeys = o?.envKeys ?? [];
    assertEnvKeys(envKeys, "opts.envKeys");
    const r = await runPs(["-p", String(pid), ...colArgs], bin);
    // ps exits 1 with no rows when the pid does not exist; any other empty
    // answer (exit 0 without the row, another code) is not evidence of absence
    const rows = parsePsOutput(r.stdout, hasSid, linux).filter((p) => p.pid === pid);
    if (rows.length === 0) {
      if (r.code === 1) return null;
      throw new Error(`ps -p ${pid} exited with ${r.code} and no row for it: ${r.stderr.trim()}`);
    }
    const env: Record<string, string | null> = {};
    for (const k of envKeys) env[k] = null;
    return { ...rows[0]!, exePath: null, argv: null, env, envReadable: false };
  }

  // a few ps runs at a time: each one is a fork and exec
  const inspectMany = (pids: readonly number[], o?: InspectOptions) => inspectEach(inspect, pids, o, 4);
  return { backend: "ps", identityStrength: "coarse", snapshot, inspect, inspectMany };
}
