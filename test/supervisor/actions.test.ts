import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { AdoptError, createExecSessions, UnknownSessionError } from "../../src/supervisor/exec/actions.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import { fixture, isAlive, killQuietly, matcher, recordingSignaller, reusedPidFacts, waitFor } from "./helpers.js";

const pids = new Set<number>();
afterEach(() => {
  killQuietly(pids);
  pids.clear();
});

const base = { sessionId: "agent-session", backendId: "exec" } as const;

function setup(extra: Parameters<typeof createExecSessions>[0] extends infer O ? Partial<O> : never = {}) {
  const supervisor = createProcessSupervisor({ graceMs: 300 });
  const sessions = createExecSessions({ supervisor, graceMs: 300, ...extra });
  return { supervisor, sessions };
}

/** Polls until the accumulated output matches (each poll returns only what is new). */
async function pollUntil(sessions: ReturnType<typeof createExecSessions>, id: string, re: RegExp, timeoutMs = 10_000) {
  let text = "";
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const r = await sessions.poll(id, { timeoutMs: 500 });
    text += r.output;
    if (re.test(text)) return text;
    if (r.status === "exited") break;
  }
  throw new Error(`no ${re} in ${JSON.stringify(text)}`);
}

function runningSleep(shellPid: number): boolean {
  const kids = (() => {
    try {
      return readFileSync(`/proc/${shellPid}/task/${shellPid}/children`, "utf8").trim().split(" ").filter(Boolean);
    } catch {
      return [];
    }
  })();
  const pids = [shellPid, ...kids.map(Number)];
  return pids.some((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").startsWith("sleep\0");
    } catch {
      return false;
    }
  });
}

/** Stubborn tree started outside any supervisor, detached, for the no-record paths. */
async function unsupervisedTree() {
  const child = spawn(process.execPath, [fixture("stubborn-tree.mjs")], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
  });
  pids.add(child.pid!);
  const out = matcher();
  child.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
  const grandchild = Number((await out.waitFor(/tree (\d+) (\d+)/))[2]);
  pids.add(grandchild);
  return { pid: child.pid!, grandchild };
}

