/**
 * The one loader for the C++ addon (bufferutil style): `loadNative()` returns
 * the typed binding or null, never throws, and `createNativeFacts()` turns it
 * into the `native` ProcessFacts backend.
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { NativeBinding } from "./native-binding.js";
import { DETAILS_ENV, INT_FIELDS, REC_EXITING, REC_KERNEL_THREAD, REC_ZOMBIE_LEADER } from "./native-binding.js";
import { buildSnapshot, callerNeedsStatusUid } from "./snapshot.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "./types.js";
import { assertEnvKeys, assertPid } from "./validate.js";

const require = createRequire(import.meta.url);
// src/facts/native.ts and dist/facts/native.js both sit two levels below the
// package root, where node-gyp-build looks for build/Release and prebuilds/.
const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));

const METHODS = [
  "snapshot",
  "inspect",
  "bootId",
  "pidNamespace",
  "signalIfSame",
  "setChildSubreaper",
  "setParentDeathSignal",
  "reapChildren",
  "pidfdSupported",
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

function tryLoad(): { binding: NativeBinding | null; error: string | null } {
  try {
    const gypBuild = require("node-gyp-build") as (dir: string) => unknown;
    const mod = gypBuild(PACKAGE_ROOT);
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
  if (rec.platform !== "linux" && rec.platform !== "darwin") return `addon reports unknown platform ${String(rec.platform)}`;
  const missing = METHODS.filter((m) => typeof rec[m] !== "function");
  return missing.length ? `addon is missing ${missing.join(", ")} (stale build?)` : null;
}

export interface NativeFactsOptions {
  /**
   * Linux: re-read the uid of root-owned /proc/PID/stat entries from status
   * (see callerNeedsStatusUid in snapshot.ts). Default: whether this process is not root.
   * Tests and the bench force it to measure or check the non-root path as root.
   */
  uidFromStatus?: boolean;
}

/** The `native` backend: exact start times, the /proc walk off the main thread. */
export function createNativeFacts(binding: NativeBinding, opts: NativeFactsOptions = {}): ProcessFacts {
  // Neither changes during the life of a process: read once.
  let ids: { bootId: string | null; pidNamespace: string | null } | undefined;
  const identity = () => (ids ??= { bootId: binding.bootId(), pidNamespace: binding.pidNamespace() });
  // the last walk's records, reused when a process has not changed
  let previous: ReadonlyMap<number, ProcessInfo> = new Map();

  return {
    backend: "native",
    identityStrength: "exact",

    async snapshot(): Promise<ProcessSnapshot> {
      const takenAt = Date.now();
      const { count, ints, starts } = await binding.snapshot(opts.uidFromStatus ?? callerNeedsStatusUid());
      const infos: ProcessInfo[] = new Array<ProcessInfo>(count);
      for (let i = 0, o = 0; i < count; i++, o += INT_FIELDS) {
        const pid = ints[o]!;
        const start = starts[i]!;
        const flags = ints[o + 6]!;
        const old = previous.get(pid);
        // Most processes are unchanged between walks: handing out the same
        // (frozen) object keeps the young generation small, which is what
        // keeps GC pauses off the event loop with thousands of processes.
        const info =
          old !== undefined &&
          old.ppid === ints[o + 1] &&
          old.pgid === ints[o + 2] &&
          old.sid === ints[o + 3] &&
          old.uid === ints[o + 4] &&
          old.state.charCodeAt(0) === ints[o + 5] &&
          old.zombieLeader === ((flags & REC_ZOMBIE_LEADER) !== 0) &&
          old.kernelThread === ((flags & REC_KERNEL_THREAD) !== 0) &&
          old.exiting === ((flags & REC_EXITING) !== 0) &&
          Number(old.startTime) === start
            ? old
            : Object.freeze({
                pid,
                ppid: ints[o + 1]!,
                pgid: ints[o + 2]!,
                sid: ints[o + 3]!,
                uid: ints[o + 4]!,
                state: String.fromCharCode(ints[o + 5]!),
                startTime: String(start),
                kernelThread: (flags & REC_KERNEL_THREAD) !== 0,
                zombieLeader: (flags & REC_ZOMBIE_LEADER) !== 0,
                exiting: (flags & REC_EXITING) !== 0,
              });
        infos[i] = info;
      }
      const snap = buildSnapshot(takenAt, infos);
      previous = snap.processes;
      return snap;
    },

    async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
      // Validate before touching the OS: bad input is an error even when no
      // such process exists.
      assertPid(pid);
      const envKeys = opts?.envKeys;
      assertEnvKeys(envKeys, "opts.envKeys");
      const keys = envKeys ? [...envKeys] : [];
      const d = binding.inspect(pid, keys);
      if (d === null) return null;
      const env: Record<string, string | null> = {};
      for (let i = 0; i < keys.length; i++) env[keys[i]!] = (d[DETAILS_ENV + i] as string | null | undefined) ?? null;
      const flags = d[7];
      const details: ProcessDetails = {
        pid: d[0],
        ppid: d[1],
        pgid: d[2],
        sid: d[3],
        uid: d[4],
        state: String.fromCharCode(d[6]),
        startTime: String(d[8]),
        kernelThread: (flags & REC_KERNEL_THREAD) !== 0,
        zombieLeader: (flags & REC_ZOMBIE_LEADER) !== 0,
        exiting: (flags & REC_EXITING) !== 0,
        exePath: d[9],
        argv: d[10],
        env,
        envReadable: d[11],
      };
      if (d[5] >= 0) details.realUid = d[5];
      const { bootId, pidNamespace } = identity();
      if (bootId !== null) details.bootId = bootId;
      if (pidNamespace !== null) details.pidNamespace = pidNamespace;
      return details;
    },
  };
}
