/**
 * The `proclease` operator command: ONE table of commands, their arguments
 * and options with their help text. The same table drives parsing
 * (node:util parseArgs), the positional-count check, and every `--help`, so
 * a flag cannot exist without being documented. Each command's module is
 * imported only when that command runs, so `--help` loads none of them.
 *
 * Exit codes (the same situation exits the same way in every command):
 *   0 ok · 1 what was named does not exist, the facts could not answer, or a
 *   check failed · 2 usage error.
 * `--json` always prints ONE JSON object on ONE line (NDJSON, one per
 * redraw, for `status --watch --json`).
 */
import { readFileSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { EXIT, UsageError, type CliIo, type ParsedArgs } from "./shared/io.js";

export interface CommandModule {
  run(parsed: ParsedArgs, io: CliIo): Promise<number>;
}

export interface OptionSpec {
  readonly name: string;
  readonly short?: string;
  readonly type: "boolean" | "string";
  readonly multiple?: boolean;
  /** placeholder shown in help for a string option */
  readonly value?: string;
  readonly help: string;
}

export interface CommandSpec {
  readonly name: string;
  readonly summary: string;
  /** positional arguments, in order; every one listed here is required */
  readonly args: readonly { readonly name: string; readonly help: string }[];
  readonly options: readonly OptionSpec[];
  /** extra lines for `--help` */
  readonly notes?: readonly string[];
  load(): Promise<CommandModule>;
}

const HELP: OptionSpec = { name: "help", short: "h", type: "boolean", help: "show this help and exit" };
const JSON_OPT: OptionSpec = {
  name: "json",
  type: "boolean",
  help: "print one JSON object on one line instead of text",
};
const BACKEND: OptionSpec = {
  name: "backend",
  type: "string",
  value: "NAME",
  help: "facts backend: auto, native, procfs, ps or none (default auto, or $PROCLEASE_BACKEND)",
};
const STATE_DIR: OptionSpec = {
  name: "state-dir",
  type: "string",
  value: "DIR",
  help: "the gateway's state dir (default $PROCLEASE_STATE_DIR, else ~/.proclease)",
};
const GRACE_MS: OptionSpec = {
  name: "grace-ms",
  type: "string",
  value: "MS",
  help: "milliseconds between SIGTERM and SIGKILL, 0..600000",
};

export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "status",
    summary:
      "a live view of every lease: its process tree, which processes carry the markers, the verdict and its evidence",
    args: [],
    options: [
      STATE_DIR,
      JSON_OPT,
      {
        name: "watch",
        type: "boolean",
        help: "redraw every second until Ctrl-C (with --json: one object per line per redraw)",
      },
      BACKEND,
    ],
    notes: [
      "Read-only: it never signals and never changes a lease. Colour only on a terminal, never under NO_COLOR.",
      "A lease with its own cgroup shows memory.current and memory.peak (where memory is on cgroup v2; else why not, once). Cgroups in the state dir's instance folders that are no lease's own are listed as orphans: `proclease reap --orphan-cgroups` removes them.",
    ],
    load: () => import("./commands/status.js"),
  },
  {
    name: "ps",
    summary: "the live process table as the facts layer sees it",
    args: [],
    options: [
      { name: "tree", type: "boolean", help: "indent each process's command name under its parent" },
      {
        ...JSON_OPT,
        help: "print one JSON object: raw start times (backend units) plus comm and startedAt (epoch ms)",
      },
      BACKEND,
    ],
    notes: ["Columns: PID PPID PGID SID UID S(tate) AGE COMM. AGE is how long ago the process started."],
    load: () => import("./commands/ps.js"),
  },
  {
    name: "inspect",
    summary: "one process in depth: exe, real argv, and only the environment keys you name",
    args: [{ name: "pid", help: "the process id" }],
    options: [
      {
        name: "env",
        type: "string",
        multiple: true,
        value: "KEY",
        help: "show this environment variable (repeatable); no other is ever read",
      },
      JSON_OPT,
      BACKEND,
    ],
    load: () => import("./commands/inspect.js"),
  },
  {
    name: "doctor",
    summary: "what this host allows for the backend asked, one row per capability",
    args: [],
    options: [
      { ...STATE_DIR, help: `${STATE_DIR.help}; its orphan cgroups get a row` },
      JSON_OPT,
      BACKEND,
      {
        name: "strict",
        type: "boolean",
        help: "exit 1 when a row says no that this host should support (the rows the host's own policy decides never count)",
      },
    ],
    load: () => import("./commands/doctor.js"),
  },
  {
    name: "leases",
    summary: "every lease in the state dir with its recorded state and live verdict",
    args: [],
    options: [STATE_DIR, JSON_OPT, BACKEND],
    notes: ["Read-only: it never signals and never changes a lease."],
    load: () => import("./commands/leases.js"),
  },
  {
    name: "explain",
    summary: "the evidence table for one lease, and what cleanup would do with it",
    args: [{ name: "leaseId|pid", help: "a lease id, or a pid that a lease names (root, verified member or remnant)" }],
    options: [STATE_DIR, JSON_OPT, BACKEND],
    notes: ["Read-only: nothing is signalled. A lease id or pid that no lease names exits 1."],
    load: () => import("./commands/explain.js"),
  },
  {
    name: "reap",
    summary: "reap this instance's verified orphans (open/closing leases whose gateway is gone)",
    args: [],
    options: [
      STATE_DIR,
      {
        name: "dry-run",
        type: "boolean",
        help: "say what would be done; signal nothing and change no lease (works beside a live gateway)",
      },
      {
        name: "force",
        type: "boolean",
        help: "reap although a gateway holds the state dir: trees whose wrapper has a live parent, leases with no pid yet and unknown evidence are then left alone",
      },
      {
        name: "orphan-cgroups",
        type: "boolean",
        help: "instead of leases: end (cgroup.kill) and remove the cgroups in this state dir's instance folders that are no lease's own, as `status` lists them",
      },
      GRACE_MS,
      JSON_OPT,
      BACKEND,
    ],
    notes: [
      "Covers ACPX sessions and process-supervisor runs alike, through the same lifecycle as the gateway's own startup reap.",
      "Refused (exit 1) while a gateway holds the state dir, unless --force. `--dry-run` and `explain` share this code path and never change anything.",
      "--orphan-cgroups: the same lock rule; with --force, a cgroup named for an open lease that records none yet is left alone (a gateway may be making it), and so is one whose processes carry another gateway instance's markers. Exit 1 when one could not be ended or removed.",
    ],
    load: () => import("./commands/reap.js"),
  },
  {
    name: "demo",
    summary: "the whole lifecycle story on real processes, as a timeline",
    args: [],
    options: [
      { ...GRACE_MS, help: "milliseconds between SIGTERM and SIGKILL, 0..600000 (default 500)" },
      { name: "keep", type: "boolean", help: "keep the demo's state dir (the default; kept for scripts)" },
      { name: "clean", type: "boolean", help: "delete the demo's state dir at the end" },
    ],
    notes: ["The state dir is printed at the start and kept, with the commands to look at it printed at the end."],
    load: () => import("./commands/demo.js"),
  },
];

