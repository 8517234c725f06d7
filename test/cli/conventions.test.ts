/**
 * CLI conventions, for EVERY command in the one command table (so a new
 * command is covered the day it is added): `--help` exits 0 and survives a
 * pipe that closes early, `--json` prints one parseable object on one line,
 * a stray argument and an empty `--state-dir=` are usage errors (exit 2),
 * and every flag is documented in the README. Run as an operator runs it:
 * `node dist/cli/main.js …` in a shell pipeline.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { COMMANDS, commandHelp, type CommandSpec } from "../../src/cli/dispatch.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const MAIN = join(ROOT, "dist/cli/main.js");
if (!existsSync(MAIN)) throw new Error("dist/cli/main.js is missing: run `npm run build` before these tests");

const scratch = mkdtempSync(join(tmpdir(), "proclease-conv-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node main.js ARGS | READER` in bash; the exit code is node's (PIPESTATUS), not the reader's. */
function piped(args: readonly string[], reader: string, env: Record<string, string> = {}): Promise<Run> {
  const script = `"$0" "$1" "\${@:2}" | ${reader}; exit \${PIPESTATUS[0]}`;
  return new Promise((resolve) => {
    execFile(
      "bash",
      ["-c", script, process.execPath, MAIN, ...args],
      { env: { ...process.env, ...env }, timeout: 60_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return piped(args, "cat", env);
}

/** The positional arguments a command needs to get past parsing: our own pid serves for <pid> and <leaseId|pid>. */
function required(c: CommandSpec): string[] {
  return c.args.map(() => String(process.pid));
}

function hasStateDir(c: CommandSpec): boolean {
  return c.options.some((o) => o.name === "state-dir");
}

const NO_STACK = /^\s+at |Error: |node:internal/m;

describe.each(COMMANDS.map((c) => [c.name, c] as const))("proclease %s", (name, c) => {
  it("--help: usage first, exit 0, also when the reader closes the pipe early", async () => {
    const head = await piped([name, "--help"], "head -1");
    expect(head.code, head.stderr).toBe(0);
    expect(head.stdout.startsWith(`usage: proclease ${name}`)).toBe(true);
    expect(head.stdout.split("\n").length).toBe(2); // one line and its newline
    expect(head.stderr).not.toMatch(NO_STACK);
    // `true` exits before node writes: the write meets EPIPE for certain
    const closed = await piped([name, "-h"], "true");
    expect(closed.code, closed.stderr).toBe(0);
    expect(closed.stderr).toBe("");
    // the help lists every option of the table entry
    const full = await cli([name, "--help"]);
    expect(full.stdout).toBe(commandHelp(c));
    for (const o of c.options) expect(full.stdout).toContain(`--${o.name}`);
    expect(full.stdout).toContain("-h, --help");
  });

  it("a stray argument and an empty --state-dir= are usage errors (exit 2), reported on stderr", async () => {
    const dir = join(scratch, `stray-${name}`);
    const stray = await cli([name, ...required(c), "extra", ...(hasStateDir(c) ? ["--state-dir", dir] : [])]);
    expect(stray.code, stray.stderr).toBe(2);
    expect(stray.stderr).toMatch(/unexpected argument "extra"/);
    expect(stray.stdout).toBe("");
    const empty = await cli([name, ...required(c), "--state-dir="]);
    expect(empty.code, empty.stderr).toBe(2);
    expect(empty.stderr).toMatch(hasStateDir(c) ? /--state-dir needs a non-empty value/ : /unknown option --state-dir/);
    expect(empty.stderr).not.toMatch(NO_STACK);
    // a usage error creates nothing, not even the state dir it named
    expect(readdirSync(scratch)).not.toContain(`stray-${name}`);
  });

  const hasJson = c.options.some((o) => o.name === "json");
  it.skipIf(!hasJson)(
    `--json prints exactly one JSON object on one line${hasJson ? "" : ` [skipped: ${name} has no --json]`}`,
    async () => {
      const dir = join(scratch, `json-${name}`);
      const withDir = hasStateDir(c) ? ["--state-dir", dir] : [];
      const r = await cli([name, ...required(c), "--json", ...withDir]);
      // explain <our pid> names no lease: "not found" is 1, and it still answers in JSON
      expect(r.code, r.stderr).toBe(name === "explain" ? 1 : 0);
      const lines = r.stdout.split("\n");
      expect(lines.length).toBe(2);
      expect(lines[1]).toBe("");
      const obj = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(typeof obj).toBe("object");
      expect(obj.backend).toMatch(/^(native|procfs|ps|none)$/);
      expect(obj.identityStrength).toMatch(/^(exact|coarse|none)$/);
    },
  );
});

describe("the command as a whole", () => {
  it("--version prints package.json's version; no command is a usage error on stderr; an unknown one too", async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    const v = await cli(["--version"]);
    expect(v).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
    const top = await piped(["--help"], "head -1");
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^usage: proclease <command>/);
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe("");
    expect(none.stderr).toMatch(/^usage: proclease/);
    const unknown = await cli(["nosuch"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "nosuch"/);
    const help = await cli(["help", "ps"]);
    expect(help.stdout).toBe(commandHelp(COMMANDS.find((c) => c.name === "ps")!));
  });

  it("a long output into a closed pipe exits 0 without a stack trace (ps, ps --tree)", async () => {
    for (const args of [["ps"], ["ps", "--tree"], ["ps", "--json"]]) {
      const r = await piped(args, "true");
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      expect(r.stderr).toBe("");
      const head = await piped(args, "head -1");
      expect(head.code, `${args.join(" ")}: ${head.stderr}`).toBe(0);
      expect(head.stderr).toBe("");
    }
  });

  it("the same situation exits the same way: unknown pid and unknown lease are both 1", async () => {
    const dir = join(scratch, "exit-codes");
    const gonePid = await new Promise<number>((resolve) => {
      const c = execFile("true", [], () => resolve(c.pid!));
    });
    expect((await cli(["explain", String(gonePid), "--state-dir", dir])).code).toBe(1);
    expect((await cli(["explain", "no-such-lease", "--state-dir", dir])).code).toBe(1);
    expect((await cli(["inspect", String(gonePid)])).code).toBe(1);
  });

  it("the README's CLI table has a row per command naming every one of its flags", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const rows = readme.split("\n").filter((l) => l.startsWith("| `proclease "));
    for (const c of COMMANDS) {
      const row = rows.find((l) => l.startsWith(`| \`proclease ${c.name}`));
      expect(row, `README row for ${c.name}`).toBeDefined();
      for (const o of c.options) expect(row, `${c.name} --${o.name}`).toContain(`--${o.name}`);
    }
    expect(readme).toContain("--version");
  });
});
