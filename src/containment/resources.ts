/**
 * A lease cgroup's resources: memory.current/peak read, memory.max and
 * pids.max written. A controller that is not on v2 for the cgroup is a typed
 * answer whose why says where it is instead (controllers.ts); nothing is
 * ever half-applied.
 */
import { ContainmentArgumentError, faultOf } from "./errors.js";
import { controllerMissingWhy } from "./controllers.js";
import { exists, parseCounter, readText, writeCgroupFile } from "./files.js";
import type { LeaseCgroup } from "./handle.js";

/**
 * Why memory could not be read: gone (no such cgroup), no-controller (the
 * memory controller is not on v2 for it), malformed (an unreadable figure);
 * a lease's reading adds cgroup-replaced (another cgroup has its name) and
 * identity-unreadable.
 */
export type MemoryUnreadable = "gone" | "no-controller" | "malformed" | "cgroup-replaced" | "identity-unreadable";
export type MemoryReading =
  { ok: true; current: number; peak: number | null } | { ok: false; code: MemoryUnreadable; why: string };

/**
 * memory.current and memory.peak (bytes) of a lease cgroup. peak is null on
 * kernels before 5.19 (no memory.peak). When the memory controller is not
 * on v2 for this cgroup, the why says where it is instead.
 */
export async function readMemory(target: string | LeaseCgroup): Promise<MemoryReading> {
  const path = typeof target === "string" ? target : target.path;
  const current = await readText(`${path}/memory.current`, true);
  if (current === "gone" || current === null) {
    if (!(await exists(path))) return { ok: false, code: "gone", why: `${path} does not exist` };
    return { ok: false, code: "no-controller", why: await controllerMissingWhy(path, "memory") };
  }
  const cur = parseCounter(current);
  if (cur === null) return { ok: false, code: "malformed", why: `${path}/memory.current is malformed` };
  const peakText = await readText(`${path}/memory.peak`);
  return { ok: true, current: cur, peak: peakText === null ? null : parseCounter(peakText) };
}

export interface Limits {
  /** bytes, or "max" */
  memoryMax?: number | "max";
  /** tasks, or "max" */
  pidsMax?: number | "max";
}

export type ApplyLimitsResult = { ok: true; applied: string[] } | { ok: false; controller: string; why: string };

/**
 * Writes memory.max / pids.max. Checks every needed file first, so a missing
 * controller leaves nothing half-applied; the why names what is missing and
 * where it is instead. Throws a ContainmentArgumentError (a TypeError) only
 * for malformed limits.
 */
export async function applyLimits(target: string | LeaseCgroup, limits: Limits): Promise<ApplyLimitsResult> {
  const path = typeof target === "string" ? target : target.path;
  const writes: Array<[controller: string, file: string, value: string]> = [];
  if (limits.memoryMax !== undefined) writes.push(["memory", "memory.max", limitValue("memoryMax", limits.memoryMax)]);
  if (limits.pidsMax !== undefined) writes.push(["pids", "pids.max", limitValue("pidsMax", limits.pidsMax)]);
  for (const [controller, file] of writes) {
    if (!(await exists(`${path}/${file}`))) {
      if (!(await exists(path))) return { ok: false, controller, why: `${path} does not exist` };
      return { ok: false, controller, why: await controllerMissingWhy(path, controller) };
    }
  }
  const applied: string[] = [];
  for (const [controller, file, value] of writes) {
    try {
      await writeCgroupFile(`${path}/${file}`, value);
      applied.push(file);
    } catch (e) {
      return {
        ok: false,
        controller,
        why: `writing ${value} to ${path}/${file} failed (${faultOf(e).code})${applied.length ? `; already applied: ${applied.join(", ")}` : ""}`,
      };
    }
  }
  return { ok: true, applied };
}

/** The one rule for a limit's value: a positive safe integer, or "max" (no limit). */
export function isLimitValue(v: unknown): v is number | "max" {
  return v === "max" || (typeof v === "number" && Number.isSafeInteger(v) && v > 0);
}

function limitValue(name: string, v: number | "max"): string {
  if (!isLimitValue(v))
    throw new ContainmentArgumentError(
      "limit",
      `${name} must be a positive integer or "max", got ${JSON.stringify(v)}`,
    );
  return String(v);
}
