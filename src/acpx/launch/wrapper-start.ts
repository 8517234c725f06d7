/**
 * The first thing the wrapper tells us on its lifeline ("started" or
 * "spawn-error"), or why it never did: its spawn error, its exit, or the
 * timeout. Nothing here decides what to make of it.
 */
import type { Lifeline } from "./lifeline.js";
import type { ChildExit, ExitWatch, SpawnFailure } from "./wrapper-end.js";
import type { SpawnErrorReport, StartedReport, WrapperReport } from "../wrapper/protocol.js";

/** The first thing the wrapper tells us, or why it never did. */
export type StartOutcome =
  | { kind: "started"; report: StartedReport }
  | { kind: "spawn-error"; report: SpawnErrorReport }
  | { kind: "exited"; exit: ChildExit }
  | { kind: "error"; error: Error }
  | { kind: "timeout"; ms: number };

export function waitStart(
  lifeline: Lifeline,
  failure: SpawnFailure,
  exit: ExitWatch,
  timeoutMs: number,
): Promise<StartOutcome> {
  return new Promise<StartOutcome>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let unlisten: () => void = () => undefined;
    const done = (o: StartOutcome) => {
      clearTimeout(timer);
      unlisten();
      resolve(o);
    };
    const onReport = (r: WrapperReport) => {
      if (r.type === "started") done({ kind: "started", report: r });
      else if (r.type === "spawn-error") done({ kind: "spawn-error", report: r });
    };
    const early = lifeline.find("started") ?? lifeline.find("spawn-error");
    if (early) return onReport(early);
    const spawnError = failure.error();
    if (spawnError) return done({ kind: "error", error: spawnError });
    unlisten = lifeline.listen(onReport);
    timer = setTimeout(() => done({ kind: "timeout", ms: timeoutMs }), timeoutMs);
    void exit.exited.then(async (status) => {
      // the lifeline may still hold the report that explains the exit
      await Promise.race([lifeline.closed, new Promise((r) => setTimeout(r, 200))]);
      const late = lifeline.find("started") ?? lifeline.find("spawn-error");
      const error = failure.error();
      if (late) onReport(late);
      else if (error) done({ kind: "error", error });
      else done({ kind: "exited", exit: status });
    });
  });
}
