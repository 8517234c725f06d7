/**
 * Re-adoption by proof, in one process: the `durable` option's checks, the
 * Node wrapper's typed refusal, detach() and a re-adoption with a permission
 * asked during the gap, and the adoptions that must never happen (a forged
 * lease naming an impostor, an impostor on the socket, another instance's
 * session): none of them adopted, none of their processes signalled.
 */
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxDurableUnavailableError } from "../../src/acpx/report/errors.js";
import { sessionFileName } from "../../src/acpx/sessions/session-store.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  AGENT,
  alive,
  disposeAfterEach,
  GRACE_MS,
  startTimeOf,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "./controller-helpers.js";
import { nativeWrapperPath, until } from "./durable-helpers.js";
import { existsSync } from "node:fs";

const controllers = disposeAfterEach();
const have = nativeWrapperPath() !== null && existsSync(nativeWrapperPath()!);
const d = have ? describe : describe.skip;
if (!have) console.log("durable adoption tests skipped: no native wrapper (Linux with the addon built)");

const KEY = "agent:main:acp:adopt";
const COMMAND = [process.execPath, AGENT, "--stream-batch", "4", "--stream-gap-ms", "30"];
const DURABLE = { reattachWithinMs: 60_000 };

/** what the controllers of a test logged (why a session was not re-adopted is an info line) */
const logged: string[] = [];
const logger = { info: (m: string) => void logged.push(m), warn: (m: string) => void logged.push(m) };
const notAdopted = (code: string) => logged.some((m) => m.includes(`was not re-adopted (${code})`));

async function controller(stateDir: string, extra: Record<string, unknown> = {}): Promise<AcpxLifecycleController> {
  const c = await createAcpxLifecycleController({
    stateDir,
    logger,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    keeper: "off",
    durable: DURABLE,
    ...extra,
  });
  controllers.push(c);
  return c;
}

/** A durable session on `stateDir`, let go by its controller (detach): its wrapper waits. */
async function waitingSession(stateDir: string) {
  const a = await controller(stateDir);
  const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
  trackLease(h.leaseId);
  await a.detach();
  return h;
}

/** A process that is none of ours: a sleeping node, or one listening on a Unix socket at `sock`. */
function impostor(sock?: string): { pid: number; heard: () => string } {
  const code =
    sock === undefined
      ? "setInterval(() => {}, 1 << 30)"
      : `const fs = require("fs"), net = require("net"); const dir = fs.openSync(${JSON.stringify(join(sock, ".."))}, "r");
         net.createServer((c) => c.on("data", (d) => process.stdout.write("heard " + d.length + "\\n"))).listen("/proc/self/fd/" + dir + "/" + ${JSON.stringify(sock.split("/").pop())}, () => process.stdout.write("listening\\n"));`;
  const c = trackChild(spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] }));
  let out = "";
  c.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  return { pid: c.pid!, heard: () => out };
}

describe("the durable option", () => {
  // each test reads only what it logged
  afterEach(() => void logged.splice(0));
  it("reattachWithinMs must be an integer from 1 to 600000, else TypeError, and nothing is taken", async () => {
    const stateDir = tempStateDir("durable-opt");
    const bad: unknown[] = [
      { reattachWithinMs: 0 },
      { reattachWithinMs: 600_001 },
      { reattachWithinMs: 1.5 },
      { reattachWithinMs: "1000" },
      {},
      null,
      5,
      { reattachWithinMs: 1000, extra: 1 },
      { reattachWithinMs: 1000, journalBytes: 100 },
    ];
    for (const durable of bad)
      await expect(createAcpxLifecycleController({ stateDir, durable } as never)).rejects.toThrow(TypeError);
    // the state dir was never taken: a controller opens it now
    for (const ok of [1, 600_000]) {
      const c = await createAcpxLifecycleController({
        stateDir,
        keeper: "off",
        maintenanceIntervalMs: 0,
        ...(have ? { durable: { reattachWithinMs: ok } } : {}),
      });
      await c.dispose();
    }
  });

  it("the Node wrapper cannot keep a session: durable is refused typed, naming why", async () => {
    const stateDir = tempStateDir("durable-node");
    const before = process.env.PROCLEASE_WRAPPER;
    process.env.PROCLEASE_WRAPPER = "node";
    try {
      const err = await createAcpxLifecycleController({ stateDir, durable: DURABLE }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AcpxDurableUnavailableError);
      expect((err as AcpxDurableUnavailableError).why).toMatch(/Node wrapper|Linux/);
    } finally {
      if (before === undefined) delete process.env.PROCLEASE_WRAPPER;
      else process.env.PROCLEASE_WRAPPER = before;
    }
    // and the state dir is free again
    await (await createAcpxLifecycleController({ stateDir, keeper: "off", maintenanceIntervalMs: 0 })).dispose();
  });
});

