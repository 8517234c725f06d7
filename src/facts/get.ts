/**
 * Picks the facts backend (docs/process-facts.md). An explicit choice wins, then
 * PROCLEASE_BACKEND, then the best this host offers: native → procfs (Linux)
 * → ps (where a ps binary exists) → none. Instances are cached per backend:
 * they hold no per-call state, and procfs/native cache the boot id.
 */
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { createNativeFacts, loadError, loadNative } from "./native.js";
import { createNoneFacts } from "./none.js";
import { createProcfsFacts } from "./procfs.js";
import { createPsFacts } from "./ps.js";
import type { FactsBackend, ProcessFacts } from "./types.js";

const BACKENDS: readonly FactsBackend[] = ["native", "procfs", "ps", "none"];
const cache = new Map<FactsBackend, ProcessFacts>();

export function isFactsBackend(v: unknown): v is FactsBackend {
  return typeof v === "string" && (BACKENDS as readonly string[]).includes(v);
}

export function getProcessFacts(opts?: { backend?: "auto" | FactsBackend }): ProcessFacts {
  const requested = opts?.backend ?? "auto";
  if (requested !== "auto" && !isFactsBackend(requested)) {
    throw new TypeError(`backend must be one of auto, ${BACKENDS.join(", ")}; got ${JSON.stringify(requested)}`);
  }
  const backend = requested === "auto" ? (envBackend() ?? autoBackend()) : requested;
  const hit = cache.get(backend);
  // native is re-checked on every call: PROCLEASE_DISABLE_NATIVE may have been set since
  if (hit && (backend !== "native" || loadNative() !== null)) return hit;
  const facts = create(backend);
  cache.set(backend, facts);
  return facts;
}

/** Why `auto` picks its backend: PROCLEASE_BACKEND, the addon loaded, or the addon unavailable (the fallback order decides the rest). */
export type BackendChoiceCode = "env" | "native-loaded" | "native-unavailable";

/** Which backend `auto` would pick, and why (`code` for code, `reason` for people). */
export function describeBackendChoice(): { backend: FactsBackend; code: BackendChoiceCode; reason: string } {
  const env = envBackend();
  if (env !== undefined) return { backend: env, code: "env", reason: `PROCLEASE_BACKEND=${env}` };
  const backend = autoBackend();
  if (backend === "native") return { backend, code: "native-loaded", reason: "native addon loaded" };
  const why = `native addon unavailable: ${loadError() ?? `not supported on ${process.platform}`}`;
  const code = "native-unavailable";
  if (backend === "procfs") return { backend, code, reason: why };
  if (backend === "ps") return { backend, code, reason: `${why}; no /proc walker on ${process.platform}` };
  return { backend, code, reason: `${why}; no /proc and no ps binary` };
}

function envBackend(): FactsBackend | undefined {
  const raw = process.env.PROCLEASE_BACKEND;
  if (raw === undefined || raw === "") return undefined;
  if (!isFactsBackend(raw)) {
    throw new TypeError(`PROCLEASE_BACKEND must be one of ${BACKENDS.join(", ")}; got ${JSON.stringify(raw)}`);
  }
  return raw;
}

function autoBackend(): FactsBackend {
  const p = process.platform;
  if ((p === "linux" || p === "darwin") && loadNative() !== null) return "native";
  if (p === "linux") return "procfs";
  if (p !== "win32" && findPs() !== null) return "ps";
  return "none";
}

function create(backend: FactsBackend): ProcessFacts {
  switch (backend) {
    case "native": {
      const binding = loadNative();
      if (binding === null) {
        throw new Error(
          `the native facts backend is not available: ${loadError() ?? `not supported on ${process.platform}`}`,
        );
      }
      return createNativeFacts(binding);
    }
    case "procfs":
      return createProcfsFacts();
    case "ps":
      return createPsFacts({ bin: findPs() ?? "ps" });
    case "none":
      return createNoneFacts();
  }
}

/**
 * The ps binary, or null. The system locations come before PATH: these
 * answers decide what may be signalled, so a ps planted early in PATH should
 * not be the one we believe.
 */
export function findPs(): string | null {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter((d) => isAbsolute(d));
  for (const d of ["/bin", "/usr/bin", ...dirs]) {
    const candidate = join(d, "ps");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}
