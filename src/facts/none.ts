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
import { constants as osConstants } from "node:os";
import { factsFaultOfCode } from "./errno.js";
import { assertBatch } from "./inspect-many.js";
import { assertEnvKeys, assertPid } from "./validate.js";
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessSnapshot } from "./types.js";

export class FactsUnavailableError extends Error {
  override name = "FactsUnavailableError";
  readonly backend = "none" as const;
  constructor(message = 'no process facts are available on this host (backend "none"): every answer is unknown') {
    super(message);
  }
}

export function createNoneFacts(reason?: string): ProcessFacts {
  const message =
    reason === undefined ? undefined : `no process facts are available on this host (backend "none"): ${reason}`;
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

/**
 * The host refused a read that decides whether a process exists (EMFILE,
 * ENFILE, ENOMEM, EIO…): nothing is known about it. Never read as "gone":
 * every caller treats it as unknown, so nothing is signalled or settled on it.
 */
export class FactsReadError extends Error {
  override name = "FactsReadError";
  /** the errno name, e.g. "EMFILE" */
  readonly code: string;
  constructor(
    readonly pid: number | null,
    errno: number,
  ) {
    const code = errnoName(errno);
    super(
      `the host refused to read ${pid === null ? "the process table" : `/proc/${pid}`} (${code}${factsFaultOfCode(code) === "no-descriptors" ? ": out of file descriptors, see RLIMIT_NOFILE" : ""}): nothing is known about it`,
    );
    this.code = code;
  }
}

function errnoName(errno: number): string {
  for (const [name, n] of Object.entries(osConstants.errno)) if (n === errno) return name;
  return `errno ${errno}`;
}
