/**
 * Processes adopted by pid: each is pinned to the exact process it named at
 * adopt time (its start time), so a later kill never reaches a pid that now
 * names another process, and it counts as running while it is alive by the
 * library's one rule (liveness.ts). Adopted sessions have no exit event: one
 * unref'd timer looks at them while any runs, so one that exits on its own
 * becomes a finished session (and the TTL can expire it). Evidence that
 * cannot tell changes nothing.
 */
import { isAlive, provablyGone } from "../../facts/liveness.js";
import { isKnownStartTime } from "../../facts/identity.js";
import type { ProcessFacts } from "../../facts/types.js";
import { AdoptError } from "./errors.js";
import { markExited, type Session, type SessionTable } from "./table.js";

/** The start time of the live process at (a valid) `pid`; AdoptError when it cannot be pinned (not running, unreadable, facts that cannot tell). */
export async function pinAdopted(facts: ProcessFacts, pid: number): Promise<string> {
  if (facts.identityStrength === "none") {
    throw new AdoptError(
      pid,
      `the facts backend "${facts.backend}" cannot read process identity, so a later kill could not be pinned to this process`,
    );
  }
  let details;
  try {
    details = await facts.inspect(pid);
  } catch (err) {
    throw new AdoptError(pid, `it could not be inspected (${err instanceof Error ? err.message : String(err)})`);
  }
  if (details === null || !isAlive(details)) throw new AdoptError(pid, "no such running process");
  const startTime = String(details.startTime);
  if (!isKnownStartTime(startTime)) throw new AdoptError(pid, "its start time could not be read");
  return startTime;
}

/** True when the adopted process is provably gone (liveness.ts provablyGone). */
export function adoptedExited(facts: ProcessFacts, s: Session): Promise<boolean> {
  const { pid, startTime } = s.info;
  if (pid === undefined || startTime === undefined) return Promise.resolve(false);
  return provablyGone(facts, { pid, startTime });
}

export interface AdoptedWatch {
  /** an adopted session was added: look at them every checkMs while any runs */
  watch(): void;
}

export function watchAdopted(table: SessionTable, facts: () => ProcessFacts, checkMs: number): AdoptedWatch {
  let timer: NodeJS.Timeout | undefined;
  let checking = false;
  const check = async (): Promise<void> => {
    if (checking) return;
    checking = true;
    try {
      await Promise.all(
        table.adoptedRunning().map(async (s) => {
          if (await adoptedExited(facts(), s)) markExited(s);
        }),
      );
    } finally {
      checking = false;
      if (table.adoptedRunning().length === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    }
  };
  return {
    watch() {
      if (timer) return;
      timer = setInterval(() => void check(), checkMs);
      timer.unref();
    },
  };
}
