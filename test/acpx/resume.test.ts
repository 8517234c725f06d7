/**
 * Sessions survive a restart: the session record keeps the agent's session
 * id, and ensureSession on the key takes it back through session/resume or
 * session/load, whichever the agent advertises, else starts fresh and says
 * why. The restart is real: a gateway process running the controller is
 * SIGKILLed mid-turn and a new controller starts on its state dir. The
 * fixture agent keeps its sessions in a folder (--session-store), as a real
 * agent keeps them on disk. Build first (`npm run build`).
 */
import { execSync, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
  say,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

async function newController(stateDir: string): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  return ctl;
}

/** Runs the stand-in gateway until its last turn started; returns its handle and the process. */
async function gatewayMidTurn(stateDir: string, key: string, argv: string[]) {
  const gw = trackChild(
    spawn(
      process.execPath,
      [
        join(ROOT, "test/fixtures/acpx/conversation-gateway.mjs"),
        stateDir,
        key,
        JSON.stringify(argv),
        "hello",
        "&hang",
      ],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    ),
  );
  let handle: AcpRuntimeHandle | undefined;
  for await (const line of createInterface({ input: gw.stdout! })) {
    const ev = JSON.parse(line) as { type: string; handle?: AcpRuntimeHandle };
    if (ev.type === "ready") {
      handle = ev.handle!;
      trackLease(handle.leaseId);
    }
    if (ev.type === "turn-started") break;
  }
  return { gw, handle: handle! };
}

