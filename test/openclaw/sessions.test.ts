/**
 * Session lifetimes of the OpenClaw backend on real processes: oneshot
 * closes after its turn, persistent resumes after a gateway process was
 * SIGKILLed mid-turn (the next runtime reaps what the first left),
 * close({ discardPersistentState }) forgets the agent session,
 * prepareFreshSession makes the next ensure fresh, and doctor reports
 * what `proclease doctor` does. Build first (`npm run build`).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { withTimeout } from "../../src/acpx/connection/acp-client.js";
import type { ProcleaseOpenClawHandle } from "../../src/openclaw/runtime.js";
import {
  alive,
  disposeAfterEach,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "../acpx/controller-helpers.js";
import { collect, ensure, fixture, newRuntime, replyText, turnInput, type Runtime } from "./helpers.js";

const controllers = disposeAfterEach();

/** `p`, or a rejection naming the step when it takes longer than `ms` (a hang then says where it was). */
const step = <T>(name: string, p: Promise<T>, ms = 20_000): Promise<T> => withTimeout(`step "${name}"`, ms, p);

async function leaseState(rt: Runtime, leaseId: string): Promise<string | undefined> {
  return (await (await rt.controller()).listLeases()).find((l) => l.leaseId === leaseId)?.state;
}

async function whoami(
  rt: Runtime,
  h: ProcleaseOpenClawHandle,
): Promise<{ sessionId: string; how: string; pid: number }> {
  return JSON.parse(replyText(await collect(rt.runTurn(turnInput(h, "/whoami"))))) as {
    sessionId: string;
    how: string;
    pid: number;
  };
}

describe("session modes", () => {
  it("a oneshot session closes after its turn: its tree ends and its lease settles closed, while OpenClaw's close finds nothing left", async () => {
    const rt = await newRuntime(controllers, "oneshot");
    const h = await ensure(rt, { mode: "oneshot" });
    const pids = leaseCarriers(h.leaseId);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    const r = await rt.startTurn(turnInput(h, "hello")).result;
    expect(r).toEqual({ status: "completed", stopReason: "end_turn" });
    expect(await waitFor(async () => (await leaseState(rt, h.leaseId)) === "closed", 10_000)).toBeGreaterThanOrEqual(0);
    expect(pids.filter((p) => alive(p))).toEqual([]);
    // OpenClaw's manager closes a oneshot handle after the turn too: it waits for the close in flight and finds it done
    await rt.close({ handle: h, reason: "oneshot-complete" });
    expect((await rt.getStatus({ handle: h })).details).toMatchObject({ status: "no-session" });
    // the next oneshot ensure on the key starts a new agent session
    const next = await ensure(rt, { sessionKey: h.sessionKey, mode: "oneshot" });
    expect(next.agentSessionId).not.toBe(h.agentSessionId);
  });

  it("close({ discardPersistentState }) forgets the agent session; a plain close keeps it for the next ensure", async () => {
    const stateDir = tempStateDir("oc-discard");
    const argv = fixture(`--session-store=${join(stateDir, "agent-sessions")}`);
    const rt = await newRuntime(controllers, "discard", { agents: { fixture: { command: argv } } }, stateDir);
    const a = await ensure(rt, { sessionKey: "agent:main:acp:keep" });
    await rt.close({ handle: a, reason: "pause" });
    const a2 = await ensure(rt, { sessionKey: "agent:main:acp:keep" });
    expect(a2.leaseId).not.toBe(a.leaseId);
    expect(a2.agentSessionId).toBe(a.agentSessionId);
    expect(await whoami(rt, a2)).toMatchObject({ sessionId: a.agentSessionId, how: "resume" });
    await rt.close({ handle: a2, reason: "reset", discardPersistentState: true });
    const a3 = await ensure(rt, { sessionKey: "agent:main:acp:keep" });
    expect(a3.agentSessionId).not.toBe(a.agentSessionId);
    expect(await whoami(rt, a3)).toMatchObject({ how: "new" });
  });

  it("prepareFreshSession closes what runs on the key and makes the next ensure start a new agent session", async () => {
    const stateDir = tempStateDir("oc-fresh");
    const argv = fixture(`--session-store=${join(stateDir, "agent-sessions")}`);
    const rt = await newRuntime(controllers, "fresh", { agents: { fixture: { command: argv } } }, stateDir);
    const a = await ensure(rt, { sessionKey: "agent:main:acp:fresh" });
    const pids = leaseCarriers(a.leaseId);
    await rt.prepareFreshSession({ sessionKey: a.sessionKey, agentId: "main" });
    expect(await leaseState(rt, a.leaseId)).toBe("closed");
    expect(pids.filter((p) => alive(p))).toEqual([]);
    // even when OpenClaw still offers the old id, the prepared ensure starts fresh
    const b = await ensure(rt, { sessionKey: a.sessionKey, resumeSessionId: a.agentSessionId });
    expect(b.agentSessionId).not.toBe(a.agentSessionId);
    expect(await whoami(rt, b)).toMatchObject({ how: "new" });
    // the mark is used up: the key's next close and ensure resume again
    await rt.close({ handle: b, reason: "pause" });
    expect((await ensure(rt, { sessionKey: a.sessionKey })).agentSessionId).toBe(b.agentSessionId);
  });
});

