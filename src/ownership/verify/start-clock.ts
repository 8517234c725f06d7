/**
 * The one place that turns a ProcessInfo.startTime into wall-clock epoch ms,
 * so a process's start can be compared with a lease's `startedAt`
 * (Date.now() when the lease was written).
 *
 * Units per backend (see facts/types.ts):
 * - Linux native / procfs: clock ticks since boot. epoch = btime + ticks / CLK_TCK.
 *   btime (/proc/stat) is whole seconds and moves when the wall clock is
 *   stepped, so the result can be up to ~1 s early or late: callers compare
 *   with START_CLOCK_SLACK_MS of tolerance.
 * - macOS native: microseconds since the epoch.
 * - ps: `lstart` seconds since the epoch (one-second resolution).
 * - none: nothing.
 * null whenever the conversion cannot be made; never a guess.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { endianness } from "node:os";
import type { FactsBackend } from "../../facts/types.js";

/** What a Linux tick start time needs to become epoch ms. */
export interface StartClock {
  /** the host's boot time, epoch ms (btime × 1000) */
  bootTimeMs: number;
  /** USER_HZ, the unit of /proc/PID/stat field 22 */
  ticksPerSecond: number;
}

/** Tolerance for a converted Linux start time: btime is whole seconds, plus clock steps and tick rounding. */
export const START_CLOCK_SLACK_MS = 2000;

const DECIMAL = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;

/**
 * epoch ms of `startTime` as reported by `backend`, or null when it cannot be
 * computed. `clock` is needed only for Linux ticks (native on Linux, procfs);
 * pass the result of readStartClock().
 */
export function startTimeToEpochMs(
  startTime: string,
  backend: FactsBackend,
  clock: StartClock | null | undefined,
  platform: NodeJS.Platform = process.platform,
): number | null {
  if (typeof startTime !== "string" || !DECIMAL.test(startTime)) return null;
  const n = Number(startTime);
  if (!Number.isFinite(n)) return null;
  switch (backend) {
    case "ps":
      return n * 1000;
    case "native":
      if (platform === "darwin") return n / 1000;
      if (platform !== "linux") return null;
      return ticksToEpochMs(n, clock);
    case "procfs":
      return ticksToEpochMs(n, clock);
    default:
      return null;
  }
}

function ticksToEpochMs(ticks: number, clock: StartClock | null | undefined): number | null {
  if (!clock || !validClock(clock)) return null;
  return clock.bootTimeMs + (ticks * 1000) / clock.ticksPerSecond;
}

function validClock(c: StartClock): boolean {
  return Number.isFinite(c.bootTimeMs) && c.bootTimeMs > 0 && Number.isFinite(c.ticksPerSecond) && c.ticksPerSecond > 0;
}

let ticksPerSecond: Promise<number | null> | undefined;

/**
 * btime is re-read on every call (it follows wall-clock steps, so a cached
 * one goes stale); CLK_TCK is fixed for the life of the process and cached.
 * null off Linux or when either cannot be learned.
 */
export async function readStartClock(procRoot = "/proc"): Promise<StartClock | null> {
  if (process.platform !== "linux") return null;
  const [bootTimeMs, tps] = await Promise.all([readBtimeMs(procRoot), (ticksPerSecond ??= readTicksPerSecond())]);
  if (bootTimeMs === null || tps === null) return null;
  return { bootTimeMs, ticksPerSecond: tps };
}

/** The `btime` line of /proc/stat text, as epoch ms; null when absent or malformed. */
export function parseBtimeMs(stat: string): number | null {
  const m = /^btime ([0-9]+)$/m.exec(stat);
  if (!m) return null;
  const s = Number(m[1]);
  return Number.isSafeInteger(s) && s > 0 ? s * 1000 : null;
}

async function readBtimeMs(procRoot: string): Promise<number | null> {
  try {
    return parseBtimeMs(await readFile(`${procRoot}/stat`, "utf8"));
  } catch {
    return null;
  }
}

/**
 * Node has no sysconf(). The kernel hands every process CLK_TCK in its aux
 * vector (AT_CLKTCK, what sysconf reads), so /proc/self/auxv answers without
 * a child process: a startup reap needs the clock first thing, and spawning
 * `getconf CLK_TCK` there cost about 20 ms of its critical path. getconf is
 * the fallback. If both fail, USER_HZ is part of the kernel ABI and is 100 on
 * every architecture Node runs on (only alpha and ia64 differed), so 100 is a
 * fact there, not a guess.
 */
async function readTicksPerSecond(): Promise<number | null> {
  try {
    const n = parseAuxvClockTicks(await readFile("/proc/self/auxv"), WORD_BYTES[process.arch] ?? 0, endianness());
    if (n !== null) return n;
  } catch {
    // no /proc/self/auxv (hidepid, a sandbox): ask getconf
  }
  return new Promise((resolve) => {
    execFile("getconf", ["CLK_TCK"], { timeout: 5000, encoding: "utf8" }, (err, stdout) => {
      const n = err ? NaN : Number(String(stdout).trim());
      if (Number.isInteger(n) && n > 0) return resolve(n);
      resolve(USER_HZ_100_ARCHES.has(process.arch) ? 100 : null);
    });
  });
}

const AT_NULL = 0;
const AT_CLKTCK = 17;
/** the aux vector's word size: the architecture's unsigned long */
const WORD_BYTES: Readonly<Record<string, number>> = {
  x64: 8,
  arm64: 8,
  ppc64: 8,
  s390x: 8,
  riscv64: 8,
  loong64: 8,
  mips64el: 8,
  ia32: 4,
  arm: 4,
  mips: 4,
  mipsel: 4,
  ppc: 4,
  s390: 4,
};

/**
 * AT_CLKTCK from an aux vector (pairs of native words: type, value; AT_NULL
 * ends it); null when the word size is unknown, the entry is missing or its
 * value is not a plausible tick rate.
 */
export function parseAuxvClockTicks(auxv: Uint8Array, wordBytes: number, order: "LE" | "BE"): number | null {
  if (wordBytes !== 4 && wordBytes !== 8) return null;
  const view = new DataView(auxv.buffer, auxv.byteOffset, auxv.byteLength);
  const word = (at: number): number => {
    if (wordBytes === 4) return view.getUint32(at, order === "LE");
    const v = view.getBigUint64(at, order === "LE");
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? -1 : Number(v);
  };
  for (let at = 0; at + 2 * wordBytes <= auxv.byteLength; at += 2 * wordBytes) {
    const type = word(at);
    if (type === AT_NULL) return null;
    if (type !== AT_CLKTCK) continue;
    const v = word(at + wordBytes);
    return Number.isInteger(v) && v > 0 && v <= 1_000_000 ? v : null;
  }
  return null;
}

const USER_HZ_100_ARCHES = new Set<string>([
  "x64",
  "ia32",
  "arm",
  "arm64",
  "ppc64",
  "s390x",
  "riscv64",
  "loong64",
  "mips",
  "mipsel",
  "s390",
  "ppc",
]);
