/**
 * A durable session's client terminals wait with it (issue 49): the gateway
 * (test/fixtures/acpx/durable-gateway.mjs, a process of its own) starts a
 * terminal for the agent, then dies by SIGKILL. Its keeper and the next
 * gateway's startup reap spare the terminal while the session waits; the
 * terminal's output and exit status are kept meanwhile; the controller that
 * re-adopts the session takes the terminal back, and the agent's
 * terminal/output and terminal/wait_for_exit after the restart answer what
 * the command wrote and how it ended. When nobody re-adopts the session in
 * its window, the terminal ends with it and the next reap settles its lease.
 * A wait_for_exit the agent sent while no gateway was attached is answered
 * by the controller that re-adopts it.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  AGENT,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  say,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "./controller-helpers.js";
import { nativeWrapperPath, startFixtureGateway, until, type FixtureGateway } from "./durable-helpers.js";
import { exited } from "../fixtures/facts/procs.js";

const controllers = disposeAfterEach();
const have = nativeWrapperPath() !== null && existsSync(nativeWrapperPath()!);
const d = have ? describe : describe.skip;
if (!have) console.log("durable terminal tests skipped: no native wrapper (Linux with the addon built)");

const KEY = "agent:main:acp:durable-terminal";
const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const COMMAND = [process.execPath, AGENT];

function startGateway(stateDir: string, windowMs: number, prompt: string): FixtureGateway {
  return startFixtureGateway({
    stateDir,
    windowMs,
    keeper: "on",
    terminal: true,
    sessionKey: KEY,
    command: COMMAND,
    prompt,
  });
}

/** The gateway's session and the terminal its turn started, once both are up. */
async function terminalOf(g: FixtureGateway): Promise<{ h: AcpRuntimeHandle; terminalId: string }> {
  await until(() => g.events.some((e) => e.type === "handle") && g.events.some((e) => e.type === "chunk"), 20_000);
  const h = g.events.find((e) => e.type === "handle")!.handle!;
  trackLease(h.leaseId);
  const text = g.events.find((e) => e.type === "chunk")!.text!;
  expect(text).toMatch(/^terminal acp-terminal-/);
  return { h, terminalId: text.replace(/^terminal /, "") };
}

async function terminalLease(stateDir: string, terminalId: string) {
  const { leases } = await (await openLeaseStore(stateDir)).list({});
  return leases.find((l) => l.sessionKey === `supervisor:${terminalId}`);
}

/** The next gateway's controller on `stateDir`: the startup reap, then the session's key ensured again (re-adopted when it waited). */
async function readopt(stateDir: string) {
  const b = await createAcpxLifecycleController({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    keeper: "off",
    durable: { reattachWithinMs: 60_000 },
    clientCapabilities: { terminal: true },
  });
  controllers.push(b);
  await b.reapStartupOrphans();
  const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
  return { b, h2 };
}

/** A command that writes a line, waits for `go` to exist, writes another and exits 7. */
const waitsFor = (go: string) => `echo first; while [ ! -e ${go} ]; do sleep 0.05; done; echo second; exit 7`;

