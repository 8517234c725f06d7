/**
 * `proclease inspect <pid> [--env KEY]... [--json] [--backend NAME]`.
 * Environment values are shown only for the keys the operator named: the
 * facts layer never reads any other, so nothing else can leak into a log.
 */
import { assertEnvKeys, assertPid } from "../../facts/validate.js";
import { isZombieState } from "../../facts/liveness.js";
import type { ProcessDetails } from "../../facts/types.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import {
  flag,
  formatAge,
  jsonLine,
  options,
  printableDeep,
  UsageError,
  type CliIo,
  type ParsedArgs,
  factsHead,
} from "../shared/io.js";
import { labelProcesses } from "../shared/labels.js";

/** The pid argument, with validate.ts's message turned into a usage error. */
export function parsePidArg(text: string): number {
  // Number() would accept "0x10", "1e3" and " 5 ": an operator typo must not name another process
  const n = /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  try {
    assertPid(n);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    throw new UsageError(Number.isNaN(n) ? `pid must be an integer process id, got ${JSON.stringify(text)}` : msg);
  }
  return n;
}

function envLine(key: string, value: string | null, readable: boolean | undefined): string {
  if (value !== null) return `  ${key}=${value}`;
  return `  ${key}: ${readable === true ? "(not set)" : "(unknown: environment not readable)"}`;
}

function human(d: ProcessDetails, keys: readonly string[], comm: string | null, startedAt: number | null): string {
  const lines = [
    `comm        ${comm ?? "?"}`,
    `pid         ${d.pid}`,
    `ppid        ${d.ppid}`,
    `pgid        ${d.pgid}`,
    `sid         ${d.sid}`,
    `uid         ${d.uid}`,
    `state       ${d.state}${isZombieState(d) ? " (zombie)" : ""}`,
    `start time  ${d.startTime}${startedAt === null ? "" : ` (${new Date(startedAt).toISOString()}, ${formatAge(Date.now() - startedAt)} ago)`}`,
    `exe         ${d.exePath ?? "(unknown)"}`,
    `argv        ${d.argv === null ? "(unknown)" : JSON.stringify(d.argv)}`,
  ];
  if (d.bootId !== undefined) lines.push(`boot id     ${d.bootId}`);
  if (d.pidNamespace !== undefined) lines.push(`pid ns      ${d.pidNamespace}`);
  if (keys.length > 0) {
    lines.push("env");
    for (const k of keys) lines.push(envLine(k, d.env[k] ?? null, d.envReadable));
  }
  return lines.join("\n") + "\n";
}

export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const pid = parsePidArg(parsed.positionals[0]!);
  const keys = options(parsed, "env");
  try {
    assertEnvKeys(keys, "--env");
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const facts = factsFromFlag(parsed);
  const details = await facts.inspect(pid, { envKeys: keys });
  if (details === null) {
    io.err(`proclease inspect: no such process ${pid} (backend: ${facts.backend})\n`);
    return 1;
  }
  const labels = await labelProcesses(facts, [details]);
  if (flag(parsed, "json")) {
    io.out(
      jsonLine({
        ...factsHead(facts),
        process: { ...details, comm: labels.comm(pid), startedAt: labels.startedAt(details) },
      }),
    );
  } else {
    // comm, exe, argv and env values are the process's own: escaped for the terminal
    const shown = printableDeep({ details, keys, comm: labels.comm(pid) });
    io.out(backendLine(facts) + human(shown.details, shown.keys, shown.comm, labels.startedAt(details)));
  }
  return 0;
}
