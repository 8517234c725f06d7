import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  createProcfsFacts,
  hidepidOf,
  parseCmdline,
  parseEnviron,
  parseStat,
  parseStatus,
  procMountOptions,
} from "../../src/facts/procfs.js";
import { createPsFacts, parseLstart, parsePsLine, parsePsOutput, psColumns } from "../../src/facts/ps.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import type { ProcessInfo } from "../../src/facts/types.js";

/** A status text as the kernel writes it (the lines this project reads, among others). */
function status(o: { tgid: number; pid: number; uid?: string; threads?: number }): string {
  return [
    "Name:\tx",
    "Umask:\t0022",
    "State:\tS (sleeping)",
    `Tgid:\t${o.tgid}`,
    "Ngid:\t0",
    `Pid:\t${o.pid}`,
    "PPid:\t1",
    "TracerPid:\t0",
    `Uid:\t${o.uid ?? "0\t0\t0\t0"}`,
    "Gid:\t0\t0\t0\t0",
    "FDSize:\t64",
    "Groups:\t0 1 2",
    `Threads:\t${o.threads ?? 1}`,
    "SigQ:\t0/31366",
    "",
  ].join("\n");
}

describe("parseStatus", () => {
  it("reads Tgid, real and effective uid, and Threads", () => {
    expect(parseStatus(status({ tgid: 10, pid: 12, uid: "1000\t0\t0\t0", threads: 3 }))).toEqual({
      tgid: 10,
      realUid: 1000,
      effectiveUid: 0,
      threads: 3,
    });
  });
  it("leaves out what is missing or malformed", () => {
    expect(parseStatus("Name:\tx\nUid:\t1\t2\nTgid:\tabc\n")).toEqual({});
    expect(parseStatus("")).toEqual({});
  });
});

/** A stat line as the kernel writes it: fields 3..22 then a tail. */
function statLine(
  pid: number,
  comm: string,
  o: { state?: string; ppid?: number; pgid?: number; sid?: number; start?: string; flags?: number } = {},
): string {
  const f = [
    o.state ?? "S",
    o.ppid ?? 1,
    o.pgid ?? pid,
    o.sid ?? pid,
    34816,
    pid,
    o.flags ?? 4194560,
    100,
    0,
    0,
    0,
    1,
    2,
    0,
    0,
    20,
    0,
    1,
    0,
    o.start ?? "123456",
  ];
  return `${pid} (${comm}) ${f.join(" ")} 1000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n`;
}

describe("parseStat", () => {
  const cases: Array<[string, string]> = [
    ["plain", "sleep"],
    ["close-open paren", "x) (y"],
    ["only parens", ")))((("],
    ["spaces", "a b  c"],
    ["newline", "a\nb"],
    ["empty", ""],
    ["fake fields", "x) S 99 99 99 ("],
    ["unicode", "δ☃"],
  ];
  it.each(cases)("comm %s is delimited by the last ')'", (_name, comm) => {
    const p = parseStat(statLine(4242, comm, { ppid: 7, pgid: 8, sid: 9, state: "Z", start: "987654321" }));
    expect(p).toEqual({
      pid: 4242,
      comm,
      state: "Z",
      ppid: 7,
      pgid: 8,
      sid: 9,
      flags: 4194560,
      startTime: "987654321",
    });
  });

  it("keeps start times above 2^53 exact as strings", () => {
    expect(parseStat(statLine(1, "init", { start: "9007199254740993" }))?.startTime).toBe("9007199254740993");
  });

  it("normalises leading zeros like the native double does", () => {
    expect(parseStat(statLine(1, "init", { start: "000123" }))?.startTime).toBe("123");
  });

  it("parses ppid 0 (init, kthreadd)", () => {
    expect(parseStat(statLine(2, "kthreadd", { ppid: 0, pgid: 0, sid: 0 }))).toMatchObject({
      ppid: 0,
      pgid: 0,
      sid: 0,
    });
  });

  const full = statLine(77, "ok");
  const bad: Array<[string, string]> = [
    ["empty", ""],
    ["no parens", "77 ok S 1 2 3"],
    ["no close paren", "77 (ok S 1 2 3 4 5"],
    ["truncated before start time", full.slice(0, full.indexOf(" 123456"))],
    ["truncated right after comm", "77 (ok)"],
    ["truncated mid comm", "77 (o"],
    ["non-numeric pid", "x7 (ok) S 1 2 3"],
    ["non-numeric ppid", statLine(77, "ok").replace(" S 1 ", " S one ")],
    ["bad state", statLine(77, "ok", { state: "SS" })],
    ["non-numeric start", statLine(77, "ok", { start: "12a" })],
    ["no space after paren", "77 (ok)S 1 77 77 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5"],
  ];
  it.each(bad)("rejects %s with null", (_name, text) => {
    expect(parseStat(text)).toBeNull();
  });
});

