import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { PtyUnavailableError } from "../../src/supervisor/adapters/pty.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import type { ManagedRun } from "../../src/supervisor/shared/types.js";
import { isAlive, killQuietly, matcher, waitFor } from "./helpers.js";

const runs: ManagedRun[] = [];
const pids = new Set<number>();
afterEach(() => {
  for (const r of runs.splice(0)) r.cancel();
  killQuietly(pids);
  pids.clear();
});

const base = { sessionId: "s", backendId: "t" } as const;

describe("PTY runs", () => {
  it("forwards a literal ptyCommand (quotes, $, unicode) to /bin/sh -c exactly", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const cmd = `printf '%s|%s|%s\\n' "a  b" '$HOME' "ünï€ 🐚"; echo "sum=$((40+2))"; sleep 30`;
    const out = matcher();
    const run = await sup.spawn({ ...base, mode: "pty", ptyCommand: cmd, onStdout: (c) => out.push(c) });
    runs.push(run);
    pids.add(run.pid!);
    await out.waitFor(/sum=42/);
    // the shell's own argv is the command, byte for byte: nothing re-quoted or re-joined
    const argv = readFileSync(`/proc/${run.pid}/cmdline`, "utf8").split("\0").slice(0, -1);
    expect(argv).toEqual(["/bin/sh", "-c", cmd]);
    expect(out.text).toContain("a  b|$HOME|ünï€ 🐚");
    run.cancel();
    const exit = await run.wait();
    expect(exit.reason).toBe("manual-cancel");
    expect(exit.stdout).toContain("sum=42");
    expect(isAlive(run.pid!)).toBe(false);
  });

  it("rejects an empty or blank ptyCommand and leaves no live record", async () => {
    const sup = createProcessSupervisor();
    await expect(sup.spawn({ ...base, mode: "pty", ptyCommand: "", runId: "empty" })).rejects.toThrow(TypeError);
    await expect(sup.spawn({ ...base, mode: "pty", ptyCommand: "  \n\t", runId: "blank" })).rejects.toThrow(
      /ptyCommand/,
    );
    expect(sup.getRecord("empty")).toBeUndefined();
    expect(sup.listRecords().filter((r) => r.state !== "exited")).toEqual([]);
  });

  it("stdin.end() sends EOT: a PTY cat sees end of input and exits 0", async () => {
    const sup = createProcessSupervisor();
    const out = matcher();
    const run = await sup.spawn({
      ...base,
      mode: "pty",
      ptyCommand: "stty -echo; echo ready; cat",
      onStdout: (c) => out.push(c),
    });
    runs.push(run);
    await out.waitFor(/ready/);
    run.stdin!.write("hello\r");
    await out.waitFor(/hello/);
    run.stdin!.end();
    expect(await run.wait()).toMatchObject({ reason: "exit", exitCode: 0 });
  });

  it("cancel is a tree kill: the shell and what it started are gone", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const out = matcher();
    const run = await sup.spawn({
      ...base,
      mode: "pty",
      ptyCommand: `sh -c 'trap "" TERM HUP; echo inner $$; while :; do sleep 1; done' & wait`,
      onStdout: (c) => out.push(c),
    });
    runs.push(run);
    const inner = Number((await out.waitFor(/inner (\d+)/))[1]);
    pids.add(inner);
    run.cancel();
    await run.wait();
    expect(isAlive(run.pid!)).toBe(false);
    await waitFor(() => !isAlive(inner), 5000);
  });

  it("without node-pty a PTY spawn rejects with a clear error and child mode still works", async () => {
    const sup = createProcessSupervisor({
      loadPty: () => Promise.reject(new Error("Cannot find package 'node-pty'")),
    });
    const err = await sup.spawn({ ...base, mode: "pty", ptyCommand: "echo hi", runId: "p1" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PtyUnavailableError);
    expect(String((err as Error).message)).toMatch(/node-pty.*child mode still works/);
    expect(sup.getRecord("p1")).toMatchObject({ state: "exited", terminationReason: "spawn-error" });
    const child = await sup.spawn({ ...base, mode: "child", argv: ["echo", "still fine"] });
    expect((await child.wait()).stdout).toBe("still fine\n");
  });
});