describe("a gateway SIGKILLed mid-turn", () => {
  it("the next runtime on the state dir reaps what the first left, settles its lease, and the persistent session resumes", async () => {
    const stateDir = tempStateDir("oc-crash");
    const argv = fixture("--turn=by-text", `--session-store=${join(stateDir, "agent-sessions")}`);
    const gw = trackChild(
      spawn(
        process.execPath,
        [join(ROOT, "test/fixtures/openclaw/gateway.mjs"), stateDir, "agent:main:acp:crash", JSON.stringify(argv)],
        { stdio: ["ignore", "pipe", "inherit"] },
      ),
    );
    // heard from the spawn on: a gateway that dies early must not leave the wait below hanging
    const exited = new Promise((r) => gw.once("exit", r));
    let first: ProcleaseOpenClawHandle | undefined;
    let started = false;
    await step(
      "the first gateway's ready and turn-started lines",
      (async () => {
        for await (const line of createInterface({ input: gw.stdout! })) {
          const ev = JSON.parse(line) as { type: string; handle?: ProcleaseOpenClawHandle };
          if (ev.type === "ready") {
            first = ev.handle!;
            trackLease(first.leaseId);
          }
          if (ev.type === "turn-started") {
            started = true;
            break;
          }
        }
      })(),
    );
    expect(first, "the first gateway printed ready").toBeDefined();
    expect(started, "the first gateway printed turn-started before its output ended").toBe(true);
    const firstPids = leaseCarriers(first!.leaseId);
    expect(firstPids.length).toBeGreaterThanOrEqual(2);
    gw.kill("SIGKILL");
    await step("the first gateway's exit", exited);

    const rt = await step(
      "the second runtime with its startup reap",
      newRuntime(controllers, "crash-2", { agents: { fixture: { command: argv } } }, stateDir),
    );
    // the startup reap examined the first gateway's lease and settled it
    expect(rt.startupReap?.entries.map((e) => e.leaseId)).toContain(first!.leaseId);
    expect(["closed", "lost"]).toContain(await leaseState(rt, first!.leaseId));
    expect(firstPids.filter((p) => alive(p))).toEqual([]);
    expect(leaseCarriers(first!.leaseId)).toEqual([]);
    // OpenClaw re-ensures from its stored metadata, offering the agent session id it kept
    const again = await step(
      "the resuming ensure",
      ensure(rt, { sessionKey: "agent:main:acp:crash", resumeSessionId: first!.agentSessionId! }),
    );
    expect(again.leaseId).not.toBe(first!.leaseId);
    expect(again.agentSessionId).toBe(first!.agentSessionId);
    expect((await rt.getStatus({ handle: again })).details).toMatchObject({ resumed: true });
    expect(await step("a turn on the resumed session", whoami(rt, again))).toMatchObject({
      sessionId: first!.agentSessionId,
      how: "resume",
    });
    const leases = await (await rt.controller()).listLeases();
    expect(leases.filter((l) => l.state === "open").map((l) => l.leaseId)).toEqual([again.leaseId]);
  }, 60_000);
});

describe("doctor", () => {
  it("reports the facts backend, identity strength, containment and each agent, as proclease doctor does; a missing adapter makes it not ok", async () => {
    const stateDir = tempStateDir("oc-doctor");
    const rt = await newRuntime(
      controllers,
      "doctor",
      { agents: { fixture: { command: fixture() }, ghost: { command: ["definitely-not-an-acp-adapter"] } } },
      stateDir,
    );
    const ctl = await rt.controller();
    const d = await rt.doctor();
    expect(d.ok).toBe(false);
    expect(d.code).toBe("AGENT_COMMAND_MISSING");
    expect(d.message).toMatch(
      /^proclease backend "proclease": facts (native|procfs|ps) \((exact|coarse) identity\), containment (on|off), 2 agents: ghost/,
    );
    const rows = d.details!.map((l) => l.split(":")[0]);
    for (const cap of [
      "backend",
      "identity",
      "pidfd",
      "subreaper",
      "foreign-env",
      "proc-visibility",
      "containment",
      "orphan-cgroups",
    ])
      expect(rows).toContain(cap);
    const containment = ctl.containment.available ? `on (${ctl.containment.root})` : `off: ${ctl.containment.why}`;
    expect(d.details).toContain(
      `gateway: instance ${ctl.gatewayInstanceId}, state dir ${stateDir}, containment ${containment}`,
    );
    expect(d.details!.find((l) => l.startsWith("agent fixture:"))).toMatch(
      new RegExp(`agent fixture: ${process.execPath}`),
    );
    expect(d.details!.find((l) => l.startsWith("agent ghost:"))).toMatch(/NOT FOUND/);
    const ok = await newRuntime(controllers, "doctor-ok");
    expect(await ok.doctor()).toMatchObject({ ok: true });
  });
});