describe("parseCmdline", () => {
  it("splits on NUL and drops the terminator", () => {
    expect(parseCmdline(Buffer.from("node\0-e\0a b\0\0x\0"))).toEqual(["node", "-e", "a b", "", "x"]);
  });
  it("keeps a last argument without terminator (rewritten argv area)", () => {
    expect(parseCmdline(Buffer.from("nginx: worker process"))).toEqual(["nginx: worker process"]);
  });
  it("empty cmdline is an empty argv", () => {
    expect(parseCmdline(Buffer.alloc(0))).toEqual([]);
  });
  it("a single empty argument", () => {
    expect(parseCmdline(Buffer.from("\0"))).toEqual([""]);
  });
});

describe("parseEnviron", () => {
  const env = Buffer.from("A=1\0B=x=y\0EMPTY=\0NOEQ\0A=second\0LAST=z");
  it("returns only requested keys, first occurrence, values may hold '='", () => {
    expect(parseEnviron(env, ["A", "B", "EMPTY", "LAST", "MISSING"])).toEqual({
      A: "1",
      B: "x=y",
      EMPTY: "",
      LAST: "z",
      MISSING: null,
    });
  });
  it("never returns keys that were not asked for", () => {
    expect(Object.keys(parseEnviron(env, ["B"]))).toEqual(["B"]);
  });
  it("an entry without '=' is not a key", () => {
    expect(parseEnviron(env, ["NOEQ"])).toEqual({ NOEQ: null });
  });
  it("no keys → empty record", () => {
    expect(parseEnviron(env, [])).toEqual({});
  });
});

describe("proc mount options", () => {
  const mounts = "sysfs /sys sysfs rw 0 0\nproc /proc proc rw,nosuid,relatime 0 0\n";
  it("finds /proc options", () => {
    expect(procMountOptions(mounts)).toEqual(["rw", "nosuid", "relatime"]);
    expect(hidepidOf(procMountOptions(mounts)!)).toBeNull();
  });
  it("the last /proc mount wins and hidepid is reported", () => {
    const m = mounts + "proc /proc proc rw,relatime,hidepid=invisible,gid=10 0 0\n";
    expect(hidepidOf(procMountOptions(m)!)).toBe("invisible");
    expect(hidepidOf(["hidepid=2"])).toBe("2");
    expect(hidepidOf(["hidepid=0"])).toBeNull();
  });
  it("no /proc mount → null", () => {
    expect(procMountOptions("sysfs /sys sysfs rw 0 0\nproc /mnt/proc proc rw 0 0\n")).toBeNull();
  });
});

