/**
 * The one loader for the C++ addon (bufferutil style): `loadNative()` returns
 * the typed binding or null, never throws, and `createNativeFacts()` turns it
 * into the `native` ProcessFacts backend.
 */
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { isAbsolute } from "node:path";
import { fileURLToPath } from "node:url";
import type { NativeBinding } from "./native-binding.js";
import { DETAIL_SLOTS, REC_EXITING, REC_KERNEL_THREAD, REC_ZOMBIE_LEADER, SLOT } from "./native-binding.js";
import { nativeSnapshot } from "./native-snapshot.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessSnapshot } from "./types.js";
import { assertBatch } from "./inspect-many.js";
import { FactsReadError } from "./none.js";
import { Turns } from "./turns.js";
import { assertEnvKeys, assertPid } from "./validate.js";

const require = createRequire(import.meta.url);
// src/facts/native.ts and dist/facts/native.js both sit two levels below the
// package root, where node-gyp-build looks for build/Release and prebuilds/.
const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));

const METHODS = [
  "snapshot",
  "inspect",
  "inspectMany",
  "bootId",
  "pidNamespace",
  "signalIfSame",
  "setChildSubreaper",
  "setParentDeathSignal",
  "reapChildren",
  "sealedCopy",
  "setDumpable",
  "setMmapThreshold",
  "trimMalloc",
  "getDumpable",
  "pidfdSupported",
  "lockExclusive",
  "threadCpuTimeNs",
  "readSmallFiles",
  "replaceFile",
  "removeFile",
  "moveFile",
  "readBeneath",
  "writeBeneath",
] as const;

let cached: { binding: NativeBinding | null; error: string | null } | undefined;

function disabledByEnv(): boolean {
  return process.env.PROCLEASE_DISABLE_NATIVE === "1";
}

/**
 * The addon, or null when it is disabled (PROCLEASE_DISABLE_NATIVE=1, read on
 * every call so tests can flip it), missing, built for another ABI, or not
 * shaped like NativeBinding. The load is attempted once per process.
 */
export function loadNative(): NativeBinding | null {
  if (disabledByEnv()) return null;
  cached ??= tryLoad();
  return cached.binding;
}

/**
 * The file node-gyp-build would load (build/Release first, then prebuilds/),
 * or null when there is none. For callers that must load the same addon in
 * another process (a child running as another uid, a PID namespace).
 */
export function nativeAddonPath(): string | null {
  try {
    const gypBuild = require("node-gyp-build") as { path(dir: string): string };
    return gypBuild.path(PACKAGE_ROOT);
  } catch {
    return null;
  }
}

/** Why loadNative() returns null (for `proclease doctor`); null when it loaded. */
export function loadError(): string | null {
  if (disabledByEnv()) return "disabled by PROCLEASE_DISABLE_NATIVE=1";
  cached ??= tryLoad();
  return cached.error;
}

/**
 * The global a process this package starts may be handed the addon's path
 * under, so it loads the same file as its parent without node-gyp-build's
 * search of build/ and prebuilds/ (about 3 ms of every wrapper start on a
 * 2-core host, bench/wrapper.bench.mjs). The wrapper's generated shim sets
 * it before it requires the bundle. A global, not an environment variable:
 * nothing the wrapper starts may inherit it.
 */
export const ADDON_PATH_GLOBAL = "proclease.addonPath";

/** The handed path's module, or undefined when none was handed or it no longer loads (the package moved): then node-gyp-build searches. */
function loadHanded(): unknown {
  const handed = (globalThis as Record<symbol, unknown>)[Symbol.for(ADDON_PATH_GLOBAL)];
  if (typeof handed !== "string" || !isAbsolute(handed)) return undefined;
  try {
    return require(handed) as unknown;
  } catch {
    return undefined;
  }
}

function tryLoad(): { binding: NativeBinding | null; error: string | null } {
  try {
    const mod = loadHanded() ?? (require("node-gyp-build") as (dir: string) => unknown)(PACKAGE_ROOT);
    const shapeError = checkShape(mod);
    if (shapeError) return { binding: null, error: shapeError };
    return { binding: mod as NativeBinding, error: null };
  } catch (err) {
    return { binding: null, error: err instanceof Error ? err.message : String(err) };
  }
}

function checkShape(mod: unknown): string | null {
  if (typeof mod !== "object" || mod === null) return "addon did not export an object";
  const rec = mod as Record<string, unknown>;
  if (rec.platform !== "linux" && rec.platform !== "darwin")
    return `addon reports unknown platform ${String(rec.platform)}`;
  const missing = METHODS.filter((m) => typeof rec[m] !== "function");
  return missing.length ? `addon is missing ${missing.join(", ")} (stale build?)` : null;
}