export function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

const EXIT_NOTE = "exit codes: 0 ok, 1 not found / facts unavailable / a check failed, 2 usage error";

function optionLabel(o: OptionSpec): string {
  const long = `--${o.name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}`;
  return o.short !== undefined ? `-${o.short}, ${long}` : `    ${long}`;
}

function synopsis(c: CommandSpec): string {
  const opts = c.options.map(
    (o) => `[--${o.name}${o.type === "string" ? ` ${o.value ?? "VALUE"}` : ""}]${o.multiple ? "..." : ""}`,
  );
  return ["proclease", c.name, ...c.args.map((a) => `<${a.name}>`), ...opts].join(" ");
}

export function commandHelp(c: CommandSpec): string {
  const opts = [...c.options, HELP];
  const w = Math.max(...opts.map((o) => optionLabel(o).length), ...c.args.map((a) => a.name.length + 6));
  const lines = [`usage: ${synopsis(c)}`, "", `${c.summary[0]!.toUpperCase()}${c.summary.slice(1)}.`];
  if (c.args.length > 0) {
    lines.push("", "arguments:");
    for (const a of c.args) lines.push(`  ${`<${a.name}>`.padEnd(w)}  ${a.help}`);
  }
  lines.push("", "options:");
  for (const o of opts) lines.push(`  ${optionLabel(o).padEnd(w)}  ${o.help}`);
  if (c.notes) lines.push("", ...c.notes);
  lines.push("", EXIT_NOTE);
  return lines.join("\n") + "\n";
}

