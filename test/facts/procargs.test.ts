/**
 * The macOS KERN_PROCARGS2 parser and record mapping (native/procargs.cc),
 * compiled on Linux into a small harness and fed byte buffers laid out the
 * way xnu lays them out. The darwin build compiles the same file; this is
 * the only place its parser runs before it ever runs on a Mac.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "proclease-procargs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function buildHarness(): { path: string | null; why: string } {
  const cxx = ["c++", "g++", "clang++"].find((c) => {
    const r = spawnSync(c, ["--version"], { stdio: "ignore" });
    return !r.error && r.status === 0;
  });
  if (cxx === undefined) return { path: null, why: "no C++ compiler (c++, g++, clang++) on PATH" };
  const out = join(dir, "procargs-harness");
  const r = spawnSync(
    cxx,
    [
      "-std=c++17",
      "-Wall",
      "-Wextra",
      "-Werror",
      "-fno-exceptions",
      "-O1",
      "-o",
      out,
      here("../fixtures/native/procargs-harness.cc"),
      here("../../native/procargs.cc"),
    ],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`the procargs harness does not compile:\n${r.stderr}`);
  return { path: out, why: "" };
}

const harness = buildHarness();
if (harness.path === null) console.log(`[procargs] skipped: ${harness.why}`);
const d = harness.path === null ? describe.skip : describe;
const suffix = harness.path === null ? ` (skipped: ${harness.why})` : "";

interface Parsed {
  hasArgv: boolean;
  argv: string[];
  envReadable: boolean;
  env: Array<[string, string]>;
}

function parse(buf: Buffer, keys: string[] = [], capacity = 1 << 20): Parsed {
  const r = spawnSync(harness.path!, ["parse", String(capacity), ...keys], { input: buf, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`harness failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Parsed;
}

const WORD = 8;
const KEY = "executable_path=";
const nul = Buffer.alloc(1);
const str = (s: string) => Buffer.concat([Buffer.from(s, "utf8"), nul]);

/**
 * The string area as exec_save_path / exec_extract_strings / exec_add_apple_strings
 * build it (64-bit target): "executable_path=" + path, NUL, padded so the
 * space used is a multiple of the word; argv; env; padded again; the apple
 * strings; padded again. sysctl_procargsx then strips "executable_path=".
 */
function stringArea(o: { path: string; argv: string[]; env: string[]; apple: string[] }): {
  area: Buffer;
  argvEnd: number;
} {
  const parts: Buffer[] = [];
  let used = 0;
  const add = (b: Buffer) => {
    parts.push(b);
    used += b.length;
  };
  const pad = () => {
    while (used % WORD !== 0) add(nul);
  };
  add(str(KEY + o.path));
  pad();
  for (const a of o.argv) add(str(a));
  const argvEnd = used - KEY.length;
  for (const e of o.env) add(str(e));
  pad();
  for (const a of o.apple) add(str(a));
  pad();
  return { area: Buffer.concat(parts).subarray(KEY.length), argvEnd };
}

/** xnu's cut for a code-signing-restricted target: the exec path and the NULs after it, then argc strings (strnlen + 1 each). */
function omitEnv(area: Buffer, argc: number): Buffer {
  let size = 0;
  for (let i = 0; i < argc + 1 && size < area.length; i++) {
    const rest = area.subarray(size);
    const z = rest.indexOf(0);
    let len = z === -1 ? rest.length : z;
    if (len < rest.length) {
      len += 1;
      if (i === 0) while (len < rest.length && rest[len] === 0) len += 1;
    }
    size += len;
  }
  return area.subarray(0, size);
}

function procargs2(o: {
  path: string;
  argv: string[];
  env?: string[];
  apple?: string[];
  argc?: number;
  restricted?: boolean;
}): Buffer {
  const { area } = stringArea({ path: o.path, argv: o.argv, env: o.env ?? [], apple: o.apple ?? APPLE });
  const argc = Buffer.alloc(4);
  argc.writeInt32LE(o.argc ?? o.argv.length);
  return Buffer.concat([argc, o.restricted ? omitEnv(area, o.argc ?? o.argv.length) : area]);
}

// what a recent macOS appends after the environment
const APPLE = [
  "ptr_munge=",
  "main_stack=",
  "executable_file=0x1a01000009,0x5a4f3",
  "dyld_file=0x1a01000009,0xfffffff0",
  "th_port=0x103",
];
const PATH = "/bin/sleep"; // 10 bytes + NUL: 5 padding NULs before argv