describe("resume after a restart", () => {
  for (const [caps, via] of [
    ["resume,load,close", "resume"],
    ["load,close", "load"],
  ] as const) {
    it(`a gateway SIGKILLed mid-turn; the next one takes the session back through session/${via}, and the agent sees the same id`, async () => {
      const stateDir = tempStateDir(`resume-${via}`);
      const store = join(stateDir, "agent-sessions");
      const argv = agentArgv({ extra: ["--turn=by-text", `--session-caps=${caps}`, `--session-store=${store}`] });
      const { gw, handle: first } = await gatewayMidTurn(stateDir, "k-resume", argv);
      // mid-turn: the agent has the "hang" prompt (its store says so) when the gateway dies
      const history = (): number => {
        try {
          return (
            JSON.parse(readFileSync(join(store, `${encodeURIComponent(first.acpSessionId)}.json`), "utf8")) as {
              history: unknown[];
            }
          ).history.length;
        } catch {
          return 0;
        }
      };
      expect(await waitFor(() => history() === 3, 10_000)).toBeGreaterThanOrEqual(0);
      gw.kill("SIGKILL");
      await new Promise((r) => gw.once("exit", r));
      // the wrapper ends its tree when the lifeline breaks
      expect(await waitFor(() => !alive(first.rootPid), 10_000)).toBeGreaterThanOrEqual(0);

      const ctl = await newController(stateDir);
      await ctl.reapStartupOrphans();
      const replayed: SessionUpdate[] = [];
      const h = await ctl.ensureSession({ sessionKey: "k-resume", agentId: "main", command: argv });
      trackLease(h.leaseId);
      const off = ctl.onUpdate(h, (u) => replayed.push(u));
      expect(h.leaseId).not.toBe(first.leaseId);
      expect(h).toMatchObject({ resumed: true, acpSessionId: first.acpSessionId, reused: false });
      expect(h.resumeReason).toBeUndefined();
      const who = JSON.parse(await say(ctl, h, "/whoami")) as { sessionId: string; how: string; pid: number };
      expect(who).toMatchObject({ sessionId: first.acpSessionId, how: via });
      if (via === "load") {
        // the agent replayed the conversation; the listener got it (held until it attached)
        expect(replayed.map((u) => u.sessionUpdate)).toEqual([
          "user_message_chunk",
          "agent_message_chunk",
          "user_message_chunk",
        ]);
      } else expect(replayed.filter((u) => u.sessionUpdate !== "available_commands_update")).toEqual([]);
      off();
      // the first gateway's lease settled; nothing of it runs
      const old = (await ctl.listLeases()).find((l) => l.leaseId === first.leaseId)!;
      expect(["closed", "lost"]).toContain(old.state);
      expect(leaseCarriers(first.leaseId)).toEqual([]);
      // close sends ACP session/close first (the agent records it), then the reap
      expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
      const file = readdirSync(store).find((f) => f.startsWith(encodeURIComponent(first.acpSessionId)))!;
      expect(JSON.parse(readFileSync(join(store, file), "utf8")).closed).toBe(true);
    });
  }

  it("an agent that cannot resume: a new session, and the handle says why", async () => {
    const stateDir = tempStateDir("resume-none");
    const argv = agentArgv({ extra: ["--session-caps=close"] });
    const ctl = await newController(stateDir);
    const first = await ctl.ensureSession({ sessionKey: "k-none", agentId: "main", command: argv });
    trackLease(first.leaseId);
    expect(first).toMatchObject({ resumed: false, resumeReason: "nothing to resume: a new session" });
    await ctl.closeSession({ handle: first });
    const h = await ctl.ensureSession({ sessionKey: "k-none", agentId: "main", command: argv });
    trackLease(h.leaseId);
    expect(h.resumed).toBe(false);
    expect(h.resumeReason).toContain("advertises neither sessionCapabilities.resume nor loadSession");
    expect(h.acpSessionId).not.toBe(first.acpSessionId);
    await ctl.closeSession({ handle: h });
  });

  it("an id the agent refuses: a new session with the agent's reason; discardPersistentState forgets the id; resume: false never asks", async () => {
    const stateDir = tempStateDir("resume-refused");
    const store = join(stateDir, "agent-sessions");
    const argv = agentArgv({ extra: [`--session-store=${store}`] });
    const ctl = await newController(stateDir);
    const h = await ctl.ensureSession({
      sessionKey: "k-ref",
      agentId: "main",
      command: argv,
      resumeSessionId: "fixture-unknown",
    });
    trackLease(h.leaseId);
    expect(h.resumed).toBe(false);
    expect(h.resumeReason).toMatch(
      /the agent refused session\/resume for session "fixture-unknown": .*a new session was started/,
    );
    // closed with its state kept: taken back
    await ctl.closeSession({ handle: h });
    const back = await ctl.ensureSession({ sessionKey: "k-ref", agentId: "main", command: argv });
    trackLease(back.leaseId);
    expect(back).toMatchObject({ resumed: true, acpSessionId: h.acpSessionId });
    // resume: false starts fresh even with a record
    await ctl.closeSession({ handle: back });
    const fresh = await ctl.ensureSession({ sessionKey: "k-ref", agentId: "main", command: argv, resume: false });
    trackLease(fresh.leaseId);
    expect(fresh.resumed).toBe(false);
    expect(fresh.acpSessionId).not.toBe(h.acpSessionId);
    // discarded: nothing to take back
    await ctl.closeSession({ handle: fresh, discardPersistentState: true });
    const after = await ctl.ensureSession({ sessionKey: "k-ref", agentId: "main", command: argv });
    trackLease(after.leaseId);
    expect(after).toMatchObject({ resumed: false, resumeReason: "nothing to resume: a new session" });
    // another agentId never gets this agent's session id
    await ctl.closeSession({ handle: after });
    const other = await ctl.ensureSession({ sessionKey: "k-ref", agentId: "other", command: argv });
    trackLease(other.leaseId);
    expect(other.resumed).toBe(false);
    await ctl.closeSession({ handle: other });
  });

  it("an adapter that crashed: the next ensureSession takes its session back on a new lease", async () => {
    const stateDir = tempStateDir("resume-crash");
    const argv = agentArgv({ extra: [`--session-store=${join(stateDir, "agent-sessions")}`] });
    let ended = false;
    const ctl = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      onSessionEnd: () => (ended = true),
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({ sessionKey: "k-crash", agentId: "main", command: argv });
    trackLease(h.leaseId);
    // the adapter (the wrapper's child) dies; the controller hears of it through the wrapper
    const adapter = Number(execSync(`pgrep -P ${h.rootPid}`).toString().trim().split("\n")[0]);
    process.kill(adapter, "SIGKILL");
    expect(await waitFor(() => ended, 5000)).toBeGreaterThanOrEqual(0);
    const back = await ctl.ensureSession({ sessionKey: "k-crash", agentId: "main", command: argv });
    trackLease(back.leaseId);
    expect(back).toMatchObject({ resumed: true, acpSessionId: h.acpSessionId, reused: false });
    expect(back.leaseId).not.toBe(h.leaseId);
    await ctl.closeSession({ handle: back });
  });
});
