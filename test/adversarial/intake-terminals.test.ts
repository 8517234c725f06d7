/**
 * Terminals an agent asks for faster than the gateway can spawn them (issue
 * 46, findings 11 and 12), from real hostile agents:
 * - 100 terminal/create sent at once: no more than the session's limit (16)
 *   are ever made; a slot is taken when a request is accepted, before the
 *   spawn is awaited, and the rest are refused and counted;
 * - terminals asked for while session/close is under way (sent right before
 *   the agent answers the close): none is alive once the close reported
 *   `closed`, and no terminal lease is left open or closing. A close refuses
 *   terminal/create from its start, and waits for spawns in flight, which
 *   end what they made.
 * Build first (`npm run build`): the wrapper runs from dist/.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import {
  alive,
  disposeAfterEach,
  GRACE_MS,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";
import { hostileAgent } from "./hostile-agent.js";

const controllers = disposeAfterEach();
const dir = mkdtempSync(join(tmpdir(), "proclease-intake-term-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** each terminal writes its pid, then sleeps: what was made can be counted and checked by the tests' own oracle */
const pidsOf = (file: string): number[] => {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  const pids = text.split("\n").filter(Boolean).map(Number);
  for (const p of pids) trackPid(p);
  return pids;
};

const terminalCreate = (pidfile: string): string =>
  `{ sessionId, command: "sh", args: ["-c", ${JSON.stringify(`echo $$ >> ${pidfile}; exec sleep 300`)}] }`;

async function terminalLeases(ctl: AcpxLifecycleController): Promise<{ leaseId: string; state: string }[]> {
  const all = await ctl.listLeases();
  const mine = all.filter((l) => l.sessionKey.startsWith("supervisor:acp-terminal-"));
  for (const l of mine) trackLease(l.leaseId);
  return mine;
}

async function newController(label: string, over: Record<string, unknown> = {}): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({
    stateDir: tempStateDir(label),
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    clientCapabilities: { terminal: true },
    ...over,
  });
  controllers.push(ctl);
  return ctl;
}

describe("terminals asked for faster than they spawn", () => {
  it("100 terminal/create at once: at most 16 are made, the rest refused and counted", async () => {
    const pidfile = join(dir, "burst.pids");
    // the flight bound is raised out of the way: the terminal limit alone must hold
    const ctl = await newController("term-burst", { intakeLimits: { maxRequestsInFlight: 4096 } });
    const command = hostileAgent("term-burst", {
      onMessage: `
        if (m.method === "session/prompt") {
          state.prompt = m.id;
          state.answers = 0;
          state.made = 0;
          for (let i = 0; i < 100; i++) send({ jsonrpc: "2.0", id: 5000 + i, method: "terminal/create", params: ${terminalCreate(pidfile)} });
          return;
        }
        if (m.id >= 5000 && m.id < 5100) {
          state.answers++;
          if (m.result) state.made++;
          if (state.answers === 100) {
            send({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "made " + state.made } } } });
            send({ jsonrpc: "2.0", id: state.prompt, result: { stopReason: "end_turn" } });
          }
        }`,
    });
    const h = await ctl.ensureSession({ sessionKey: "k-term-burst", agentId: "main", command });
    trackLease(h.leaseId);
    const turn = ctl.startTurn(h, "go");
    let text = "";
    for await (const u of turn.events) {
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") text += u.content.text;
    }
    await expect(turn.result).resolves.toMatchObject({ stopReason: "end_turn" });
    const st = await ctl.sessionStatus(h);
    const leases = await terminalLeases(ctl);
    console.log(
      `terminal burst: agent says "${text}"; live ${st.terminals.length}; refused ${JSON.stringify(st.intake?.refused)}`,
    );
    expect(text).toBe("made 16");
    expect(st.terminals.length).toBe(16);
    expect(st.intake.refused["too-many-terminals"]).toBe(84);
    expect(leases.length).toBe(16);
    expect(pidsOf(pidfile).length).toBeLessThanOrEqual(16);
    const report = await ctl.closeSession({ handle: h });
    expect(report.outcome).toBe("closed");
    expect(pidsOf(pidfile).filter(alive)).toEqual([]);
    expect((await terminalLeases(ctl)).filter((l) => l.state === "open" || l.state === "closing")).toEqual([]);
  }, 120_000);

  it("terminals asked for while session/close is under way: none outlives the close, no lease is left open", async () => {
    const ctl = await newController("term-close");
    for (let run = 0; run < 4; run++) {
      const pidfile = join(dir, `close-${run}.pids`);
      const command = hostileAgent(`term-close-${run}`, {
        agentCapabilities: { sessionCapabilities: { close: {} } },
        onMessage: `
          if (m.method === "session/close") {
            // four terminals, then the close's answer right behind them: their spawns are in flight when it arrives
            for (let i = 0; i < 4; i++) send({ jsonrpc: "2.0", id: 7000 + i, method: "terminal/create", params: ${terminalCreate(pidfile)} });
            send({ jsonrpc: "2.0", id: m.id, result: {} });
          }`,
      });
      const h = await ctl.ensureSession({ sessionKey: `k-term-close-${run}`, agentId: "main", command });
      trackLease(h.leaseId);
      const report = await ctl.closeSession({ handle: h });
      expect(report.outcome).toBe("closed");
      // right when the close says closed: nothing the agent asked for during it is alive
      expect(pidsOf(pidfile).filter(alive)).toEqual([]);
      expect((await terminalLeases(ctl)).filter((l) => l.state === "open" || l.state === "closing")).toEqual([]);
    }
  }, 120_000);

  it("a close that begins while terminals are spawning waits for the spawns and ends what they made", async () => {
    const ctl = await newController("term-spawning");
    for (let run = 0; run < 4; run++) {
      const pidfile = join(dir, `spawning-${run}.pids`);
      const command = hostileAgent(`term-spawning-${run}`, {
        onMessage: `
          if (m.method === "session/prompt") {
            for (let i = 0; i < 4; i++) send({ jsonrpc: "2.0", id: 7000 + i, method: "terminal/create", params: ${terminalCreate(pidfile)} });
          }`,
      });
      const h = await ctl.ensureSession({ sessionKey: `k-term-spawning-${run}`, agentId: "main", command });
      trackLease(h.leaseId);
      const turn = ctl.startTurn(h, "go");
      turn.result.catch(() => undefined);
      // the first terminal's lease is written before its spawn: the close begins with spawns in flight
      expect(await waitFor(async () => (await terminalLeases(ctl)).length > 0, 10_000)).toBeGreaterThanOrEqual(0);
      const report = await ctl.closeSession({ handle: h });
      expect(report.outcome).toBe("closed");
      expect(pidsOf(pidfile).filter(alive)).toEqual([]);
      expect((await terminalLeases(ctl)).filter((l) => l.state === "open" || l.state === "closing")).toEqual([]);
    }
  }, 120_000);
});
