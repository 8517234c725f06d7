/**
 * The `proclease` operator command. Each subcommand lives in
 * `commands/<name>.ts` and exports `run(args, io)`; this file only dispatches.
 * Exit codes: 0 ok, 1 runtime error, 2 usage error.
 */
import { UsageError, type CliIo } from "./io.js";

type Command = { run(args: readonly string[], io: CliIo): Promise<number> };

// Static imports per command (loaded on demand), so the table is type-checked
// and bundlers/test runners can follow every entry.
const COMMANDS: Record<string, { help: string; load: () => Promise<Command> }> = {
  ps: { help: "the live process table (--tree, --json)", load: () => import("./commands/ps.js") },
  inspect: { help: "one process in depth: inspect <pid> [--env KEY]... [--json]", load: () => import("./commands/inspect.js") },
  doctor: { help: "what this host allows, one row per capability", load: () => import("./commands/doctor.js") },
  leases: { help: "every lease with its state and live verdict [--state-dir D] [--json]", load: () => import("./commands/leases.js") },
  explain: { help: "the evidence table for a lease id or pid [--state-dir D]", load: () => import("./commands/explain.js") },
  reap: { help: "reap this instance's verified orphans [--state-dir D] [--dry-run]", load: () => import("./commands/reap.js") },
  demo: { help: "the whole lifecycle story with a fixture agent, as a timeline", load: () => import("./commands/demo.js") },
};

function usage(): string {
  const rows = Object.entries(COMMANDS).map(([k, v]) => `  ${k.padEnd(8)} ${v.help}`);
  return `usage: proclease <command> [options]\n\n${rows.join("\n")}\n`;
}

export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "-h" || name === "--help" || name === "help") {
    io.out(usage());
    return name === undefined ? 2 : 0;
  }
  if (!Object.hasOwn(COMMANDS, name)) {
    io.err(`proclease: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return 2;
  }
  try {
    const mod = await COMMANDS[name]!.load();
    return await mod.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`proclease ${name}: ${err.message}\n`);
      return 2;
    }
    io.err(`proclease ${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