describe("ps parsing", () => {
  it("lstart → epoch seconds (UTC), day may be space-padded", () => {
    expect(parseLstart(["Mon", "Nov", "30", "04:24:50", "2026"])).toBe(
      String(Date.UTC(2026, 10, 30, 4, 24, 50) / 1000),
    );
    expect(parseLstart("Tue Mar  3 00:00:01 2026".split(/\s+/))).toBe(String(Date.UTC(2026, 2, 3, 0, 0, 1) / 1000));
  });
  it.each([
    [["Mon", "Feb", "31", "00:00:00", "2026"]],
    [["Mon", "Foo", "1", "00:00:00", "2026"]],
    [["Xyz", "Feb", "1", "00:00:00", "2026"]],
    [["Mon", "Feb", "1", "0:00:00", "2026"]],
    [["Mon", "Feb", "1", "00:00:00"]],
  ])("bad lstart %j → null", (tokens) => {
    expect(parseLstart(tokens)).toBeNull();
  });

  it("columns: sid everywhere but macOS (whose sess is a pointer)", () => {
    expect(psColumns("linux")).toEqual(["pid", "ppid", "pgid", "sid", "uid", "stat", "lstart"]);
    expect(psColumns("freebsd")).toContain("sid");
    expect(psColumns("darwin")).toEqual(["pid", "ppid", "pgid", "uid", "stat", "lstart"]);
  });

  it("parses a procps line", () => {
    expect(parsePsLine("  412     1   412   412  1000 Ss+  Mon Nov 30 04:24:50 2026", true)).toEqual({
      pid: 412,
      ppid: 1,
      pgid: 412,
      sid: 412,
      uid: 1000,
      state: "S",
      startTime: String(Date.UTC(2026, 10, 30, 4, 24, 50) / 1000),
      kernelThread: false,
      zombieLeader: false,
    });
  });
  it("parses a macOS line (no sid → -1, unknown)", () => {
    expect(parsePsLine("  412     1   412   501 Z    Mon Nov  2 04:24:50 2026", false)).toMatchObject({
      pid: 412,
      sid: -1,
      uid: 501,
      state: "Z",
    });
  });
  it.each([
    ["too few columns", "412 1 412 412 S Mon Nov 30 04:24:50 2026"],
    ["text pid", "abc 1 412 412 0 S Mon Nov 30 04:24:50 2026"],
    ["bad stat", "412 1 412 412 0 - Mon Nov 30 04:24:50 2026"],
    ["pid 0", "0 0 0 0 0 S Mon Nov 30 04:24:50 2026"],
    ["truncated lstart", "412 1 412 412 0 S Mon Nov 30"],
  ])("rejects %s", (_n, line) => {
    expect(parsePsLine(line, true)).toBeNull();
  });
  it("output: blank lines and pid 0 (macOS kernel_task) skipped", () => {
    const out =
      "\n  0 0 0 0 0 Ss Mon Nov 30 04:24:12 2026\n  1 0 1 1 0 Ss Mon Nov 30 04:24:12 2026\n\n  2 0 0 0 0 S Mon Nov 30 04:24:12 2026\n";
    expect(parsePsOutput(out, true).map((p) => p.pid)).toEqual([1, 2]);
  });
  it("Linux: kthreadd and its children are kernel threads; 'Z…l' is a zombie leader; dead ('X') rows are gone", () => {
    const out = [
      "  2 0 0 0 0 S Mon Nov 30 04:24:12 2026",
      " 17 2 0 0 0 I< Mon Nov 30 04:24:12 2026",
      " 50 1 50 50 0 Zl Mon Nov 30 04:24:12 2026",
      " 51 1 51 51 0 Z Mon Nov 30 04:24:12 2026",
      " 52 0 -1 -1 0 X Mon Nov 30 04:24:12 2026",
    ].join("\n");
    const rows = parsePsOutput(out, true, true);
    expect(rows.map((p) => [p.pid, p.kernelThread, p.zombieLeader])).toEqual([
      [2, true, false],
      [17, true, false],
      [50, false, true],
      [51, false, false],
    ]);
    // elsewhere ps says nothing about either: false, not guessed from Linux numbering
    expect(parsePsOutput(out, true, false).every((p) => p.kernelThread === false && p.zombieLeader === false)).toBe(
      true,
    );
  });
  it("output: a line that cannot be parsed throws instead of silently dropping a process", () => {
    const out = "  1 0 1 1 0 Ss Mon Nov 30 04:24:12 2026\ngarbage\n  2 0 0 0 0 S Mon Nov 30 04:24:12 2026\n";
    expect(() => parsePsOutput(out, true)).toThrow(/could not be parsed.*garbage/);
  });
});