export function usage(): string {
  const w = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    "usage: proclease <command> [options]      proclease <command> --help",
    "",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(w)}  ${c.summary}`),
    "",
    "  -h, --help     show this help",
    "      --version  print the version",
    "",
    EXIT_NOTE,
    "",
  ].join("\n");
}

export function version(): string {
  // dist/cli/dispatch.js and src/cli/dispatch.ts both sit two levels under the package root
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
  return typeof pkg.version === "string" ? pkg.version : "unknown";
}

function wantsHelp(args: readonly string[]): boolean {
  const end = args.indexOf("--");
  return (end === -1 ? args : args.slice(0, end)).some((a) => a === "-h" || a === "--help");
}

/** Parses `args` against the command's table entry; every problem is a UsageError. */
export function parseCommandArgs(c: CommandSpec, args: readonly string[]): ParsedArgs {
  const config: NonNullable<ParseArgsConfig["options"]> = {};
  for (const o of [...c.options, HELP]) {
    config[o.name] = {
      type: o.type,
      ...(o.short !== undefined ? { short: o.short } : {}),
      ...(o.multiple ? { multiple: true } : {}),
    };
  }
  const end = args.indexOf("--");
  const negative = (end === -1 ? args : args.slice(0, end)).find((a) => /^-\d/.test(a));
  if (negative !== undefined && c.args.length > 0)
    throw new UsageError(`<${c.args[0]!.name}> must be a positive integer or id, got ${JSON.stringify(negative)}`);
  let parsed: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...args], options: config, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(parseErrorText(err));
  }
  const values: Record<string, string | boolean | string[] | undefined> = {};
  for (const [k, v] of Object.entries(parsed.values)) {
    const list = Array.isArray(v) ? v : [v];
    for (const item of list) {
      if (item === "") throw new UsageError(`--${k} needs a non-empty value`);
    }
    values[k] = Array.isArray(v) ? v.map(String) : v;
  }
  const pos = parsed.positionals;
  if (pos.length < c.args.length) throw new UsageError(`missing <${c.args[pos.length]!.name}>`);
  if (pos.length > c.args.length) throw new UsageError(`unexpected argument ${JSON.stringify(pos[c.args.length])}`);
  return { values, positionals: pos };
}

/** node:util's messages, shortened to the part an operator needs. */
function parseErrorText(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const msg = e.message ?? String(err);
  const unknown = /^Unknown option '([^']+)'/.exec(msg);
  if (unknown) return `unknown option ${unknown[1]}`;
  const noArg = /^Option '([^']+)' does not take an argument/.exec(msg);
  if (noArg) return `${noArg[1]} takes no value`;
  const missing = /^Option '(?:-\w, )?(--[\w-]+) <value>' argument missing/.exec(msg);
  if (missing) return `${missing[1]} needs a value`;
  return msg;
}

export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === "-h" || name === "--help") {
    io.out(usage());
    return EXIT.ok;
  }
  if (name === "--version" || name === "-V") {
    io.out(`${version()}\n`);
    return EXIT.ok;
  }
  if (name === "help") {
    if (rest.length === 0) {
      io.out(usage());
      return EXIT.ok;
    }
    const c = rest.length === 1 ? findCommand(rest[0]!) : undefined;
    if (c === undefined) {
      io.err(`proclease help: unknown command ${JSON.stringify(rest.join(" "))}\n\n${usage()}`);
      return EXIT.usage;
    }
    io.out(commandHelp(c));
    return EXIT.ok;
  }
  if (name === undefined) {
    io.err(usage());
    return EXIT.usage;
  }
  const c = findCommand(name);
  if (c === undefined) {
    io.err(`proclease: unknown command ${JSON.stringify(name)}\n\n${usage()}`);
    return EXIT.usage;
  }
  if (wantsHelp(rest)) {
    io.out(commandHelp(c));
    return EXIT.ok;
  }
  try {
    const parsed = parseCommandArgs(c, rest);
    const mod = await c.load();
    return await mod.run(parsed, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`proclease ${name}: ${err.message}\nusage: ${synopsis(c)}\n`);
      return EXIT.usage;
    }
    io.err(`proclease ${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.failed;
  }
}
