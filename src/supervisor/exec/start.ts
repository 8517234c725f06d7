/**
 * A session the supervisor starts: a background run without captured output
 * (the session keeps its own log). Output can arrive while spawn() is still
 * settling (lease bookkeeping): it is buffered until the session exists,
 * never dropped.
 */
import type { ProcessSupervisor } from "../core/supervisor.js";
import type { SpawnInput } from "../shared/types.js";
import { markExited, newSession, type Session, type SessionTable } from "./table.js";
import type { ExecSessionInfo } from "./types.js";

export async function startSession(
  table: SessionTable,
  supervisor: ProcessSupervisor,
  input: SpawnInput,
): Promise<ExecSessionInfo> {
  let session: Session | undefined;
  const early: string[] = [];
  const sink = (c: string) => (session ? table.append(session, c) : void early.push(c));
  const run = await supervisor.spawn({
    ...input,
    background: true,
    captureOutput: false,
    onStdout: (c) => {
      sink(c);
      input.onStdout?.(c);
    },
    onStderr: (c) => {
      sink(c);
      input.onStderr?.(c);
    },
  });
  const s = newSession(
    {
      id: run.runId,
      runId: run.runId,
      pid: run.pid,
      mode: input.mode,
      command: input.mode === "pty" ? input.ptyCommand : input.argv.join(" "),
      status: "running",
      startedAtMs: run.startedAtMs,
    },
    { run, stdin: run.stdin, pty: input.mode === "pty" },
  );
  table.add(s);
  session = s;
  for (const c of early) table.append(s, c);
  s.exitPromise = run.wait().then((exit) => {
    markExited(s, exit);
    return exit;
  });
  return { ...s.info };
}
