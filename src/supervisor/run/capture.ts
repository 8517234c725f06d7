/**
 * A run's output: every chunk counts as output for the record and the
 * no-output deadline, is kept (the capped tail of each stream, unless
 * `captureOutput: false`), and is handed to the caller's listener, whose
 * throw never takes the run's bookkeeping down with it.
 */
import type { SpawnedProcess } from "../adapters/adapter.js";
import { CappedOutput } from "../shared/output.js";
import type { Run, RunContext } from "./run.js";

export interface CapturedOutput {
  /** what was kept ("" when the run does not capture) */
  stdout(): string;
  stderr(): string;
}

export function captureOutput(run: Run, ctx: RunContext, proc: SpawnedProcess, maxOutputChars: number): CapturedOutput {
  const keep = run.input.captureOutput !== false;
  const stdout = new CappedOutput(maxOutputChars);
  const stderr = new CappedOutput(maxOutputChars);
  const onChunk = (sink: CappedOutput, listener: ((c: string) => void) | undefined) => (chunk: string) => {
    ctx.registry.touchOutput(run.runId);
    run.deadlines?.touch();
    if (keep) sink.append(chunk);
    if (listener) {
      try {
        listener(chunk);
      } catch {
        // a throwing listener must not take the run's bookkeeping down with it
      }
    }
  };
  proc.onStdout(onChunk(stdout, run.input.onStdout));
  proc.onStderr(onChunk(stderr, run.input.onStderr));
  return { stdout: () => (keep ? stdout.toString() : ""), stderr: () => (keep ? stderr.toString() : "") };
}
