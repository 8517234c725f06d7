/**
 * The terminal holder (native/terminal_holder_linux.c), run directly: what
 * it keeps of a terminal's output is bounded on disk and is exactly what
 * terminal/output would answer (OutputTail's tail); it writes the command's
 * exit status; and it ends the command once the session's wrapper (here a
 * stand-in process) is gone, or is not the process it was told of.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OutputTail } from "../../src/acpx/connection/client-terminal.js";
import { nativeAddonPath } from "../../src/facts/native.js";
import { readStatSync } from "../../src/facts/procfs.js";
import {
  filesOf,
  holderArgv,
  readOutput,
  readStatus,
  TERMINAL_HOLDER_FILE,
  type DurableTerminals,
} from "../../src/acpx/durable/terminals.js";
import { alive, tempStateDir, trackChild, trackPid, waitFor } from "./controller-helpers.js";

const addon = nativeAddonPath();
const holder = process.platform === "linux" && addon !== null ? join(addon, "..", TERMINAL_HOLDER_FILE) : null;
const d = holder !== null && existsSync(holder) ? describe : describe.skip;

function rig(label: string, limit: number) {
  const dir = tempStateDir(label);
  const dt: DurableTerminals = { dir, holderPath: holder!, graceMs: 300, reattachWithinMs: 1000 };
  const session = trackChild(spawn("sleep", ["600"], { stdio: "ignore" }));
  const files = filesOf(dir, "acp-terminal-t");
  const run = (command: string[], ticks?: string): ChildProcess =>
    trackChild(
      spawn(
        holder!,
        holderArgv(
          dt,
          files,
          limit,
          { pid: session.pid!, startTicks: ticks ?? readStatSync(session.pid!)!.startTime },
          command,
        ).slice(1),
        { stdio: "ignore" },
      ),
    );
  return { files, session, run };
}

const exitOf = (c: ChildProcess) =>
  new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once("exit", () => r())));

d("the terminal holder", () => {
  it("keeps at most twice the limit on disk, and the tail terminal/output would keep; then the exit status", async () => {
    const limit = 1000;
    const { files, session, run } = rig("holder-bound", limit);
    // 3 bytes, 2 bytes, 1 byte characters, in chunks of many sizes: cuts fall inside characters
    const script =
      "let s='';for(let i=0;i<4000;i++){s+=(i%3===0?'€':i%3===1?'é':'a');if(i%97===0){process.stdout.write(s);s='';}}process.stdout.write(s+'end');process.stderr.write('!');process.exit(3)";
    const h = run([process.execPath, "-e", script]);
    let biggest = 0;
    await waitFor(() => {
      if (existsSync(files.out)) biggest = Math.max(biggest, statSync(files.out).size);
      return existsSync(files.status);
    }, 20_000);
    await exitOf(h);
    expect(h.exitCode).toBe(3);
    expect(await readStatus(files.status)).toEqual({ exitCode: 3, signal: null });
    expect(statSync(files.out).size).toBeLessThanOrEqual(2 * limit + 1);
    // between an append and its cut the file may hold one read of the pipe (64 KiB at most) past twice the limit
    expect(biggest).toBeLessThanOrEqual(2 * limit + 65536);
    // the whole stream, as the gateway's OutputTail would have kept it (stdout then stderr: the order they were written)
    let all = "";
    for (let i = 0; i < 4000; i++) all += i % 3 === 0 ? "€" : i % 3 === 1 ? "é" : "a";
    const tail = new OutputTail(limit);
    tail.append(all + "end!");
    const got = await readOutput(files.out, limit);
    expect(got.text()).toBe(tail.text());
    expect(got.truncated).toBe(true);
    expect(readFileSync(files.out)[0]).toBe(0x31);
    session.kill("SIGKILL");
  });

  it("ends the command's group (TERM, grace, KILL) once the session's wrapper is gone", async () => {
    const { files, session, run } = rig("holder-session", 100);
    const h = run(["sh", "-c", "trap '' TERM; echo up; sleep 600 & wait; wait"]);
    await waitFor(() => existsSync(files.out) && readFileSync(files.out, "utf8").includes("up"), 10_000);
    expect(existsSync(files.status)).toBe(false);
    session.kill("SIGKILL");
    await exitOf(h);
    // the shell ignores TERM: the KILL after the grace ended it
    expect(await readStatus(files.status)).toEqual({ exitCode: null, signal: "SIGKILL" });
  });

  it("the KILL after the grace reaches the whole group even when its leader ended on TERM: a member that ignores TERM does not outlive the session", async () => {
    const { files, session, run } = rig("holder-group", 100);
    const pidFile = `${files.out}.member`;
    // the leader ends on TERM; its background member ignores TERM and holds no pipe of the holder's
    const h = run([
      "sh",
      "-c",
      `(trap '' TERM; exec sleep 600) </dev/null >/dev/null 2>&1 & echo $! > ${pidFile}; echo up; wait`,
    ]);
    await waitFor(() => existsSync(pidFile) && /^\d+\n$/.test(readFileSync(pidFile, "utf8")), 10_000);
    const member = Number(readFileSync(pidFile, "utf8"));
    trackPid(member);
    session.kill("SIGKILL");
    await exitOf(h);
    expect(await readStatus(files.status)).toEqual({ exitCode: null, signal: "SIGTERM" });
    expect(await waitFor(() => !alive(member), 5000), `member ${member} outlived its session`).not.toBe(-1);
  });

  it("a session pid that is not the process it was told of (a start time that differs) ends the command at once", async () => {
    const { files, session, run } = rig("holder-stale", 100);
    const h = run(["sleep", "600"], "1");
    await exitOf(h);
    expect(await readStatus(files.status)).toEqual({ exitCode: null, signal: "SIGTERM" });
    expect(alive(session.pid!)).toBe(true);
    session.kill("SIGKILL");
  });
});
