/**
 * The backend of last resort: this host gives no process facts we can trust.
 *
 * It does NOT answer with an empty snapshot or a null inspect: an empty table
 * reads as "nothing is running" and null reads as "that process is gone",
 * and both invite a caller to conclude something (a lease is lost, a pid is
 * free). Instead every question rejects with FactsUnavailableError, so a
 * caller that forgets to check `identityStrength` still cannot verify, and
 * therefore never signals. Input is validated first, as on every backend, so
 * a programming error still surfaces as the TypeError/RangeError it is.
 */
import { assertBatch } from "./inspect-many.js";
import { assertEnvKeys, assertPid } from "./validate.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessSnapshot } from "./types.js";

export class FactsUnavailableError extends Error {
  override name = "FactsUnavailableError";
  readonly backend = "none" as const;
  constructor(message = "no process facts are available on this host (backend \"none\"): every answer is unknown") {
    super(message);
  }
}

export function createNoneFacts(reason?: string): ProcessFacts {
  const message = reason === undefined ? undefined : `no process facts are available on this host (backend "none"): ${reason}`;
  return {
    backend: "none",
    identityStrength: "none",
    snapshot(): Promise<ProcessSnapshot> {
      return Promise.reject(new FactsUnavailableError(message));
    },
    async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
      assertPid(pid);
      assertEnvKeys(opts?.envKeys, "opts.envKeys");
      throw new FactsUnavailableError(message);
    },
    async inspectMany(pids: readonly number[], opts?: InspectOptions): Promise<Array<ProcessDetails | null>> {
      assertBatch(pids, opts?.envKeys);
      throw new FactsUnavailableError(message);
    },
  };
}