describe("procfs over a fixture /proc tree (unreadable and odd entries)", () => {
  async function tree(): Promise<string> {
    const root = await mkdtemp(join(tmpdir(), "proclease-procfix-"));
    const proc = async (pid: number, files: Record<string, string>, links: Record<string, string> = {}) => {
      await mkdir(join(root, String(pid)));
      for (const [f, v] of Object.entries(files)) await writeFile(join(root, String(pid), f), v);
      for (const [f, v] of Object.entries(links)) await symlink(v, join(root, String(pid), f));
    };
    await proc(
      100,
      {
        stat: statLine(100, "x) (y", { ppid: 1, pgid: 100, sid: 100, start: "5000" }),
        cmdline: "/opt/x) (y\0--flag\0",
      },
      { exe: "/opt/x) (y (deleted)" },
    );
    await proc(200, {
      stat: statLine(200, "ok", { ppid: 100, pgid: 100, sid: 100, start: "6000" }),
      cmdline: "",
      environ: "K=v\0",
    });
    await proc(300, { stat: "300 (trunc) S 1 3" }); // half-written: skipped, never half-true
    // a dead task under fork churn: ppid 0, pgid -1, sid -1 (seen on real walks)
    await proc(400, { stat: statLine(400, "dying", { state: "X", ppid: 0, pgid: -1, sid: -1, start: "7000" }) });
    // a thread: /proc/TID answers, but its Tgid is another pid
    await proc(501, {
      stat: statLine(501, "worker", { ppid: 1, pgid: 500, sid: 500 }),
      status: status({ tgid: 500, pid: 501 }),
      cmdline: "w\0",
    });
    // a zombie leader with a live thread, and a non-dumpable process (real uid 7, effective 8)
    await proc(600, { stat: statLine(600, "zl", { state: "Z" }), status: status({ tgid: 600, pid: 600, threads: 2 }) });
    // its threads: the leader (Z) and one that runs on (S, no PF_EXITING): a live process
    for (const [tid, state] of [
      [600, "Z"],
      [6001, "S"],
    ] as const) {
      await mkdir(join(root, "600", "task", String(tid)), { recursive: true });
      await writeFile(join(root, "600", "task", String(tid), "stat"), statLine(tid, "zl", { state }));
    }
    // a dying multi-threaded process: "Threads: 2", but its other thread is inside exit(2) too (PF_EXITING)
    await proc(602, {
      stat: statLine(602, "dying", { state: "Z" }),
      status: status({ tgid: 602, pid: 602, threads: 2 }),
    });
    for (const [tid, state, flags] of [
      [602, "Z", 4194564],
      [6021, "R", 4194564],
    ] as const) {
      await mkdir(join(root, "602", "task", String(tid)), { recursive: true });
      await writeFile(join(root, "602", "task", String(tid), "stat"), statLine(tid, "dying", { state, flags }));
    }
    await proc(601, { stat: statLine(601, "z", { state: "Z" }), status: status({ tgid: 601, pid: 601, threads: 1 }) });
    await proc(700, {
      stat: statLine(700, "nd"),
      status: status({ tgid: 700, pid: 700, uid: "7\t8\t8\t8" }),
      cmdline: "nd\0",
    });
    // a kernel thread
    await proc(800, { stat: statLine(800, "kworker/0:1", { ppid: 2, pgid: 0, sid: 0, flags: 0x00208040 }) });
    await mkdir(join(root, "self", "ns"), { recursive: true });
    await symlink("pid:[4026531836]", join(root, "self", "ns", "pid"));
    await mkdir(join(root, "sys", "kernel", "random"), { recursive: true });
    await writeFile(join(root, "sys", "kernel", "random", "boot_id"), "b00t-1d\n");
    return root;
  }

  it("snapshot skips malformed entries and non-pid names", async () => {
    const root = await tree();
    try {
      const snap = await createProcfsFacts({ root }).snapshot();
      // 400 is dead ("X"): gone. 501 is listed here only because a fixture has no
      // readdir semantics: the real /proc lists thread-group leaders only.
      expect([...snap.processes.keys()]).toEqual([100, 200, 501, 600, 601, 602, 700, 800]);
      expect(snap.processes.get(600)).toMatchObject({ state: "Z", zombieLeader: true });
      expect(snap.processes.get(601)).toMatchObject({ state: "Z", zombieLeader: false });
      expect(snap.processes.get(602)).toMatchObject({ state: "Z", zombieLeader: false });
      expect(snap.processes.get(800)).toMatchObject({ kernelThread: true });
      expect(snap.processes.get(100)).toMatchObject({ kernelThread: false, zombieLeader: false });
      // the stat owner; a root-owned one is asked of its pid directory (here: the fixture's owner)
      expect(snap.processes.get(700)?.uid).toBe(process.geteuid!());
      expect(snap.groupMembers(-1)).toEqual([]);
      expect(snap.childrenOf(100).map((p) => p.pid)).toEqual([200]);
      expect(snap.groupMembers(100).map((p) => p.pid)).toEqual([100, 200]);
      expect(snap.processes.get(100)).toMatchObject({
        ppid: 1,
        pgid: 100,
        sid: 100,
        state: "S",
        startTime: "5000",
        uid: process.getuid!(),
      });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("inspect: deleted exe kept verbatim, missing environ = unreadable, missing exe = null, truncated stat = null", async () => {
    const root = await tree();
    try {
      const f = createProcfsFacts({ root });
      const a = await f.inspect(100, { envKeys: ["K"] });
      expect(a).toMatchObject({
        pid: 100,
        exePath: "/opt/x) (y (deleted)",
        argv: ["/opt/x) (y", "--flag"],
        env: { K: null },
        envReadable: false,
        bootId: "b00t-1d",
        pidNamespace: "pid:[4026531836]",
      });
      const b = await f.inspect(200, { envKeys: ["K", "Z"] });
      expect(b).toMatchObject({ exePath: null, argv: [], env: { K: "v", Z: null }, envReadable: true });
      expect(await f.inspect(300)).toBeNull();
      expect(await f.inspect(400)).toBeNull(); // dead ("X") = gone
      expect(await f.inspect(501)).toBeNull(); // a thread id (Tgid 500) is not a process
      expect(await f.inspect(700)).toMatchObject({ uid: 8, realUid: 7 });
      expect(await f.inspect(600)).toMatchObject({ state: "Z", zombieLeader: true });
      const noStatus = await f.inspect(200);
      expect(noStatus?.uid).toBe(process.geteuid!()); // no status: the stat owner, and no realUid
      expect(noStatus).not.toHaveProperty("realUid");
      expect(await f.inspect(999)).toBeNull();
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe("buildSnapshot (every backend's index)", () => {
  const info = (pid: number, ppid: number, pgid: number, state = "S"): ProcessInfo => ({
    pid,
    ppid,
    pgid,
    sid: pgid,
    uid: 0,
    state,
    startTime: "1",
  });
  it("drops dead ('X') records and never indexes a ppid or pgid of -1", () => {
    const snap = buildSnapshot(0, [info(10, 1, 10), info(11, 0, -1, "X"), info(12, -1, -1), info(13, 10, 10, "Z")]);
    expect([...snap.processes.keys()]).toEqual([10, 12, 13]);
    expect(snap.childrenOf(-1)).toEqual([]);
    expect(snap.groupMembers(-1)).toEqual([]);
    expect(snap.childrenOf(0)).toEqual([]);
    expect(snap.childrenOf(10).map((p) => p.pid)).toEqual([13]);
    expect(snap.groupMembers(10).map((p) => p.pid)).toEqual([10, 13]);
  });
});

describe("ps backend over a ps that misbehaves (fail closed: an unreadable table is an error, never 'gone')", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  async function fakePs(script: string): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "proclease-fakeps-"));
    dirs.push(dir);
    const bin = join(dir, "ps");
    await writeFile(bin, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    return bin;
  }
  it("an empty table from exit 0 rejects the snapshot", async () => {
    const facts = createPsFacts({ bin: await fakePs("exit 0"), platform: "linux" });
    await expect(facts.snapshot()).rejects.toThrow(/no processes/);
  });
  it("a garbled row rejects the snapshot", async () => {
    const facts = createPsFacts({
      bin: await fakePs("echo '  1 0 1 1 0 Ss Mon Nov 30 04:24:12 2026'; echo 'ps: warning: something'"),
      platform: "linux",
    });
    await expect(facts.snapshot()).rejects.toThrow(/could not be parsed/);
  });
  it("inspect: exit 1 without the row is 'gone' (null); exit 0 without the row is an error", async () => {
    expect(await createPsFacts({ bin: await fakePs("exit 1"), platform: "linux" }).inspect(4242)).toBeNull();
    await expect(createPsFacts({ bin: await fakePs("exit 0"), platform: "linux" }).inspect(4242)).rejects.toThrow(
      /no row/,
    );
  });
});