describe("process actions: terminal input", () => {
  it("send-keys C-c interrupts a PTY sleep", async () => {
    const { sessions } = setup();
    const s = await sessions.start({ ...base, mode: "pty", ptyCommand: "echo armed; sleep 30" });
    pids.add(s.pid!);
    await pollUntil(sessions, s.id, /armed/);
    // a SIGINT landing before `sleep` is exec'd (dash -c catches it, and so does
    // its forked child until exec) is lost: C-c must reach the sleep itself,
    // so wait until the sleep program runs (measured: ~25% lost otherwise)
    await waitFor(() => runningSleep(s.pid!));
    await sessions.run({ action: "send-keys", sessionId: s.id, keys: ["C-c"] });
    // waitFor throws when the session never exits: the exit itself is the assertion, with how it ended
    await waitFor(() => sessions.list().find((x) => x.id === s.id)?.status === "exited", 10_000);
    const info = sessions.list().find((x) => x.id === s.id)!;
    expect(info.exit).toMatchObject({ reason: "signal", exitSignal: "SIGINT" });
  });

  it("paste (bracketed on a PTY) and submit reach a PTY cat", async () => {
    const { sessions } = setup();
    // echo off: whatever comes back was printed by cat, not echoed by the terminal
    const s = await sessions.start({ ...base, mode: "pty", ptyCommand: "stty -echo; echo ready; cat" });
    pids.add(s.pid!);
    await pollUntil(sessions, s.id, /ready/);
    await sessions.run({ action: "paste", sessionId: s.id, text: "pasted ✓ text" });
    await sessions.run({ action: "send-keys", sessionId: s.id, keys: ["Enter"] });
    const pasted = await pollUntil(sessions, s.id, /\x1b\[201~/);
    expect(pasted).toContain("\x1b[200~pasted ✓ text\x1b[201~");
    await sessions.run({ action: "submit", sessionId: s.id, text: "submitted line" });
    expect(await pollUntil(sessions, s.id, /submitted line/)).not.toContain("\x1b[200~");
    await sessions.kill(s.id);
  });

  it("write / submit / paste on a pipe are plain text; poll returns only new output", async () => {
    const { sessions } = setup();
    const s = await sessions.start({ ...base, mode: "child", argv: ["cat"], stdinMode: "pipe-open" });
    pids.add(s.pid!);
    sessions.write(s.id, "one\n");
    expect(await pollUntil(sessions, s.id, /one\n/)).toBe("one\n");
    sessions.paste(s.id, "two");
    sessions.submit(s.id, "");
    expect(await pollUntil(sessions, s.id, /two\n/)).toBe("two\n");
    expect((await sessions.poll(s.id)).output).toBe("");
    sessions.write(s.id, "last\n", { eof: true });
    await waitFor(() => sessions.list()[0]?.status === "exited");
    const final = await sessions.poll(s.id);
    expect(final.output).toBe("last\n");
    expect(final.exit).toMatchObject({ reason: "exit", exitCode: 0 });
    expect(() => sessions.write(s.id, "x")).toThrow(/exited/);
  });
});

describe("process actions: log, list, clear, TTL", () => {
  it("log tails 200 lines by default and pages with offset/limit", async () => {
    const { sessions } = setup();
    const s = await sessions.start({ ...base, mode: "child", argv: ["seq", "1", "500"] });
    await waitFor(() => sessions.list()[0]?.status === "exited");
    const tail = sessions.log(s.id);
    expect(tail.lines.length).toBe(200);
    expect(tail.totalLines).toBe(500);
    expect(tail.lines[0]).toBe("301");
    expect(tail.lines.at(-1)).toBe("500");
    expect(sessions.log(s.id, { offset: 10, limit: 3 }).lines).toEqual(["11", "12", "13"]);
  });

  it("clear refuses a running session, forgets a finished one; a TTL expires finished sessions", async () => {
    const { sessions } = setup({ finishedTtlMs: 150 });
    const running = await sessions.start({ ...base, mode: "child", argv: ["sleep", "30"] });
    pids.add(running.pid!);
    const done = await sessions.start({ ...base, mode: "child", argv: ["true"] });
    const other = await sessions.start({ ...base, mode: "child", argv: ["true"] });
    await waitFor(() => sessions.list().filter((x) => x.status === "exited").length === 2);
    expect(() => sessions.clear(running.id)).toThrow(/still running/);
    sessions.clear(done.id);
    expect(() => sessions.log(done.id)).toThrow(UnknownSessionError);
    expect(sessions.list().map((x) => x.id)).toContain(other.id);
    // the TTL is the one timer here: wait for the expiry it causes, then look at what it kept
    await waitFor(() => !sessions.list().some((x) => x.id === other.id));
    const ids = sessions.list().map((x) => x.id);
    expect(ids).not.toContain(other.id); // expired
    expect(ids).toContain(running.id); // running sessions never expire, though the finished one beside them did
    await sessions.kill(running.id);
  });
});

describe("process actions: kill and remove", () => {
  it("kill with a supervisor record goes through supervisor.cancel and leaves no tree", async () => {
    const { sessions, supervisor } = setup();
    const out = matcher();
    const s = await sessions.start({
      ...base,
      mode: "child",
      argv: [process.execPath, fixture("stubborn-tree.mjs")],
      onStdout: (c) => out.push(c),
    });
    pids.add(s.pid!);
    const grandchild = Number((await out.waitFor(/tree (\d+) (\d+)/))[2]);
    pids.add(grandchild);
    const r = await sessions.run({ action: "kill", sessionId: s.id });
    expect(r).toMatchObject({ action: "kill", result: { via: "supervisor", exit: { reason: "manual-cancel" } } });
    expect(supervisor.getRecord(s.runId!)?.terminationReason).toBe("manual-cancel");
    expect(isAlive(s.pid!)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
    expect(await sessions.kill(s.id)).toEqual({ via: "none", reason: "already-exited" });
  });

  it("kill without a supervisor record falls back to the real tree kill", async () => {
    const { sessions } = setup();
    const { pid, grandchild } = await unsupervisedTree();
    const s = await sessions.adopt({ pid, command: "stubborn-tree" });
    expect(s.startTime).toMatch(/^\d+$/);
    const r = await sessions.kill(s.id);
    expect(r.via).toBe("tree-kill");
    expect(r.via === "tree-kill" && r.result.outcome).toBe("killed");
    expect(isAlive(pid)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
    expect(sessions.list().find((x) => x.id === s.id)?.status).toBe("exited");
  });

  it("remove with a supervisor record drops the session at once and still terminates it", async () => {
    const { sessions } = setup();
    const out = matcher();
    const s = await sessions.start({
      ...base,
      mode: "child",
      argv: [process.execPath, fixture("stubborn-tree.mjs")],
      onStdout: (c) => out.push(c),
    });
    pids.add(s.pid!);
    const grandchild = Number((await out.waitFor(/tree (\d+) (\d+)/))[2]);
    pids.add(grandchild);
    const pending = sessions.remove(s.id);
    // gone for every caller before the termination has finished
    expect(sessions.list().map((x) => x.id)).not.toContain(s.id);
    expect(isAlive(grandchild)).toBe(true);
    const r = await pending;
    expect(r).toMatchObject({ via: "supervisor", exit: { reason: "manual-cancel" } });
    expect(isAlive(s.pid!)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("remove without a supervisor record drops it and tree-kills it", async () => {
    const { sessions } = setup();
    const { pid, grandchild } = await unsupervisedTree();
    const s = await sessions.adopt({ pid, command: "stubborn-tree", id: "adopted-1" });
    const pending = sessions.run({ action: "remove", sessionId: s.id });
    expect(sessions.list()).toEqual([]);
    const r = await pending;
    expect(r).toMatchObject({ action: "remove", result: { via: "tree-kill", result: { outcome: "killed" } } });
    expect(isAlive(pid)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("a run the supervisor no longer tracks is killed by the fallback too", async () => {
    // the session was started by another supervisor (e.g. one since replaced): cancel finds nothing
    const { sessions: first } = setup();
    const s = await first.start({ ...base, mode: "child", argv: ["sleep", "30"] });
    pids.add(s.pid!);
    const { sessions } = setup();
    const adopted = await sessions.adopt({ pid: s.pid!, command: s.command });
    const r = await sessions.kill(adopted.id);
    expect(r).toMatchObject({ via: "tree-kill", result: { outcome: "killed" } });
    expect(isAlive(s.pid!)).toBe(false);
  });
});

describe("process actions: adopted sessions are pinned to the process they named", () => {
  it("adopt records the start time; after the pid is reused (facts report another start time) kill sends nothing and the session is finished", async () => {
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    pids.add(sleeper.pid!);
    let reused = false;
    const facts = reusedPidFacts(
      sleeper.pid!,
      (st) => String(BigInt(st) + 1n),
      () => reused,
    );
    const signaller = recordingSignaller();
    const { sessions } = setup({ facts, signaller, adoptedCheckMs: 60_000 });
    const s = await sessions.adopt({ pid: sleeper.pid!, command: "sleep 30" });
    expect(s.startTime).toBe((await getProcessFacts().inspect(sleeper.pid!))!.startTime);
    reused = true; // the adopted process "exited" and another one now holds its pid
    const r = await sessions.kill(s.id);
    expect(r).toMatchObject({ via: "tree-kill", result: { outcome: "mismatch", expectedStartTime: s.startTime } });
    expect(signaller.sent).toEqual([]);
    expect(isAlive(sleeper.pid!)).toBe(true);
    // ours is gone (its pid names another process): finished, not "running" forever
    expect(sessions.list().find((x) => x.id === s.id)?.status).toBe("exited");
    expect(await sessions.remove(s.id)).toEqual({ via: "none", reason: "already-exited" });
    expect(signaller.sent).toEqual([]);
  });

  it("remove of an adopted session whose start time cannot be read sends nothing (unknown)", async () => {
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    pids.add(sleeper.pid!);
    let hidden = false;
    const facts = reusedPidFacts(
      sleeper.pid!,
      () => "",
      () => hidden,
    );
    const signaller = recordingSignaller();
    const { sessions } = setup({ facts, signaller, adoptedCheckMs: 60_000 });
    const s = await sessions.adopt({ pid: sleeper.pid!, command: "sleep 30" });
    hidden = true;
    expect(await sessions.remove(s.id)).toMatchObject({ via: "tree-kill", result: { outcome: "unknown" } });
    expect(signaller.sent).toEqual([]);
    expect(isAlive(sleeper.pid!)).toBe(true);
  });

  it("an adopted process that exits on its own becomes finished, and the TTL then expires it", async () => {
    const short = spawn("sleep", ["0.3"], { detached: true, stdio: "ignore" });
    pids.add(short.pid!);
    const { sessions } = setup({ adoptedCheckMs: 25, finishedTtlMs: 150 });
    const s = await sessions.adopt({ pid: short.pid!, command: "sleep 0.3", id: "short" });
    expect(sessions.list().find((x) => x.id === s.id)?.status).toBe("running");
    await waitFor(() => sessions.list().find((x) => x.id === "short")?.status === "exited", 10_000);
    await waitFor(() => !sessions.list().some((x) => x.id === "short"), 10_000);
    expect(() => sessions.log("short")).toThrow(UnknownSessionError);
  });

  it("adopt fails clearly when the pid cannot be pinned: no such process, or facts that cannot tell identity", async () => {
    const done = spawn("true");
    await new Promise((r) => done.once("exit", r));
    const { sessions } = setup();
    await expect(sessions.adopt({ pid: done.pid!, command: "true" })).rejects.toThrow(AdoptError);
    await expect(sessions.adopt({ pid: done.pid!, command: "true" })).rejects.toThrow(/no such running process/);
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    pids.add(sleeper.pid!);
    const { sessions: blind } = setup({ facts: getProcessFacts({ backend: "none" }) });
    await expect(blind.adopt({ pid: sleeper.pid!, command: "sleep" })).rejects.toThrow(/cannot read process identity/);
    expect(blind.list()).toEqual([]);
    await expect(sessions.adopt({ pid: 0, command: "x" })).rejects.toThrow(RangeError);
  });
});

describe("process actions: poll takes an AbortSignal", () => {
  it("an abort ends a waiting poll at once with the signal's reason; the output stays pending for the next poll", async () => {
    const { sessions } = setup();
    const s = await sessions.start({
      ...base,
      mode: "child",
      argv: ["sh", "-c", "read x; echo got $x; sleep 30"],
      stdinMode: "pipe-open",
    });
    pids.add(s.pid!);
    const ac = new AbortController();
    const waiting = sessions.poll(s.id, { timeoutMs: 20_000, signal: ac.signal });
    setImmediate(() => ac.abort());
    const err = await waiting.catch((e: unknown) => e);
    // ended by the abort, not by the 20 s wait: a timed-out poll resolves, only an abort rejects with AbortError
    expect(err).toMatchObject({ name: "AbortError" });

    // an already-aborted signal rejects before anything is consumed, with a caller-chosen reason
    sessions.write(s.id, "hi\n");
    await waitFor(() => sessions.log(s.id).lines.includes("got hi"));
    const why = new Error("tool call cancelled");
    const gone = new AbortController();
    gone.abort(why);
    await expect(sessions.poll(s.id, { signal: gone.signal })).rejects.toBe(why);
    await expect(sessions.run({ action: "poll", sessionId: s.id, signal: gone.signal })).rejects.toBe(why);
    expect((await sessions.poll(s.id)).output).toBe("got hi\n");
    await expect(sessions.poll(s.id, { signal: "nope" as never })).rejects.toThrow(TypeError);
    await sessions.kill(s.id);
  });

  it("a signal that is never aborted changes nothing: the poll returns on output", async () => {
    const { sessions } = setup();
    const s = await sessions.start({
      ...base,
      mode: "child",
      argv: ["sh", "-c", "read x; echo got $x"],
      stdinMode: "pipe-open",
    });
    pids.add(s.pid!);
    const ac = new AbortController();
    const waiting = sessions.poll(s.id, { timeoutMs: 20_000, signal: ac.signal });
    sessions.write(s.id, "now\n");
    expect((await waiting).output).toBe("got now\n");
  });
});
