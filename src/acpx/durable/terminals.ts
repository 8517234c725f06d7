/**
 * Client terminals of a durable session (docs/lifecycle-controller.md
 * "Durable sessions"): they wait with the session, and the next controller
 * that re-adopts it takes them back.
 *
 * - Each runs under the terminal holder (native/terminal_holder_linux.c),
 *   a small C process that is the supervisor run's root: it keeps the
 *   terminal's output in `<stateDir>/acpx/terminals/<terminalId>.out`
 *   (bounded: at most twice the terminal's output limit plus one 64 KiB
 *   read of the pipe, appended before the file is cut; its tail always
 *   whole) and its exit status in `<terminalId>.status`, so neither goes
 *   with the gateway that held the pipes; and it ends the terminal's group
 *   (TERM, grace, KILL) once the session's wrapper is gone (the session
 *   closed, its window ran out, a reap ended it).
 * - `<terminalId>.json` names the session's lease: the controller that
 *   re-adopts the session finds the terminals by it, and takes only those
 *   whose own lease is this instance's, open and durable and whose tree
 *   verifies (or whose status is already written: it ended while nobody
 *   was attached). The files are the gateway's uid's, so a process of that
 *   uid could write them: they name what to look at, never what to signal;
 *   ending a re-taken terminal goes through its lease, verified.
 * - The holder runs from the package's build folder, not a sealed copy: it
 *   executes the command the agent asked for with the adapter's
 *   environment, which is what a terminal gives the agent anyway.
 */
import { readdir, readFile, unlink, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { constants, open } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { WaitForTerminalExitResponse } from "@agentclientprotocol/sdk";
import { utf8TailStart } from "../../supervisor/shared/output.js";
import { nativeAddonPath } from "../../facts/native.js";
import { ensurePrivateDir } from "../../ownership/leases/fs-safe.js";

export const TERMINALS_DIR = "terminals";
/** The terminal holder's file name, beside the addon (build/Release/). */
export const TERMINAL_HOLDER_FILE = "proclease-terminal-holder";
/** how often a terminal whose exit nobody reports (a re-taken one) is looked at */
const EXIT_POLL_MS = 100;

export interface DurableTerminals {
  /** `<stateDir>/acpx/terminals` (0700) */
  dir: string;
  holderPath: string;
  graceMs: number;
  reattachWithinMs: number;
}

/** What durable terminals need, or null where there is no holder (Linux with the package's build only). */
export async function openDurableTerminals(
  stateDir: string,
  reattachWithinMs: number,
  graceMs: number,
): Promise<DurableTerminals | null> {
  const addon = nativeAddonPath();
  if (process.platform !== "linux" || addon === null) return null;
  const holderPath = join(dirname(addon), TERMINAL_HOLDER_FILE);
  if (!existsSync(holderPath)) return null;
  const dir = join(stateDir, "acpx", TERMINALS_DIR);
  await ensurePrivateDir(dir);
  return { dir, holderPath, graceMs, reattachWithinMs };
}

export interface TerminalFiles {
  out: string;
  status: string;
  meta: string;
}

export function filesOf(dir: string, terminalId: string): TerminalFiles {
  const base = join(dir, terminalId);
  return { out: `${base}.out`, status: `${base}.status`, meta: `${base}.json` };
}

/** Whose terminal it is: the session's lease, and the output limit it was created with. */
export interface TerminalMeta {
  terminalId: string;
  sessionLeaseId: string;
  limit: number;
}

export async function writeMeta(files: TerminalFiles, meta: TerminalMeta): Promise<void> {
  // exclusive: a name made just now, never a file (or a link) put there before
  await writeFile(files.meta, JSON.stringify(meta) + "\n", { mode: 0o600, flag: "wx" });
}

/** The terminals recorded for a session's lease (undefined: every session's). Unreadable or malformed files are skipped. */
export async function terminalsOf(
  dir: string,
  sessionLeaseId: string | undefined,
  prefix: string,
): Promise<TerminalMeta[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: TerminalMeta[] = [];
  for (const n of names) {
    if (!n.endsWith(".json") || !n.startsWith(prefix)) continue;
    const m = parseMeta(await readFile(join(dir, n), "utf8").catch(() => ""));
    if (m === null || `${m.terminalId}.json` !== n) continue;
    if (sessionLeaseId === undefined || m.sessionLeaseId === sessionLeaseId) out.push(m);
  }
  return out;
}

function parseMeta(text: string): TerminalMeta | null {
  try {
    const v = JSON.parse(text) as Partial<TerminalMeta>;
    if (typeof v.terminalId !== "string" || typeof v.sessionLeaseId !== "string") return null;
    if (typeof v.limit !== "number" || !Number.isSafeInteger(v.limit) || v.limit < 0) return null;
    return { terminalId: v.terminalId, sessionLeaseId: v.sessionLeaseId, limit: v.limit };
  } catch {
    return null;
  }
}

/**
 * The files of terminals whose session nobody can re-adopt any more (its
 * lease settled, or gone), removed: the startup reap's, after the session
 * leases were reconciled. Their holders ended them with their session.
 */
export async function forgetUnawaited(
  dir: string,
  prefix: string,
  awaited: (sessionLeaseId: string) => Promise<boolean>,
): Promise<void> {
  for (const m of await terminalsOf(dir, undefined, prefix))
    if (!(await awaited(m.sessionLeaseId))) await forgetFiles(filesOf(dir, m.terminalId));
}

export async function forgetFiles(files: TerminalFiles): Promise<void> {
  await Promise.all(
    [files.out, `${files.out}.tmp`, files.status, `${files.status}.tmp`, files.meta].map((f) =>
      unlink(f).catch(() => undefined),
    ),
  );
}

/** The holder's argv around the terminal's command. */
export function holderArgv(
  dt: DurableTerminals,
  files: TerminalFiles,
  limit: number,
  session: { pid: number; startTicks: string },
  command: readonly string[],
): string[] {
  return [
    dt.holderPath,
    ...["--out", files.out, "--status", files.status, "--limit", String(limit)],
    ...["--grace-ms", String(dt.graceMs), "--session-pid", String(session.pid), "--session-start", session.startTicks],
    "--",
    ...command,
  ];
}

export interface OutputRead {
  bytes: number;
  text: () => string;
  truncated: boolean;
}

/**
 * What terminal/output answers from the holder's file: its last `limit`
 * bytes cut forward to a character start (OutputTail's rule), truncated
 * when the holder cut (the header byte) or there is more than that.
 */
export async function readOutput(file: string, limit: number): Promise<OutputRead> {
  try {
    const fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      // the header byte and the last `limit` bytes only: the file may hold twice that and a read
      const header = Buffer.alloc(1);
      const size = (await fh.stat()).size;
      if ((await fh.read(header, 0, 1, 0)).bytesRead < 1) return { bytes: 0, text: () => "", truncated: false };
      const cut = size - 1 > limit;
      const tail = Buffer.alloc(cut ? limit : size - 1);
      const got = (await fh.read(tail, 0, tail.length, size - tail.length)).bytesRead;
      // the holder cut the file's front on a character start: only a cut made here is moved forward
      const kept = tail.subarray(cut ? utf8TailStart(tail, 0) : 0, got);
      return { bytes: kept.length, text: () => kept.toString("utf8"), truncated: header[0] === 0x31 || cut };
    } finally {
      await fh.close();
    }
  } catch {
    return { bytes: 0, text: () => "", truncated: false };
  }
}

