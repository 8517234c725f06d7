/**
 * How a wrapper's run ends, as far as the gateway can tell: its spawn error
 * (heard before anything else runs), its exit (we are its parent: Node
 * reaped it), and how the session ended once the lifeline is drained, named
 * in one sentence for error messages.
 */
import type { ChildProcess } from "node:child_process";
import { hostResourceError } from "../../ownership/leases/host-faults.js";
import type { Lifeline } from "./lifeline.js";

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * How a session's processes ended, as far as the gateway can tell:
 * - adapter-exited: the wrapper reported the adapter's exit (code or signal);
 * - wrapper-killed: the wrapper itself died by a signal (SIGKILL, the OOM
 *   killer, a crash) without reporting an adapter exit: the adapter may still
 *   run, unsupervised, until a close or the startup reconcile finds it by lease;
 * - wrapper-exited: the wrapper exited with a status but reported no adapter
 *   exit (it could not start it, or failed itself).
 */
export type SessionEnd =
  | { kind: "adapter-exited"; code: number | null; signal: string | null }
  | { kind: "wrapper-killed"; wrapperPid: number | undefined; signal: NodeJS.Signals }
  | { kind: "wrapper-exited"; wrapperPid: number | undefined; code: number | null };

/**
 * One sentence naming who ended and how (`during`, e.g. "ACP initialize", says
 * when); a killed wrapper is named as such, never blamed on the adapter.
 */
export function describeEnd(end: SessionEnd, during?: string): string {
  const when = during !== undefined ? ` during ${during}` : "";
  const wrapper = `the wrapper${end.kind !== "adapter-exited" && end.wrapperPid !== undefined ? ` (pid ${end.wrapperPid})` : ""}`;
  switch (end.kind) {
    case "adapter-exited":
      return `the adapter exited${when} (${end.signal !== null ? `signal ${end.signal}` : `exit code ${end.code}`})`;
    case "wrapper-killed":
      return (
        `${wrapper} was killed by ${end.signal}${when}, before it reported an adapter exit; ` +
        "the adapter may still run unsupervised until its lease's tree is killed"
      );
    case "wrapper-exited":
      return `${wrapper} exited${when} (exit code ${end.code}) without reporting an adapter exit`;
  }
}

/** The wrapper's spawn error (a host limit named with where its limit is read), and who else hears it. */
export interface SpawnFailure {
  error(): Error | undefined;
  onError(listener: (err: Error) => void): void;
}

/**
 * Heard before anything else runs: a spawn that failed on EMFILE/ENFILE
 * emits "error" on the next tick and sets up no stdio at all (child.stdio is
 * then empty), and an "error" nobody listens to crashes the gateway.
 */
export function hearSpawnErrors(child: ChildProcess, file: string): SpawnFailure {
  let spawnError: Error | undefined;
  const listeners: Array<(err: Error) => void> = [];
  child.on("error", (err) => {
    spawnError ??= hostResourceError(err, `spawn ${file}`) ?? err;
    for (const l of listeners) l(err);
  });
  return { error: () => spawnError, onError: (l) => void listeners.push(l) };
}

/** The wrapper's exit (we are its parent: Node reaped it); a failed spawn emits "error" and never "exit", and counts as exited. */
export interface ExitWatch {
  status(): ChildExit | undefined;
  readonly exited: Promise<ChildExit>;
}

export function watchExit(child: ChildProcess, failure: SpawnFailure): ExitWatch {
  let exitStatus: ChildExit | undefined;
  const exited = new Promise<ChildExit>((resolve) => {
    child.once("exit", (code, signal) => {
      exitStatus = { code, signal };
      resolve(exitStatus);
    });
    failure.onError(() => {
      if (child.pid === undefined) {
        exitStatus = { code: null, signal: null };
        resolve(exitStatus);
      }
    });
  });
  return { status: () => exitStatus, exited };
}

/** How the session ended (LaunchedWrapper.howEnded, ended, onEnd). */
export interface EndWatch {
  howEnded(): SessionEnd | undefined;
  readonly ended: Promise<SessionEnd>;
  onEnd(listener: (end: SessionEnd) => void): () => void;
}

/** After the wrapper's exit the lifeline is drained first, so a report written just before the exit is not missed. */
export function watchEnd(child: ChildProcess, lifeline: Lifeline, exit: ExitWatch): EndWatch {
  const howEnded = (): SessionEnd | undefined => {
    const report = lifeline.find("exit");
    if (report) return { kind: "adapter-exited", code: report.code, signal: report.signal };
    const status = exit.status();
    if (!status) return undefined;
    if (status.signal !== null) return { kind: "wrapper-killed", wrapperPid: child.pid, signal: status.signal };
    return { kind: "wrapper-exited", wrapperPid: child.pid, code: status.code };
  };
  const listeners = new Set<(end: SessionEnd) => void>();
  const ended = exit.exited.then(async () => {
    // the lifeline may still hold the report that explains the exit
    await Promise.race([lifeline.closed, new Promise((r) => setTimeout(r, 200).unref())]);
    const end = howEnded()!;
    for (const l of listeners) l(end);
    listeners.clear();
    return end;
  });
  let endedValue: SessionEnd | undefined;
  void ended.then((e) => (endedValue = e));
  const onEnd = (listener: (end: SessionEnd) => void): (() => void) => {
    if (endedValue !== undefined) {
      const e = endedValue;
      queueMicrotask(() => listener(e));
      return () => undefined;
    }
    listeners.add(listener);
    return () => void listeners.delete(listener);
  };
  return { howEnded, ended, onEnd };
}