/** The `native` backend: exact start times, the /proc walk and batches off the main thread. */
export function createNativeFacts(binding: NativeBinding): ProcessFacts {
  // Neither changes during the life of a process: read once.
  let ids: { bootId: string | null; pidNamespace: string | null } | undefined;
  const identity = () => (ids ??= { bootId: binding.bootId(), pidNamespace: binding.pidNamespace() });
  // one inspect's slots, reused: inspect is synchronous, so no two calls share it
  let slots = new Float64Array(DETAIL_SLOTS + 4);

  return {
    backend: "native",
    identityStrength: "exact",

    async snapshot(): Promise<ProcessSnapshot> {
      const takenAt = Date.now();
      return nativeSnapshot(takenAt, await binding.snapshot());
    },

    async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
      // Validate before touching the OS: bad input is an error even when no
      // such process exists.
      assertPid(pid);
      const keys = opts?.envKeys ?? NO_KEYS;
      const joined = checkedKeys(keys);
      if (slots.length < DETAIL_SLOTS + keys.length) slots = new Float64Array(DETAIL_SLOTS + keys.length);
      const text = binding.inspect(pid, joined, slots);
      if (text === null) return null;
      if (typeof text === "number") throw new FactsReadError(pid, -text);
      return decodeDetails(slots, 0, keys, text.split("\0"), { next: 0 }, identity());
    },

    async inspectMany(pids: readonly number[], opts?: InspectOptions): Promise<Array<ProcessDetails | null>> {
      const keys = opts?.envKeys ?? NO_KEYS;
      const packed = packPids(pids, keys);
      if (packed.length === 0) return [];
      const joined = checkedKeys(keys);
      const listed = opts?.listed === true;
      const parts = await Promise.all(
        splitBatch(packed).map(async (part) => ({ part, got: await binding.inspectMany(part, joined, listed) })),
      );
      const stride = DETAIL_SLOTS + keys.length;
      const host = identity();
      const out: Array<ProcessDetails | null> = [];
      // thousands of records are milliseconds of decoding: the event loop gets its turns
      const turns = new Turns();
      for (const { part, got } of parts) {
        const pieces = got.text.split("\0");
        const cursor = { next: 0 };
        for (let i = 0; i < part.length; i++) {
          // a read the host refused is a failure of the facts, not a gone pid (types.ts inspectMany)
          const found = got.slots[i * stride + SLOT.found]!;
          if (found < 0) throw new FactsReadError(part[i]!, -found);
          out.push(decodeDetails(got.slots, i * stride, keys, pieces, cursor, host));
          if (turns.due()) await turns.yield();
        }
      }
      return out;
    },
  };
}

/**
 * A batch's pids as the pool jobs that read them. Each job reads many pids
 * (one hop for all of them), and a large batch is cut into one job per core
 * (at most the pool's 4 threads), so its reads, each a few microseconds of
 * kernel time, use every core instead of one. Below SPLIT_MIN pids the
 * second hop costs more than the parallel reads save.
 */
function splitBatch(packed: Int32Array): Int32Array[] {
  const jobs = Math.min(JOBS, Math.floor(packed.length / SPLIT_MIN));
  if (jobs <= 1) return [packed];
  const size = Math.ceil(packed.length / jobs);
  const out: Int32Array[] = [];
  for (let at = 0; at < packed.length; at += size) out.push(packed.subarray(at, at + size));
  return out;
}

const SPLIT_MIN = 32;
const JOBS = Math.max(1, Math.min(4, availableParallelism()));

const NO_KEYS: readonly string[] = Object.freeze([]);

// The keys, validated, as the addon takes them: joined by NUL. Callers ask
// with the same keys call after call (MARKER_ENV_KEYS, a health check's
// list), so the last list's contents and join are kept: keys equal to them
// passed the same checks and join the same way, and a single inspect of a
// fast host is a few microseconds, of which validating and joining anew
// would be a measurable share.
let lastKeys: readonly string[] = NO_KEYS;
let lastJoined = "";
function checkedKeys(keys: readonly string[]): string {
  if (keys === lastKeys || sameKeys(keys, lastKeys)) return lastJoined;
  assertEnvKeys(keys, "opts.envKeys");
  lastKeys = [...keys];
  lastJoined = keys.join("\0");
  return lastJoined;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (!Array.isArray(a) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Validates a batch's input before anything is read (as inspect does), and packs its pids. */
function packPids(pids: readonly number[], keys: readonly string[]): Int32Array {
  assertBatch(pids, keys);
  return Int32Array.from(pids);
}

/**
 * One record of the addon's packing (native-binding.ts SLOT): its numbers at
 * slots[at…], its strings from pieces[cursor.next…], which it advances.
 * null when the process was not found.
 */
function decodeDetails(
  slots: Float64Array,
  at: number,
  keys: readonly string[],
  pieces: readonly string[],
  cursor: { next: number },
  host: { bootId: string | null; pidNamespace: string | null },
): ProcessDetails | null {
  if (slots[at + SLOT.found] !== 1) return null;
  const flags = slots[at + SLOT.flags]!;
  const exePath = slots[at + SLOT.hasExe] === 1 ? pieces[cursor.next++]! : null;
  const argc = slots[at + SLOT.argc]!;
  let argv: string[] | null = null;
  if (argc >= 0) {
    argv = pieces.slice(cursor.next, cursor.next + argc);
    cursor.next += argc;
  }
  const env: Record<string, string | null> = {};
  for (let k = 0; k < keys.length; k++)
    env[keys[k]!] = slots[at + DETAIL_SLOTS + k] === 1 ? pieces[cursor.next++]! : null;
  const details: ProcessDetails = {
    pid: slots[at + SLOT.pid]!,
    ppid: slots[at + SLOT.ppid]!,
    pgid: slots[at + SLOT.pgid]!,
    sid: slots[at + SLOT.sid]!,
    uid: slots[at + SLOT.uid]!,
    state: String.fromCharCode(slots[at + SLOT.stateCode]!),
    startTime: String(slots[at + SLOT.startTime]!),
    kernelThread: (flags & REC_KERNEL_THREAD) !== 0,
    zombieLeader: (flags & REC_ZOMBIE_LEADER) !== 0,
    exiting: (flags & REC_EXITING) !== 0,
    exePath,
    argv,
    env,
    envReadable: slots[at + SLOT.envReadable] === 1,
  };
  const realUid = slots[at + SLOT.realUid]!;
  if (realUid >= 0) details.realUid = realUid;
  if (host.bootId !== null) details.bootId = host.bootId;
  if (host.pidNamespace !== null) details.pidNamespace = host.pidNamespace;
  return details;
}