d("re-adoption by proof (native wrapper, real processes)", () => {
  afterEach(() => void logged.splice(0));
  it("detach() leaves the session waiting; a permission the agent asks meanwhile is answered by the new controller's hook, and the turn ends", async () => {
    const stateDir = tempStateDir("durable-detach");
    const a = await controller(stateDir);
    const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h.leaseId);
    const t = a.startTurn(h, "/ask-count 12");
    t.result.catch(() => undefined);
    await a.detach();
    await expect(t.result).rejects.toMatchObject({ name: "AcpxControllerDisposedError", how: "detached" });
    expect(alive(h.rootPid)).toBe(true);
    const asked: string[] = [];
    const b = await controller(stateDir, {
      onPermissionRequest: (r: { toolCall: { title?: string | null } }) => {
        asked.push(String(r.toolCall.title));
        return { outcome: "selected", optionId: "allow" };
      },
    });
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2).toMatchObject({ adopted: true, rootPid: h.rootPid, leaseId: h.leaseId });
    const texts: string[] = [];
    for await (const u of h2.turn!.events)
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
    expect(texts.join("")).toBe(Array.from({ length: 12 }, (_, i) => `${i + 1} `).join(""));
    expect(asked).toEqual(["Count"]);
    expect((await h2.turn!.result).stopReason).toBe("end_turn");
    // no turn in flight: an adopted handle without one
    await b.detach();
    const c = await controller(stateDir);
    const h3 = await c.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h3.adopted).toBe(true);
    expect(h3.turn).toBeUndefined();
    expect(h3.rootPid).toBe(h.rootPid);
  });

  // the part of the prompt the wrapper had not read when the pipes closed (its adapter lagging): durable-wrapper.test.ts
  it("a turn started right before detach() whose prompt is still being written (384 KiB, in two slices a loop turn apart) is in flight when the pipes close: the new controller adopts it", async () => {
    const stateDir = tempStateDir("durable-flush");
    const a = await controller(stateDir);
    const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h.leaseId);
    // Number() of the rest ignores the padding; 200 counted in batches of 4, 30 ms apart, outlast the detach
    const t = a.startTurn(h, `/count 200${" ".repeat(384 * 1024)}`);
    t.result.catch(() => undefined);
    await a.detach();
    await expect(t.result).rejects.toMatchObject({ name: "AcpxControllerDisposedError", how: "detached" });
    const b = await controller(stateDir);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2).toMatchObject({ adopted: true, rootPid: h.rootPid });
    expect(h2.turn, "the turn started before detach() is adopted").toBeDefined();
    expect((await h2.turn!.result).stopReason).toBe("end_turn");
  });

  it("the new controller's own requests while the adopted turn runs (three setMode calls) are answered, and the turn ends whole", async () => {
    const stateDir = tempStateDir("durable-ids");
    const a = await controller(stateDir);
    const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h.leaseId);
    // initialize is id 0, session/new 1: this prompt is id 2, still in flight when the gateway goes
    const t = a.startTurn(h, "/count 120");
    t.result.catch(() => undefined);
    for await (const u of t.events) if (u.sessionUpdate === "agent_message_chunk") break;
    await a.detach();
    const b = await controller(stateDir);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.turn).toBeDefined();
    // which answer reaches whom when ids would meet: durable-ids.test.ts
    for (const mode of ["code", "plan", "ask"]) await b.setMode(h2, mode);
    const texts: string[] = [];
    for await (const u of h2.turn!.events)
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
    expect(texts).toEqual(Array.from({ length: 120 }, (_, i) => `${i + 1} `));
    expect((await h2.turn!.result).stopReason).toBe("end_turn");
  });

  it("a waiting wrapper killed outright (SIGKILL): the next reconcile ends what is left, settles the lease, and its socket goes with it", async () => {
    const stateDir = tempStateDir("durable-killed");
    const h = await waitingSession(stateDir);
    const sock = join(stateDir, "acpx", "attach", `${h.leaseId}.sock`);
    await until(() => existsSync(join(stateDir, "acpx", "attach", `${h.leaseId}.waiting`)));
    process.kill(h.rootPid, "SIGKILL");
    expect(await waitFor(() => !alive(h.rootPid), 5000)).not.toBe(-1);
    expect(existsSync(sock)).toBe(true);
    const b = await controller(stateDir);
    const entry = (await b.reapStartupOrphans()).entries.find((e) => e.leaseId === h.leaseId)!;
    expect(["closed", "lost"]).toContain(entry.stateAfter);
    expect(existsSync(sock)).toBe(false);
    expect(existsSync(join(stateDir, "acpx", "attach", `${h.leaseId}.waiting`))).toBe(false);
  });

  it("a forged lease naming another process: not adopted, and that process is never signalled", async () => {
    const stateDir = tempStateDir("durable-forged");
    const h = await waitingSession(stateDir);
    const other = impostor();
    await until(() => startTimeOf(other.pid) !== null);
    const store = await openLeaseStore(stateDir);
    await store.update(h.leaseId, { rootPid: other.pid, rootStartTime: startTimeOf(other.pid)! });
    const b = await controller(stateDir);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h2.leaseId);
    expect(h2.adopted).toBeUndefined();
    expect(notAdopted("not-verified")).toBe(true);
    expect(h2.rootPid).not.toBe(other.pid);
    expect(alive(other.pid)).toBe(true);
    // the real wrapper was not signalled either: the forged lease no longer names it
    expect(alive(h.rootPid)).toBe(true);
  });

  it("an impostor listening on the session's socket: refused by the kernel's word (SO_PEERCRED), never spoken to, never signalled", async () => {
    const stateDir = tempStateDir("durable-impostor");
    const h = await waitingSession(stateDir);
    const sock = join(stateDir, "acpx", "attach", `${h.leaseId}.sock`);
    renameSync(sock, `${sock}.aside`);
    const fake = impostor(sock);
    await until(() => fake.heard().includes("listening"));
    const b = await controller(stateDir);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h2.leaseId);
    expect(h2.adopted).toBeUndefined();
    expect(notAdopted("peer-not-the-wrapper")).toBe(true);
    expect(fake.heard()).not.toMatch(/heard/);
    expect(alive(fake.pid)).toBe(true);
    // the waiting session was ours: the ensure closed it through the lifecycle before starting the new one
    expect(await waitFor(() => !alive(h.rootPid), 10_000)).not.toBe(-1);
  });

  it("another instance's waiting session, planted in this state dir: not adopted, not signalled; its own instance still re-adopts it", async () => {
    const stateB = tempStateDir("durable-foreign-b");
    const hb = await waitingSession(stateB);
    const stateA = tempStateDir("durable-foreign-a");
    const a = await controller(stateA);
    // plant B's lease and session record in A's state dir
    copyFileSync(
      join(stateB, "acpx", "leases", `${hb.leaseId}.json`),
      join(stateA, "acpx", "leases", `${hb.leaseId}.json`),
    );
    mkdirSync(join(stateA, "acpx", "sessions"), { recursive: true });
    copyFileSync(
      join(stateB, "acpx", "sessions", sessionFileName(KEY)),
      join(stateA, "acpx", "sessions", sessionFileName(KEY)),
    );
    const r = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND }).catch((e: unknown) => e);
    // the key's earlier session is another instance's: refused, as any such lease is, with nothing signalled
    expect(r).toBeInstanceOf(Error);
    expect((r as Error).message).toMatch(/could not be settled \(nothing signalled; instance/);
    expect(notAdopted("not-this-session")).toBe(true);
    expect(alive(hb.rootPid)).toBe(true);
    const b2 = await controller(stateB);
    const again = await b2.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(again).toMatchObject({ adopted: true, rootPid: hb.rootPid });
    expect(readdirSync(join(stateA, "acpx", "attach"))).toEqual([]);
  });
});