d(`KERN_PROCARGS2 parser on xnu-shaped buffers${suffix}`, () => {
  it("normal: argv exact, requested keys only, first occurrence wins, kernel strings after the environment ignored", () => {
    const buf = procargs2({
      path: PATH,
      argv: ["sleep", "30", "with space"],
      env: ["A=1", "KEY=v=x", "KEY=second", "OPENCLAW_ACPX_LEASE_ID=L1"],
    });
    const p = parse(buf, ["KEY", "OPENCLAW_ACPX_LEASE_ID", "ABSENT"]);
    expect(p).toEqual({
      hasArgv: true,
      argv: ["sleep", "30", "with space"],
      envReadable: true,
      env: [
        ["KEY", "v=x"],
        ["OPENCLAW_ACPX_LEASE_ID", "L1"],
      ],
    });
  });

  it("env withheld (the kernel cut the answer right after argv): argv known, environment unreadable, never 'keys absent'", () => {
    const full = procargs2({ path: PATH, argv: ["sleep", "30"], env: ["OPENCLAW_ACPX_LEASE_ID=L1"] });
    const cut = procargs2({ path: PATH, argv: ["sleep", "30"], env: ["OPENCLAW_ACPX_LEASE_ID=L1"], restricted: true });
    expect(cut.length).toBeLessThan(full.length);
    expect(parse(cut, ["OPENCLAW_ACPX_LEASE_ID"])).toEqual({
      hasArgv: true,
      argv: ["sleep", "30"],
      envReadable: false,
      env: [],
    });
    // and with no environment at all the normal answer still carries the kernel's strings: readable, absent
    const empty = procargs2({ path: PATH, argv: ["sleep"], env: [] });
    expect(parse(empty, ["OPENCLAW_ACPX_LEASE_ID"])).toEqual({
      hasArgv: true,
      argv: ["sleep"],
      envReadable: true,
      env: [],
    });
  });

  it("empty argv[0] is an argument, not padding (argv starts at 4 + roundup(len(path) + 1, 8))", () => {
    const buf = procargs2({ path: PATH, argv: ["", "x", ""], env: ["K=v"] });
    expect(parse(buf, ["K"])).toEqual({ hasArgv: true, argv: ["", "x", ""], envReadable: true, env: [["K", "v"]] });
    // a path whose NUL ends exactly on a word boundary has no padding at all
    const path7 = "/a/b/cd";
    expect(parse(procargs2({ path: path7, argv: ["", "y"], env: ["K=w"] }), ["K"])).toMatchObject({
      argv: ["", "y"],
      env: [["K", "w"]],
    });
  });

  it("empty argv[0] with the environment withheld: the kernel's cut runs one string long, still unreadable", () => {
    // xnu counts argv[0]'s NUL as path padding, so its cut keeps env[0] too
    const cut = procargs2({ path: PATH, argv: ["", "x"], env: ["OPENCLAW_ACPX_LEASE_ID=L1", "B=2"], restricted: true });
    expect(cut.toString("latin1")).toContain("OPENCLAW_ACPX_LEASE_ID=L1");
    expect(parse(cut, ["OPENCLAW_ACPX_LEASE_ID"])).toEqual({
      hasArgv: true,
      argv: ["", "x"],
      envReadable: false,
      env: [],
    });
    // with no environment the overrun is a padding NUL: same answer
    const bare = procargs2({ path: PATH, argv: ["", "x"], env: [], restricted: true });
    expect(parse(bare, ["A"])).toEqual({ hasArgv: true, argv: ["", "x"], envReadable: false, env: [] });
  });

  it("truncated tail: an answer that fills the buffer is unknown (xnu keeps the tail of the strings)", () => {
    const buf = procargs2({ path: PATH, argv: ["sleep", "a".repeat(200)], env: ["K=v"] });
    expect(parse(buf, ["K"], buf.length)).toEqual({ hasArgv: false, argv: [], envReadable: false, env: [] });
    // what the kernel returns for a buffer smaller than the strings: argc, then the last bytes
    const capacity = 64;
    const tail = Buffer.concat([buf.subarray(0, 4), buf.subarray(buf.length - (capacity - 4))]);
    expect(parse(tail, ["K"], capacity)).toEqual({ hasArgv: false, argv: [], envReadable: false, env: [] });
  });

  it("fewer than argc strings: unknown, never a guessed argv", () => {
    // argc says 5, the answer holds two strings after the padded path
    const buf = Buffer.concat([procargs2({ path: PATH, argv: [] }).subarray(0, 4 + 16), str("sleep"), str("30")]);
    buf.writeInt32LE(5, 0);
    expect(parse(buf, ["K"])).toEqual({ hasArgv: false, argv: [], envReadable: false, env: [] });
    // an argv string without its NUL at the very end is just as incomplete
    const chopped = procargs2({ path: PATH, argv: ["sleep", "30"], restricted: true }).subarray(0, -1);
    expect(parse(chopped)).toMatchObject({ hasArgv: false, envReadable: false });
  });

  it("trailing kernel strings: they make the environment readable, and a key only they carry is not ours to ask for", () => {
    const buf = procargs2({ path: PATH, argv: ["sleep"], env: ["A=1"], apple: ["ptr_munge=", "main_stack=0x7ff"] });
    expect(parse(buf, ["A", "B"])).toEqual({ hasArgv: true, argv: ["sleep"], envReadable: true, env: [["A", "1"]] });
  });

  it("an empty env entry (and one without '=') is skipped; keys after it are still found", () => {
    const buf = procargs2({ path: PATH, argv: ["sleep"], env: ["A=1", "", "NOEQ", "=lead", "B=2", "E="] });
    expect(parse(buf, ["B", "NOEQ", "E", "A"])).toEqual({
      hasArgv: true,
      argv: ["sleep"],
      envReadable: true,
      env: [
        ["A", "1"],
        ["B", "2"],
        ["E", ""],
      ],
    });
  });

  it("the no-read-procargs entitlement's synthetic answer: argv[0] = the path, environment withheld", () => {
    for (const path of [PATH, "/a/b/cd", "/usr/libexec/x"]) {
      const argc = Buffer.alloc(4);
      argc.writeInt32LE(1);
      const buf = Buffer.concat([argc, str(path), nul, str(path)]);
      expect(parse(buf, ["K"]), path).toEqual({ hasArgv: true, argv: [path], envReadable: false, env: [] });
    }
  });

  it("argc 0, a negative argc, a padding byte that is not NUL, or a short buffer: argc 0 parses, the rest are unknown", () => {
    expect(parse(procargs2({ path: PATH, argv: [], env: ["K=v"] }), ["K"])).toEqual({
      hasArgv: true,
      argv: [],
      envReadable: true,
      env: [["K", "v"]],
    });
    const neg = procargs2({ path: PATH, argv: ["x"] });
    neg.writeInt32LE(-1, 0);
    expect(parse(neg)).toMatchObject({ hasArgv: false, envReadable: false });
    const dirty = procargs2({ path: PATH, argv: ["x"], env: ["K=v"] });
    dirty[4 + PATH.length + 2] = 0x41; // inside the padding
    expect(parse(dirty, ["K"])).toMatchObject({ hasArgv: false, envReadable: false });
    expect(parse(Buffer.from([1, 0]))).toMatchObject({ hasArgv: false, envReadable: false });
    expect(parse(Buffer.concat([Buffer.from([1, 0, 0, 0]), Buffer.from("/no/nul")]))).toMatchObject({
      hasArgv: false,
      envReadable: false,
    });
  });
});

d(`proc_bsdinfo record mapping${suffix}`, () => {
  const run = (...a: Array<number | string>) => {
    const r = spawnSync(harness.path!, ["bsdinfo", ...a.map(String)], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`harness failed: ${r.stderr}`);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  it("maps ids, the effective uid, the ps state letter and microseconds since the epoch", () => {
    expect(run(412, 1, 400, 501, 0, 3, 1764477890, 123456, 400)).toEqual({
      pid: 412,
      ppid: 1,
      pgid: 400,
      sid: 400,
      uid: 501,
      state: "S",
      flags: 0,
      start: 1764477890123456,
    });
    const letters = [1, 2, 3, 4, 5, 0, 9].map((st) => run(1, 0, 1, 0, 0, st, 1, 0, -1).state);
    expect(letters).toEqual(["R", "R", "S", "T", "Z", "?", "?"]);
    expect(run(1, 0, 1, 0, 0, 2, 1, 0, -1).sid).toBe(-1);
  });
});
