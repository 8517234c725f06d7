/**
 * What the CLI prints from a process or a record is escaped for the
 * operator's terminal (src/cli/shared/io.ts printable): a real process whose comm is
 * an escape sequence (it runs through a symlink of that name, as an agent
 * can name any binary it runs) under a lease whose record holds a hostile
 * session key, shown by `status`, `leases`, `explain`, `ps` and `inspect`
 * (`node dist/cli/main.js`, as an operator runs it). `--json` stays exact.
 */
import { execFile, spawn } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { printable, printableDeep } from "../../src/cli/shared/io.js";
import { createRunLeases } from "../../src/supervisor/hold/durability.js";
import { cleanupAll, GRACE_MS, tempStateDir, trackChild, trackLease, waitFor } from "../acpx/controller-helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
// what a terminal would act on: C0 but LF, DEL, C1, bidi controls, line/paragraph separators
const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/u;
// 9 bytes: comm holds up to 15 (red text, then a CR that would let the rest overwrite the line)
const HOSTILE_COMM = "\x1b[31mred\r";
// a title change (OSC), a CR, a C1 CSI "clear screen", a right-to-left override and a forged row
const HOSTILE_KEY = "supervisor:k\x1b]0;pwned\x07\r\u009b2J\u202eevil\nLEASE forged";
const ESCAPED_KEY = "supervisor:k\\x1b]0;pwned\\x07\\r\\x9b2J\\u202eevil\\nLEASE forged";
const ESCAPED_COMM = "\\x1b[31mred\\r";

afterAll(() => cleanupAll());

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { timeout: 30_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe("printable", () => {
  it("escapes controls, C1, bidi and separators visibly; keeps printable text and backslashes; idempotent", () => {
    expect(printable("a\x1b[2Jb\r\n\t\x00\x7f")).toBe("a\\x1b[2Jb\\r\\n\\t\\x00\\x7f");
    expect(printable("\u009b31m\u0085")).toBe("\\x9b31m\\x85");
    expect(printable("x\u202eevil\u2066\u200b\u2028")).toBe("x\\u202eevil\\u2066\\u200b\\u2028");
    expect(printable("lone \ud800 surrogate")).toBe("lone \\ud800 surrogate");
    expect(printable("agent:mañana:🙂 C:\\dir")).toBe("agent:mañana:🙂 C:\\dir");
    expect(printable(printable(HOSTILE_KEY))).toBe(printable(HOSTILE_KEY));
    expect(printable(HOSTILE_KEY)).toBe(ESCAPED_KEY);
  });

  it("printableDeep escapes every string of plain objects and arrays, and nothing else", () => {
    const at = new Date(0);
    expect(printableDeep({ a: ["\x1b", { b: "\r", n: 1, t: true, z: null }], at })).toEqual({
      a: ["\\x1b", { b: "\\r", n: 1, t: true, z: null }],
      at,
    });
  });
});

describe("the CLI's printers, on a hostile process and record", () => {
  it("status, leases, explain, ps and inspect print no raw control character; --json keeps the exact values", async () => {
    const stateDir = tempStateDir("cli-escape");
    const bin = join(stateDir, "bin");
    mkdirSync(bin);
    const link = join(bin, HOSTILE_COMM);
    symlinkSync("/usr/bin/sleep", link);
    // a leased run, as the process supervisor leases one, whose binary's name is the escape sequence
    const runs = createRunLeases({ stateDir, graceMs: GRACE_MS });
    const { leaseId, env } = await runs.open("escape", [link, "1000"]);
    trackLease(leaseId);
    const child = trackChild(
      spawn(link, ["1000"], { detached: true, stdio: "ignore", env: { ...process.env, ...env } }),
    );
    await runs.attach(leaseId, child.pid!);
    const commOf = (): string => readFileSync(`/proc/${child.pid}/comm`, "utf8").replace(/\n$/, "");
    expect(await waitFor(() => commOf() === HOSTILE_COMM, 5000)).toBeGreaterThanOrEqual(0);
    // a record tampered with (or written by a gateway that accepted any key): the key is hostile
    const file = join(stateDir, "acpx", "leases", `${leaseId}.json`);
    const record = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
    writeFileSync(file, JSON.stringify({ ...record, sessionKey: HOSTILE_KEY }));

    const outputs = {
      status: await cli(["status", "--state-dir", stateDir]),
      leases: await cli(["leases", "--state-dir", stateDir]),
      explain: await cli(["explain", leaseId, "--state-dir", stateDir]),
      ps: await cli(["ps"]),
      inspect: await cli(["inspect", String(child.pid)]),
    };
    for (const [name, r] of Object.entries(outputs)) {
      expect([name, r.code, r.stderr]).toEqual([name, 0, ""]);
      expect([name, RAW_CONTROL.exec(r.stdout)?.[0]]).toEqual([name, undefined]);
    }
    for (const name of ["status", "leases", "explain"] as const)
      expect([name, outputs[name].stdout.includes(ESCAPED_KEY)]).toEqual([name, true]);
    for (const name of ["status", "ps", "inspect"] as const)
      expect([name, outputs[name].stdout.includes(ESCAPED_COMM)]).toEqual([name, true]);
    // the forged row stays inside the key's cell: no line of the listing starts with it
    expect(outputs.leases.stdout.split("\n").some((l) => l.startsWith("LEASE forged"))).toBe(false);

    const json = JSON.parse((await cli(["status", "--json", "--state-dir", stateDir])).stdout) as {
      leases: { lease: { sessionKey: string }; processes: { comm: string | null }[] }[];
    };
    expect(json.leases[0]!.lease.sessionKey).toBe(HOSTILE_KEY);
    expect(json.leases[0]!.processes.map((p) => p.comm)).toContain(HOSTILE_COMM);
  });
});