d("durable sessions: client terminals wait with their session", () => {
  it("gateway SIGKILL mid-terminal: the terminal runs on, ends meanwhile, and the re-adopting controller's agent reads its output and exit status", async () => {
    const stateDir = tempStateDir("durterm");
    const go = join(stateDir, "go");
    const g = startGateway(stateDir, 60_000, `/terminal-start ${waitsFor(go)}`);
    const { h, terminalId } = await terminalOf(g);
    const lease = (await terminalLease(stateDir, terminalId))!;
    trackLease(lease.leaseId);
    trackPid(lease.rootPid);
    const outFile = join(stateDir, "acpx", "terminals", `${terminalId}.out`);
    await until(() => existsSync(outFile) && readFileSync(outFile, "utf8").includes("first"), 10_000);

    g.child.kill("SIGKILL");
    await exited(g.child);
    // the dead gateway's keeper spares the waiting session and its terminal, and says so
    const report = join(stateDir, "acpx", "keeper-report.json");
    await until(() => existsSync(report), 20_000);
    const entries = (JSON.parse(readFileSync(report, "utf8")) as { entries: { leaseId: string; action: string }[] })
      .entries;
    expect(entries.find((e) => e.leaseId === lease.leaseId)?.action).toBe("awaiting-readoption");
    expect(alive(lease.rootPid)).toBe(true);
    expect(leaseCarriers(lease.leaseId).length).toBeGreaterThan(0);
    // an operator sees the terminal waiting with its session, with the session's deadline
    const rows = (
      JSON.parse(
        execFileSync(process.execPath, [CLI, "status", "--state-dir", stateDir, "--json"], { encoding: "utf8" }),
      ) as {
        leases: { lease: { leaseId: string }; waiting?: { deadline: number; why: string } }[];
      }
    ).leases;
    const [session, terminal] = [h.leaseId, lease.leaseId].map(
      (id) => rows.find((r) => r.lease.leaseId === id)?.waiting,
    );
    expect(session, "the session waits").toBeDefined();
    expect(terminal?.deadline).toBe(session!.deadline);
    expect(terminal?.why).toContain(`a terminal of the durable session ${JSON.stringify(KEY)} (lease ${h.leaseId})`);

    // the command goes on while nobody is attached, and ends: its output and status are kept
    writeFileSync(go, "");
    await until(() => existsSync(join(stateDir, "acpx", "terminals", `${terminalId}.status`)), 10_000);

    const { b, h2 } = await readopt(stateDir);
    expect(h2).toMatchObject({ adopted: true, leaseId: h.leaseId, rootPid: h.rootPid });
    expect(JSON.parse(await say(b, h2, `/terminal-wait ${terminalId}`))).toEqual({
      terminalId,
      exit: { exitCode: 7, signal: null },
      output: "first\nsecond\n",
      truncated: false,
    });
    // released: its lease settled, nothing of it left, its files gone
    expect(await waitFor(() => leaseCarriers(lease.leaseId).length === 0, 10_000)).not.toBe(-1);
    expect(["closed", "lost"]).toContain((await terminalLease(stateDir, terminalId))?.state);
    expect(readdirSync(join(stateDir, "acpx", "terminals")).filter((f) => f.startsWith(terminalId))).toEqual([]);
    expect((await b.closeSession({ handle: h2 })).leaseState).toBe("closed");
  }, 90_000);

  it("gateway SIGKILL while the agent waits on its terminal (wait_for_exit in flight): the re-adopting controller answers it, and the turn ends with the output and exit status", async () => {
    const stateDir = tempStateDir("durterm-gap");
    const go = join(stateDir, "go");
    const g = startGateway(stateDir, 60_000, `/terminal-run-noted ${waitsFor(go)}`);
    await until(() => g.events.some((e) => e.type === "handle"), 20_000);
    const h = g.events.find((e) => e.type === "handle")!.handle!;
    trackLease(h.leaseId);
    // the agent has its terminal's id (the create was answered): its wait_for_exit is what the gateway leaves unanswered
    await until(() => g.events.some((e) => e.type === "chunk" && e.text!.startsWith("created ")), 20_000);
    const terminalId = g.events.find((e) => e.type === "chunk")!.text!.replace(/^created /, "");
    const outFile = join(stateDir, "acpx", "terminals", `${terminalId}.out`);
    await until(() => existsSync(outFile) && readFileSync(outFile, "utf8").includes("first"), 10_000);
    const lease = (await terminalLease(stateDir, terminalId))!;
    trackLease(lease.leaseId);
    trackPid(lease.rootPid);
    g.child.kill("SIGKILL");
    await exited(g.child);
    await until(() => existsSync(join(stateDir, "acpx", "keeper-report.json")), 20_000);
    writeFileSync(go, "");
    const { b, h2 } = await readopt(stateDir);
    expect(h2.adopted).toBe(true);
    expect(h2.turn).toBeDefined();
    const texts: string[] = [];
    for await (const u of h2.turn!.events)
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
    expect((await h2.turn!.result).stopReason).toBe("end_turn");
    // the turn's chunks from its start, exactly once: the note, then the answer
    expect(texts[0]).toBe(`created ${terminalId}`);
    expect(JSON.parse(texts.slice(1).join(""))).toEqual({
      terminalId,
      exit: { exitCode: 7, signal: null },
      output: "first\nsecond\n",
      truncated: false,
    });
    expect(await waitFor(() => leaseCarriers(lease.leaseId).length === 0, 10_000)).not.toBe(-1);
    expect((await b.closeSession({ handle: h2 })).leaseState).toBe("closed");
  }, 90_000);

  it("a terminal still running at the re-adoption: its output so far, and the close of the session ends it through its lease", async () => {
    const stateDir = tempStateDir("durterm-live");
    const g = startGateway(stateDir, 60_000, "/terminal-start echo hello; exec sleep 600");
    const { h, terminalId } = await terminalOf(g);
    const lease = (await terminalLease(stateDir, terminalId))!;
    trackLease(lease.leaseId);
    trackPid(lease.rootPid);
    g.child.kill("SIGKILL");
    await exited(g.child);
    await until(() => existsSync(join(stateDir, "acpx", "keeper-report.json")), 20_000);
    const b = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      keeper: "off",
      durable: { reattachWithinMs: 60_000 },
      clientCapabilities: { terminal: true },
    });
    controllers.push(b);
    const reap = await b.reapStartupOrphans();
    expect(reap.entries.find((e) => e.leaseId === h.leaseId)?.action).toBe("awaiting-readoption");
    expect(leaseCarriers(lease.leaseId).length).toBeGreaterThan(0);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.adopted).toBe(true);
    expect((await b.sessionStatus(h2)).terminals).toEqual([terminalId]);
    expect(JSON.parse(await say(b, h2, `/terminal-peek ${terminalId}`))).toEqual({
      output: "hello\n",
      truncated: false,
    });
    // the session's close ends the re-taken terminal through its lease
    expect((await b.closeSession({ handle: h2 })).leaseState).toBe("closed");
    expect(await waitFor(() => leaseCarriers(lease.leaseId).length === 0, 10_000)).not.toBe(-1);
    expect(["closed", "lost"]).toContain((await terminalLease(stateDir, terminalId))?.state);
  }, 90_000);

  it("a window that runs out: the terminal ends with its session, and the next reap settles its lease", async () => {
    const stateDir = tempStateDir("durterm-expire");
    const g = startGateway(stateDir, 1500, "/terminal-start echo hello; exec sleep 600");
    const { h, terminalId } = await terminalOf(g);
    const lease = (await terminalLease(stateDir, terminalId))!;
    trackLease(lease.leaseId);
    trackPid(lease.rootPid);
    g.child.kill("SIGKILL");
    const t0 = Date.now();
    await exited(g.child);
    await until(() => existsSync(join(stateDir, "acpx", "keeper-report.json")), 20_000);
    expect(leaseCarriers(lease.leaseId).length).toBeGreaterThan(0);
    expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0, 20_000)).not.toBe(-1);
    expect(await waitFor(() => leaseCarriers(lease.leaseId).length === 0, 10_000)).not.toBe(-1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
    const b = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      keeper: "off",
      durable: { reattachWithinMs: 1500 },
      clientCapabilities: { terminal: true },
    });
    controllers.push(b);
    await b.reapStartupOrphans();
    expect(["closed", "lost"]).toContain((await terminalLease(stateDir, terminalId))?.state);
    // what was kept of it goes too: its session can no longer come back for it
    expect(readdirSync(join(stateDir, "acpx", "terminals")).filter((f) => f.startsWith(terminalId))).toEqual([]);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.adopted).toBeUndefined();
    trackLease(h2.leaseId);
    // the expired terminal is not this new session's
    expect(await say(b, h2, `/terminal-peek ${terminalId}`)).toMatch(/^refused: -32602/);
  }, 60_000);

  it("detach() and a new controller in the same process (a plugin's config reload): the terminal is taken back, its output whole", async () => {
    const stateDir = tempStateDir("durterm-detach");
    const go = join(stateDir, "go");
    const opts = {
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      keeper: "off" as const,
      durable: { reattachWithinMs: 60_000 },
      clientCapabilities: { terminal: true },
    };
    const a = await createAcpxLifecycleController(opts);
    controllers.push(a);
    const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    trackLease(h.leaseId);
    const terminalId = (await say(a, h, `/terminal-start ${waitsFor(go)}`)).replace(/^terminal /, "");
    const lease = (await terminalLease(stateDir, terminalId))!;
    trackLease(lease.leaseId);
    await a.detach();
    const b = await createAcpxLifecycleController(opts);
    controllers.push(b);
    const reap = await b.reapStartupOrphans();
    expect(reap.entries.find((e) => e.leaseId === h.leaseId)?.action).toBe("awaiting-readoption");
    expect(leaseCarriers(lease.leaseId).length).toBeGreaterThan(0);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.adopted).toBe(true);
    writeFileSync(go, "");
    expect(JSON.parse(await say(b, h2, `/terminal-wait ${terminalId}`))).toEqual({
      terminalId,
      exit: { exitCode: 7, signal: null },
      output: "first\nsecond\n",
      truncated: false,
    });
    expect(await waitFor(() => leaseCarriers(lease.leaseId).length === 0, 10_000)).not.toBe(-1);
    expect((await b.closeSession({ handle: h2 })).leaseState).toBe("closed");
  }, 60_000);
});
