/**
 * The operator commands over live facts, run the way an operator runs them:
 * `node dist/cli/main.js …` as a child process.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { killAll, spawnTracked, waitFor } from "../fixtures/facts/procs.js";
import { probeCgroup2 } from "../helpers/cgroup-probe.mjs";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const NEEDED = [
  "dist/cli/main.js",
  "dist/cli/commands/ps.js",
  "dist/cli/commands/inspect.js",
  "dist/cli/commands/doctor.js",
];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const full: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!("PROCLEASE_BACKEND" in env)) delete full.PROCLEASE_BACKEND;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { env: full, timeout: 25_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  if (NEEDED.every((f) => existsSync(`${ROOT}/${f}`))) return;
  await new Promise<void>((resolve, reject) =>
    execFile("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, timeout: 120_000 }, (err) =>
      NEEDED.every((f) => existsSync(`${ROOT}/${f}`)) ? resolve() : reject(err ?? new Error("dist not built")),
    ),
  );
}, 150_000);

afterEach(killAll);

interface PsJson {
  backend: string;
  identityStrength: string;
  processes: Array<{
    pid: number;
    ppid: number;
    pgid: number;
    sid: number;
    uid: number;
    state: string;
    startTime: string;
    comm: string | null;
    startedAt: number | null;
  }>;
}

describe("proclease ps", () => {
  it("--json lists our spawned child with its parent and the backend that answered", async () => {
    const child = spawnTracked("sleep", ["30"]);
    const r = await cli(["ps", "--json"]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as PsJson;
    expect(["native", "procfs", "ps"]).toContain(out.backend);
    expect(out.identityStrength).toMatch(/^(exact|coarse)$/);
    const row = out.processes.find((p) => p.pid === child.pid);
    expect(row).toMatchObject({ pid: child.pid, ppid: process.pid, uid: process.getuid!() });
    expect(row!.startTime).toMatch(/^\d+$/);
    // comm may still be node's until the exec; startedAt is wall-clock ms, near now
    expect(row!.comm).toMatch(/^(sleep|node)$/);
    expect(Math.abs(row!.startedAt! - Date.now())).toBeLessThan(60_000);
    expect(r.stdout.split("\n")).toHaveLength(2);
    expect(out.processes.some((p) => p.pid === process.pid)).toBe(true);
  });

  it("human output names the backend first, shows comm and a human age, never raw start ticks; --tree indents a child's comm under its parent", async () => {
    const child = spawnTracked("sleep", ["30"]);
    await waitFor("sleep to exec", async () => readFileSync(`/proc/${child.pid}/comm`, "utf8").trim() === "sleep");
    const r = await cli(["ps", "--tree", "--backend", "procfs"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines[0]).toBe("backend: procfs (identity: exact)");
    expect(lines[1]).toMatch(/^\s+PID\s+PPID\s+PGID\s+SID\s+UID\s+S\s+AGE\s+COMM$/);
    const commAt = lines[1]!.indexOf("COMM");
    const parentLine = lines.find((l) => l.trimStart().startsWith(`${process.pid} `))!;
    const childLine = lines.find((l) => l.trimStart().startsWith(`${child.pid} `))!;
    expect(parentLine).toBeDefined();
    expect(childLine).toBeDefined();
    // this Node's main thread names itself: "node" up to Node 22, "MainThread" on 24, "node-MainThread" on 26
    expect(parentLine.slice(commAt).trimStart()).toBe(readFileSync("/proc/self/comm", "utf8").trim());
    expect(childLine.slice(commAt).trimStart()).toBe("sleep");
    const indent = (l: string) => l.slice(commAt).length - l.slice(commAt).trimStart().length;
    expect(indent(childLine)).toBe(indent(parentLine) + 2);
    expect(lines.indexOf(childLine)).toBeGreaterThan(lines.indexOf(parentLine));
    // AGE is human (like 12s or 3m04s); the raw start time is only in --json
    expect(childLine).toMatch(/\s\d+s\s+sleep$/);
    const raw = (JSON.parse((await cli(["ps", "--json"])).stdout) as PsJson).processes.find(
      (p) => p.pid === child.pid,
    )!.startTime;
    expect(childLine).not.toContain(raw);
  });

  it("--backend ps answers through ps; the none backend is a runtime error, never an empty table", async () => {
    const ps = await cli(["ps", "--backend", "ps", "--json"]);
    expect(JSON.parse(ps.stdout)).toMatchObject({ backend: "ps", identityStrength: "coarse" });
    const none = await cli(["ps"], { PROCLEASE_BACKEND: "none" });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no process facts are available/);
    expect(none.stdout).toBe("");
  });

  it("usage errors exit 2", async () => {
    for (const args of [
      ["ps", "--bogus"],
      ["ps", "--backend", "fast"],
      ["ps", "extra"],
      ["nosuchcommand"],
      ["ps", "--json=yes"],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.length).toBeGreaterThan(0);
    }
  });
});

describe("proclease inspect", () => {
  it("shows env values only for the keys asked for", async () => {
    const child = spawnTracked("sh", ["-c", "read x", "arg 1"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", WANTED: "w-value", SECRET_TOKEN: "do-not-print" },
      stdio: ["pipe", "ignore", "inherit"],
    });
    await waitFor("the shell to exec", async () =>
      (await cli(["inspect", String(child.pid), "--json"])).stdout.includes('"read x"'),
    );
    const r = await cli([
      "inspect",
      String(child.pid),
      "--env",
      "WANTED",
      "--env=ABSENT",
      "--json",
      "--backend",
      "procfs",
    ]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as {
      backend: string;
      process: { pid: number; ppid: number; argv: string[]; env: Record<string, string | null> };
    };
    expect(out.backend).toBe("procfs");
    expect(out.process).toMatchObject({ pid: child.pid, ppid: process.pid, argv: ["sh", "-c", "read x", "arg 1"] });
    expect(out.process.env).toEqual({ WANTED: "w-value", ABSENT: null });
    expect(r.stdout).not.toContain("do-not-print");

    const human = await cli(["inspect", String(child.pid), "--env", "WANTED"]);
    expect(human.code).toBe(0);
    expect(human.stdout.split("\n")[0]).toMatch(/^backend: \w+ \(identity: \w+\)$/);
    expect(human.stdout).toContain("WANTED=w-value");
    expect(human.stdout).not.toContain("do-not-print");
    expect(human.stdout).not.toContain("SECRET_TOKEN");

    const viaPs = await cli(["inspect", String(child.pid), "--env", "WANTED", "--backend", "ps", "--json"]);
    const psOut = JSON.parse(viaPs.stdout) as {
      process: { argv: null; env: Record<string, null>; envReadable: boolean };
    };
    expect(psOut.process).toMatchObject({ argv: null, env: { WANTED: null }, envReadable: false });
  });

  it("a bad pid is a usage error (2) with the validation message", async () => {
    for (const [arg, msg] of [
      ["0", /pid must be between 1/],
      ["-1", /pid/],
      ["1.5", /integer/],
      ["abc", /pid must be an integer/],
      [String(2 ** 22 + 1), /pid/],
      ["0x10", /pid/],
    ] as const) {
      const r = await cli(["inspect", arg]);
      expect(r.code, arg).toBe(2);
      expect(r.stderr).toMatch(msg);
    }
    expect((await cli(["inspect"])).code).toBe(2);
    expect((await cli(["inspect", "1", "--env", "A=B"])).code).toBe(2);
  });

  it("no such process exits 1", async () => {
    const c = spawnTracked("true", []);
    await new Promise((r) => c.once("exit", r));
    const r = await cli(["inspect", String(c.pid)]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no such process/);
  });
});

describe("proclease doctor", () => {
  const ROWS = [
    "backend",
    "identity",
    "pidfd",
    "subreaper",
    "foreign-env",
    "proc-visibility",
    "containment",
    "orphan-cgroups",
  ];

  it("prints all eight rows with yes/no and a reason", async () => {
    const r = await cli(["doctor"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^backend: \w+ \(identity: \w+\)$/);
    for (const name of ROWS) {
      const line = lines.find((l) => l.startsWith(`${name} `));
      expect(line, name).toBeDefined();
      expect(line).toMatch(new RegExp(`^${name}\\s+(yes|no)\\s+\\S`));
    }
  });

  it("--json, and why native is not used when it is disabled", async () => {
    const r = await cli(["doctor", "--json"], { PROCLEASE_DISABLE_NATIVE: "1" });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as {
      backend: string;
      rows: Array<{ capability: string; ok: boolean; code?: string; detail: string }>;
    };
    expect(out.rows.map((x) => x.capability)).toEqual(ROWS);
    if (process.platform === "linux") expect(out.backend).toBe("procfs");
    const backend = out.rows[0]!;
    expect(backend.code).toBe("native-unavailable");
    // the words name what disabled it
    expect(backend.detail).toMatch(/PROCLEASE_DISABLE_NATIVE=1/);
    expect(out.rows.find((x) => x.capability === "pidfd")!.ok).toBe(false);
  });

  it("--backend ps: every row describes ps, never the addon's race-free signals", async () => {
    const r = await cli(["doctor", "--json", "--backend", "ps"]);
    const out = JSON.parse(r.stdout) as {
      backend: string;
      rows: Array<{ capability: string; ok: boolean; code?: string; detail: string }>;
    };
    expect(out.backend).toBe("ps");
    const row = (c: string) => out.rows.find((x) => x.capability === c)!;
    expect(row("identity")).toMatchObject({ ok: false });
    expect(row("pidfd")).toMatchObject({ ok: false, code: "not-race-free" });
    expect(row("foreign-env")).toMatchObject({ ok: false, code: "ps-reads-no-env" });
    const text = await cli(["doctor", "--backend", "ps"]);
    expect(text.code).toBe(0);
    for (const line of text.stdout.split("\n")) if (line.includes("race-free")) expect(line).toMatch(/NOT race-free/);
  });

  type Strict = {
    rows: Array<{ capability: string; ok: boolean }>;
    strictFailures: Array<{ capability: string; expected: string }>;
  };

  it("--strict: a 'no' the host should support exits 1 and names the row (--backend none: no backend)", async () => {
    const r = await cli(["doctor", "--strict", "--backend", "none"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/doctor --strict: backend is "no" on a host that should support it/);
    const j = await cli(["doctor", "--strict", "--json", "--backend", "none"]);
    expect(j.code).toBe(1);
    expect((JSON.parse(j.stdout) as Strict).strictFailures.map((f) => f.capability)).toEqual(["backend"]);
  });

  it("--strict: the ps backend's own limits (coarse identity, no pidfd race-freedom, no environments) are not failures", async () => {
    const j = await cli(["doctor", "--strict", "--json", "--backend", "ps"]);
    const out = JSON.parse(j.stdout) as Strict;
    const no = out.rows.filter((x) => !x.ok).map((x) => x.capability);
    expect(no).toEqual(expect.arrayContaining(["identity", "pidfd", "foreign-env"]));
    expect(out.strictFailures.map((f) => f.capability)).not.toEqual(expect.arrayContaining(["identity"]));
    expect(out.strictFailures.filter((f) => ["identity", "pidfd", "foreign-env"].includes(f.capability))).toEqual([]);
    expect(j.code).toBe(out.strictFailures.length > 0 ? 1 : 0);
  });

  it("--strict on this host: containment is expected where the independent cgroup probe (root) moved a child, and the exit code follows the failures", async () => {
    const probe = await probeCgroup2();
    const j = await cli(["doctor", "--strict", "--json"]);
    const out = JSON.parse(j.stdout) as Strict;
    const containment = out.rows.find((x) => x.capability === "containment")!;
    if (probe.writable && process.getuid!() === 0 && !containment.ok) {
      expect(out.strictFailures.map((f) => f.capability)).toContain("containment");
    }
    for (const f of out.strictFailures) expect(out.rows.find((x) => x.capability === f.capability)?.ok).toBe(false);
    expect(j.code, JSON.stringify(out.strictFailures)).toBe(out.strictFailures.length > 0 ? 1 : 0);
  });

  it("--backend none is reported as nothing verifiable", async () => {
    const r = await cli(["doctor", "--json", "--backend", "none"]);
    const out = JSON.parse(r.stdout) as {
      backend: string;
      rows: Array<{ capability: string; ok: boolean; detail: string }>;
    };
    expect(out.backend).toBe("none");
    expect(out.rows[0]).toMatchObject({ capability: "backend", ok: false });
    expect(out.rows[1]).toMatchObject({ capability: "identity", ok: false });
  });
});