/** The status the holder wrote when the command ended, or null (not yet, or unreadable). */
export async function readStatus(file: string): Promise<WaitForTerminalExitResponse | null> {
  const text = await readFile(file, { encoding: "utf8", flag: constants.O_RDONLY | constants.O_NOFOLLOW }).catch(
    () => null,
  );
  if (text === null) return null;
  try {
    const v = JSON.parse(text) as { exitCode?: unknown; signal?: unknown };
    const exitCode = typeof v.exitCode === "number" && Number.isInteger(v.exitCode) ? v.exitCode : null;
    const signal = typeof v.signal === "string" && /^SIG[A-Z0-9]+$/.test(v.signal) ? v.signal : null;
    return { exitCode, signal };
  } catch {
    return null;
  }
}

/**
 * The terminal's exit: the holder's status once written; when the holder
 * is gone without one (killed outright), `fallback()`. Looked at every
 * EXIT_POLL_MS (unref'd) and at once when `nudge` resolves.
 */
export function watchExit(
  files: TerminalFiles,
  holderGone: () => boolean,
  fallback: () => WaitForTerminalExitResponse,
  nudge?: Promise<unknown>,
): Promise<WaitForTerminalExitResponse> {
  return new Promise((resolve) => {
    let busy = false;
    const look = async (): Promise<void> => {
      if (busy) return;
      busy = true;
      try {
        const gone = holderGone();
        const s = await readStatus(files.status);
        if (s !== null || gone) {
          clearInterval(timer);
          resolve(s ?? fallback());
        }
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => void look(), EXIT_POLL_MS);
    timer.unref();
    void nudge?.then(() => look());
  });
}
