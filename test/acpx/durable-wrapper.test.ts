/**
 * The durable native wrapper on its own (docs/wrapper.md "Durable
 * sessions"), with real processes: this test process stands in for the
 * gateway (it holds the state dir's flock and speaks raw ACP on the
 * wrapper's stdio), the fixture agent streams numbered chunks, and the
 * socket is spoken to frame by frame through the addon.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseHeader } from "../../src/acpx/durable/protocol.js";
import { alive, cleanupAll, disposeAfterEach, leaseCarriers, waitFor } from "./controller-helpers.js";
import {
  attachAs,
  chunkText,
  durableRig,
  FRAME,
  handshakeRaw,
  nativeWrapperPath,
  promptMsg,
  spawnDurableWrapper,
  until,
  type FrameClient,
} from "./durable-helpers.js";

disposeAfterEach();
const native = nativeWrapperPath();
const have = native !== null && existsSync(native);
const d = have ? describe : describe.skip;
if (!have) console.log("durable wrapper tests skipped: no native wrapper (Linux with the addon built)");

const PROBE = join(import.meta.dirname, "..", "fixtures", "acpx", "attach-probe.mjs");
const COUNT = ["--stream-batch", "4", "--stream-gap-ms", "25"];

/** The texts of every agent_message_chunk in `lines`, in order. */
const texts = (lines: Record<string, unknown>[]) => lines.map(chunkText).filter((t) => t !== undefined);
const header = (c: FrameClient) => parseHeader(Buffer.from(c.frames.find((f) => f.type === "H")?.text ?? "", "utf8"));
const numbered = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1} `);

d("durable wrapper (native, real processes)", () => {
  it("a gateway gone mid-turn: the turn is replayed from its start, each line once, then live; a new prompt's id goes above the floor", async () => {
    const rig = durableRig("replay");
    const w = spawnDurableWrapper(rig, COUNT);
    const sid = await handshakeRaw(w);
    w.send(promptMsg(2, sid, "/count 40"));
    await until(() => texts(w.lines).length >= 5);
    w.goAway();
    const c = attachAs(rig);
    await until(() => c.frames.some((f) => f.type === "L"));
    const h = header(c)!;
    expect(h.turn).toMatchObject({ id: 2, gap: false });
    expect(h.idFloor).toBe(2);
    await until(() => c.lines().some((l) => l.id === 2));
    // the turn whole, each chunk once, in order: the ones the gone gateway saw are replayed too
    expect(texts(c.lines())).toEqual(numbered(40));
    expect(c.lines().find((l) => l.id === 2)).toMatchObject({ result: { stopReason: "end_turn" } });
    const replayedUpdates = c.frames.slice(
      0,
      c.frames.findIndex((f) => f.type === "L"),
    );
    expect(h.turn!.updates).toBeGreaterThanOrEqual(5);
    expect(replayedUpdates.length).toBeGreaterThan(0);
    // live from here: a prompt of the new gateway, its id above the floor
    c.send(FRAME.stdin, `${JSON.stringify(promptMsg(3, sid, "/count 3"))}\n`);
    await until(() => c.lines().some((l) => l.id === 3));
    expect(texts(c.lines()).slice(40)).toEqual(numbered(3));
    // "end", then EOF: the tree ends as without durability, and the reports come on the socket
    c.send(FRAME.control, "end");
    c.sock.end();
    await until(() => c.closed);
    const reports = c.frames.filter((f) => f.type === "R").map((f) => JSON.parse(f.text) as { type: string });
    expect(reports.map((r) => r.type)).toEqual(["exit", "cleanup"]);
    expect(await waitFor(() => !alive(w.child.pid!) && leaseCarriers(rig.leaseId).length === 0, 10_000)).not.toBe(-1);
  });

  it("an agent request the gone gateway answered is not replayed; one it did not answer is, and the new gateway's answer reaches the agent", async () => {
    for (const answered of [true, false]) {
      const rig = durableRig(`req-${answered}`);
      const w = spawnDurableWrapper(rig, COUNT);
      const sid = await handshakeRaw(w);
      w.send(promptMsg(2, sid, "/ask-count 30"));
      await until(() => w.lines.some((l) => l.method === "session/request_permission"));
      const ask = w.lines.find((l) => l.method === "session/request_permission")!;
      const allow = { jsonrpc: "2.0", id: ask.id, result: { outcome: { outcome: "selected", optionId: "allow" } } };
      if (answered) {
        w.send(allow);
        await until(() => texts(w.lines).length >= 3);
      }
      w.goAway();
      const c = attachAs(rig);
      await until(() => c.frames.some((f) => f.type === "L"));
      const asked = c.lines().filter((l) => l.method === "session/request_permission");
      expect(asked.length).toBe(answered ? 0 : 1);
      if (!answered) c.send(FRAME.stdin, `${JSON.stringify(allow)}\n`);
      await until(() => c.lines().some((l) => l.id === 2));
      expect(texts(c.lines())).toEqual(numbered(30));
      c.sock.destroy();
    }
  });

  it("past the journal's bound while nobody is attached, the agent's stdout is held: nothing is dropped", async () => {
    const rig = durableRig("held");
    const w = spawnDurableWrapper(rig, COUNT, { journalBytes: 4096 });
    const sid = await handshakeRaw(w);
    w.send(promptMsg(2, sid, "/count 300"));
    await until(() => texts(w.lines).length > 0);
    w.goAway();
    // the agent blocks on its write: the turn cannot end while nobody reads
    await new Promise((r) => setTimeout(r, 300));
    const c = attachAs(rig);
    await until(() => c.frames.some((f) => f.type === "L"));
    const h = header(c)!;
    expect(h.held).toBe(true);
    expect(h.journalBytes).toBeGreaterThanOrEqual(4096);
    expect(h.turn).toMatchObject({ id: 2, ended: false, gap: false });
    await until(() => c.lines().some((l) => l.id === 2));
    expect(texts(c.lines())).toEqual(numbered(300));
    c.sock.destroy();
  });

  it("a prompt the gateway wrote whole before it went, still unread in the wrapper's stdin (the adapter lagging): it reaches the agent and its turn is adopted", async () => {
    const rig = durableRig("last-in");
    const w = spawnDurableWrapper(rig, COUNT);
    const sid = await handshakeRaw(w);
    const adapter = w.reports.find((r) => r.type === "started")!.adapterPid as number;
    // a stopped adapter reads nothing: its stdin pipe and the wrapper's buffer fill, the rest waits in the wrapper's stdin
    process.kill(adapter, "SIGSTOP");
    try {
      w.send(promptMsg(2, sid, `/count 3${" ".repeat(256 * 1024)}`));
      await until(() => w.child.stdin!.writableLength === 0);
      w.goAway();
      await until(() => existsSync(join(rig.attachDir, `${rig.leaseId}.waiting`)));
    } finally {
      process.kill(adapter, "SIGCONT");
    }
    const c = attachAs(rig);
    await until(() => c.frames.some((f) => f.type === "L"));
    expect(header(c)!.turn).toMatchObject({ id: 2, gap: false });
    await until(() => c.lines().some((l) => l.id === 2));
    expect(texts(c.lines())).toEqual(numbered(3));
    expect(c.lines().find((l) => l.id === 2)).toMatchObject({ result: { stopReason: "end_turn" } });
    c.sock.destroy();
  });

  it("an adapter that exits while nobody is attached: its last words wait for the next gateway, then its exit and the cleanup", async () => {
    const rig = durableRig("last-words");
    const w = spawnDurableWrapper(rig, COUNT, { windowMs: 60_000 });
    const sid = await handshakeRaw(w);
    const adapter = w.reports.find((r) => r.type === "started")!.adapterPid as number;
    w.send(promptMsg(2, sid, "/count-exit 30"));
    await until(() => texts(w.lines).length >= 3);
    w.goAway();
    // the agent finishes its chunks and exits while the gateway is gone; the wrapper waits on
    await until(() => leaseCarriers(rig.leaseId).length === 1);
    expect(alive(w.child.pid!)).toBe(true);
    const c = attachAs(rig);
    await until(() => c.closed);
    expect(texts(c.lines())).toEqual(numbered(30));
    const reports = c.frames.filter((f) => f.type === "R").map((f) => JSON.parse(f.text) as Record<string, unknown>);
    expect(reports[0]).toEqual({ type: "exit", code: 7, signal: null });
    expect(reports[1]).toMatchObject({ type: "cleanup", reason: "adapter-exit" });
    expect(reports[1]!.ended).toContain(adapter);
    expect(await waitFor(() => !alive(w.child.pid!), 5000)).not.toBe(-1);
    expect(w.child.exitCode ?? (await new Promise((r) => w.child.once("exit", r)))).toBe(7);
  });

  it("a turn that passes the journal's bound while attached is relayed whole; if its gateway then goes, the header says the journal has a gap (never a silent loss)", async () => {
    const rig = durableRig("gap");
    const w = spawnDurableWrapper(rig, COUNT, { journalBytes: 4096 });
    const sid = await handshakeRaw(w);
    w.send(promptMsg(2, sid, "/count 300"));
    // well past 4 KiB of the turn's lines, all relayed to the attached gateway
    await until(() => texts(w.lines).length >= 120);
    expect(texts(w.lines)).toEqual(numbered(texts(w.lines).length));
    w.goAway();
    const c = attachAs(rig);
    await until(() => c.lines().some((l) => l.id === 2));
    expect(header(c)!.turn).toMatchObject({ id: 2, gap: true });
    // what was kept comes in order, each once: the turn's first lines, then from the gateway's going on
    const got = texts(c.lines()).map((t) => Number(t));
    expect([...got].sort((a, b) => a - b)).toEqual(got);
    expect(new Set(got).size).toBe(got.length);
    expect(got[got.length - 1]).toBe(300);
    c.sock.destroy();
  });

  it("only the state dir's lock holder gets in, and only with this wrapper's lease and instance", async () => {
    const rig = durableRig("door");
    const w = spawnDurableWrapper(rig, []);
    await handshakeRaw(w);
    w.goAway();
    // another process of our uid, not holding the lock: refused at the connect
    const probe = spawnSync(process.execPath, [PROBE, rig.attachDir, `${rig.leaseId}.sock`], { encoding: "utf8" });
    expect(probe.stdout.trim()).toBe("X not-the-lock-holder");
    for (const [lease, inst] of [
      ["lease-of-another-session", rig.instanceId],
      [rig.leaseId, "another-instance"],
    ] as const) {
      const c = attachAs(rig, lease, inst);
      await until(() => c.closed);
      expect(c.frames).toEqual([{ type: "X", text: "not-this-session" }]);
    }
    const ok = attachAs(rig);
    await until(() => ok.frames.some((f) => f.type === "L"));
    ok.sock.destroy();
  });

  it("two adoptions racing: exactly one is let in", async () => {
    const rig = durableRig("race");
    const w = spawnDurableWrapper(rig, []);
    await handshakeRaw(w);
    w.goAway();
    await new Promise((r) => setTimeout(r, 100));
    const a = attachAs(rig);
    const b = attachAs(rig);
    await until(
      () => (a.closed || a.frames.some((f) => f.type === "L")) && (b.closed || b.frames.some((f) => f.type === "L")),
    );
    const won = [a, b].filter((c) => c.frames.some((f) => f.type === "H"));
    const lost = [a, b].filter((c) => !c.frames.some((f) => f.type === "H"));
    expect(won.length).toBe(1);
    expect(lost[0]!.frames).toEqual([{ type: "X", text: "attached" }]);
    a.sock.destroy();
    b.sock.destroy();
  });

  it("a window that runs out ends the tree as a gateway's death without durability does (TERM, grace, KILL), and its socket goes", async () => {
    const rig = durableRig("expire");
    const w = spawnDurableWrapper(rig, ["--ignore-sigterm", "--grandchild=setsid"], { windowMs: 600, graceMs: 300 });
    await handshakeRaw(w);
    const sock = join(rig.attachDir, `${rig.leaseId}.sock`);
    expect(existsSync(sock)).toBe(true);
    await until(() => leaseCarriers(rig.leaseId).length >= 3);
    const t0 = Date.now();
    w.goAway();
    // still there inside the window
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(w.child.pid!)).toBe(true);
    expect(await waitFor(() => leaseCarriers(rig.leaseId).length === 0 && !alive(w.child.pid!), 15_000)).not.toBe(-1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(600);
    expect(existsSync(sock)).toBe(false);
  });

  it("the gateway's 'end' makes it a plain wrapper again: the lifeline's EOF ends the tree at once", async () => {
    const rig = durableRig("end");
    const w = spawnDurableWrapper(rig, ["--survive-stdin-close"], { windowMs: 600_000 });
    await handshakeRaw(w);
    (w.child.stdio[3] as NodeJS.WritableStream).write("end\n");
    w.goAway();
    expect(await waitFor(() => !alive(w.child.pid!) && leaseCarriers(rig.leaseId).length === 0, 10_000)).not.toBe(-1);
  });

  it("the wrapper leaves the gateway's session: a kill of the gateway's process group does not reach it", async () => {
    const rig = durableRig("session");
    const w = spawnDurableWrapper(rig, []);
    await handshakeRaw(w);
    const stat = readFileSync(`/proc/${w.child.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // field 6 (session id) is the wrapper's own pid: it called setsid()
    expect(Number(fields[3])).toBe(w.child.pid);
    cleanupAll();
  });
});
