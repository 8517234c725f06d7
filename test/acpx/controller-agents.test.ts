/**
 * Agent-facing inputs and failures through the lifecycle controller, with real processes (the
 * bundled wrapper around the fixture ACP agent): ensureSession's `auth`
 * (authenticate before session/new; without it, the agent's methods in the
 * error), `envRemove` (read back from the adapter's /proc/<pid>/environ; the
 * markers refused), the ACP error data and stderr tail in AcpxEnsureError, a
 * protocol version the SDK cannot speak, prompt timeouts and aborts (typed,
 * session/cancel sent, the session usable after), and a SIGKILLed wrapper
 * named as such. Every failed ensure must leave its lease settled and no
 * process carrying it. Build first (`npm run build`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import {
  AcpxEnsureError,
  AcpxPromptError,
  type AcpxPromptAbortError,
  type AcpxPromptTimeoutError,
} from "../../src/acpx/report/errors.js";
import type { AcpRuntimeEnsureInput } from "../../src/acpx/connection/types.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../../src/ownership/leases/types.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  readPidfile,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
  environOf,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

async function newController(label: string, extra: { handshakeTimeoutMs?: number } = {}) {
  const stateDir = tempStateDir(label);
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0, ...extra });
  controllers.push(ctl);
  return { ctl, stateDir };
}

/** ensureSession that must fail; the error, with its lease tracked */
async function ensureFails(
  ctl: Awaited<ReturnType<typeof newController>>["ctl"],
  input: AcpRuntimeEnsureInput,
): Promise<AcpxEnsureError> {
  const err = await ctl.ensureSession(input).then(
    (h) => {
      trackLease(h.leaseId);
      throw new Error("ensureSession succeeded");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AcpxEnsureError);
  const e = err as AcpxEnsureError;
  if (e.leaseId) trackLease(e.leaseId);
  return e;
}

/** the failed attempt's lease is settled and nothing carries it any more */
async function expectSettled(ctl: Awaited<ReturnType<typeof newController>>["ctl"], e: AcpxEnsureError): Promise<void> {
  expect(["closed", "lost"], `lease ${e.leaseState}: ${e.message}`).toContain(e.leaseState);
  const lease = (await ctl.listLeases()).find((l) => l.leaseId === e.leaseId);
  expect(lease?.state).toBe(e.leaseState);
  expect(leaseCarriers(e.leaseId!)).toEqual([]);
}

describe("ensureSession: ACP authenticate", () => {
  it("with auth: { methodId } the agent that requires it gives a session", async () => {
    const { ctl } = await newController("auth-ok");
    const h = await ctl.ensureSession({
      sessionKey: "agent:main:acp:auth",
      agentId: "main",
      command: agentArgv({ extra: ["--require-auth=codex-api-key,chatgpt"] }),
      auth: { methodId: "codex-api-key" },
    });
    trackLease(h.leaseId);
    expect(h.acpSessionId).toMatch(/^fixture-/);
    await expect(ctl.prompt(h, "hello")).resolves.toEqual({ stopReason: "end_turn" });
    expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
  });

  it("with a resolver, it is asked with the agent's methods", async () => {
    const { ctl } = await newController("auth-resolver");
    const offered: string[][] = [];
    const h = await ctl.ensureSession({
      sessionKey: "agent:main:acp:auth-r",
      agentId: "main",
      command: agentArgv({ extra: ["--require-auth=codex-api-key,chatgpt"] }),
      auth: (methods) => {
        offered.push(methods.map((m) => m.id));
        return "chatgpt";
      },
    });
    trackLease(h.leaseId);
    expect(offered).toEqual([["codex-api-key", "chatgpt"]]);
  });

  it("without auth it fails auth-required with the agent's method list; the lease settles, nothing is left", async () => {
    const { ctl } = await newController("auth-missing");
    const e = await ensureFails(ctl, {
      sessionKey: "agent:main:acp:noauth",
      agentId: "main",
      command: agentArgv({ extra: ["--require-auth=codex-api-key,chatgpt"] }),
    });
    expect(e.failure).toBe("auth-required");
    expect(e.authMethods?.map((m) => m.id)).toEqual(["codex-api-key", "chatgpt"]);
    expect(e.message).toContain(
      "the agent offers: codex-api-key (Fixture method codex-api-key), chatgpt (Fixture method chatgpt)",
    );
    expect(e.acpError?.code).toBe(-32000);
    await expectSettled(ctl, e);
  });

  it("a method the agent does not offer fails auth-failed, listing what it offers", async () => {
    const { ctl } = await newController("auth-wrong");
    const e = await ensureFails(ctl, {
      sessionKey: "agent:main:acp:wrongauth",
      agentId: "main",
      command: agentArgv({ extra: ["--require-auth=codex-api-key"] }),
      auth: { methodId: "gemini-api-key" },
    });
    expect(e.failure).toBe("auth-failed");
    expect(e.message).toContain('"gemini-api-key" is not one the agent offers; the agent offers: codex-api-key');
    await expectSettled(ctl, e);
  });

  it("a malformed auth is a TypeError before any lease is written", async () => {
    const { ctl } = await newController("auth-bad");
    const base = { sessionKey: "k", agentId: "main", command: agentArgv({}) };
    await expect(ctl.ensureSession({ ...base, auth: { methodId: "" } })).rejects.toThrow(TypeError);
    await expect(ctl.ensureSession({ ...base, auth: "codex" as unknown as { methodId: string } })).rejects.toThrow(
      TypeError,
    );
    expect(await ctl.listLeases()).toEqual([]);
  });
});

describe("ensureSession: diagnostics and protocol version", () => {
  it("an error answer's data and the adapter's stderr are in AcpxEnsureError", async () => {
    const { ctl } = await newController("diag");
    const e = await ensureFails(ctl, {
      sessionKey: "agent:main:acp:diag",
      agentId: "main",
      command: agentArgv({ extra: ["--error-on=session/new", "--stderr-noise=40000"] }),
    });
    expect(e.failure).toBe("handshake-error");
    expect(e.acpError).toEqual({
      code: -32603,
      message: "Internal error",
      data: { fixture: "error-on", method: "session/new" },
    });
    expect(e.stderrTail).toContain("fixture cause: session/new refused on purpose");
    expect(Buffer.byteLength(e.stderrTail!)).toBeLessThanOrEqual(16 * 1024);
    expect(e.message).toContain('error data: {"fixture":"error-on","method":"session/new"}');
    // the stderr tail stays in its field unless the controller asks for it in messages
    expect(e.message).not.toContain("fixture cause: session/new refused on purpose");
    expect(e.message).toMatch(/the adapter wrote \d+ bytes of stderr/);
    await expectSettled(ctl, e);
  });

  it("with stderrInMessages: true the message carries the last stderr lines too", async () => {
    const stateDir = tempStateDir("stderr-in-msg");
    const ctl = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      stderrInMessages: true,
    });
    controllers.push(ctl);
    const e = await ensureFails(ctl, {
      sessionKey: "agent:main:acp:diag2",
      agentId: "main",
      command: agentArgv({ extra: ["--error-on=session/new"] }),
    });
    expect(e.message).toContain("adapter stderr:");
    expect(e.message).toContain("fixture cause: session/new refused on purpose");
    await expectSettled(ctl, e);
  });

  it("a protocol version the SDK cannot speak fails protocol-version", async () => {
    const { ctl } = await newController("proto");
    const e = await ensureFails(ctl, {
      sessionKey: "agent:main:acp:proto",
      agentId: "main",
      command: agentArgv({ extra: ["--protocol-version=2"] }),
    });
    expect(e.failure).toBe("protocol-version");
    expect(e.agentProtocolVersion).toBe(2);
    expect(e.message).toContain("ACP protocol version 2; this client (@agentclientprotocol/sdk, v1) speaks 1 only");
    await expectSettled(ctl, e);
  });
});

describe("ensureSession: envRemove", () => {
  it("the adapter's real environment lacks the removed keys; the markers stay", async () => {
    const KEY = "PROCLEASE_TEST_OPENAI_API_KEY";
    const OTHER = "PROCLEASE_TEST_ANTHROPIC_API_KEY";
    process.env[KEY] = "sk-test";
    process.env[OTHER] = "sk-other";
    try {
      const { ctl, stateDir } = await newController("envremove");
      const pidfile = join(stateDir, "agent.json");
      const h = await ctl.ensureSession({
        sessionKey: "agent:main:acp:env",
        agentId: "main",
        command: agentArgv({ pidfile }),
        envRemove: [KEY],
      });
      trackLease(h.leaseId);
      const { pid } = await readPidfile(pidfile);
      const env = environOf(pid);
      expect(env.has(KEY)).toBe(false);
      expect(env.get(OTHER)).toBe("sk-other");
      expect(env.get(LEASE_ENV_KEY)).toBe(h.leaseId);
      expect(env.get(INSTANCE_ENV_KEY)).toBe(ctl.gatewayInstanceId);
      expect(environOf(h.rootPid).has(KEY)).toBe(false);
    } finally {
      delete process.env[KEY];
      delete process.env[OTHER];
    }
  });

  it("asking to remove a marker is a TypeError naming both markers; no lease is written", async () => {
    const { ctl } = await newController("envremove-marker");
    for (const marker of [LEASE_ENV_KEY, INSTANCE_ENV_KEY]) {
      const err = await ctl
        .ensureSession({ sessionKey: "k", agentId: "main", command: agentArgv({}), envRemove: ["X", marker] })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TypeError);
      expect((err as Error).message).toContain(`input.envRemove[1]: ${marker} cannot be removed`);
      expect((err as Error).message).toContain(`${LEASE_ENV_KEY} and ${INSTANCE_ENV_KEY}`);
    }
    expect(await ctl.listLeases()).toEqual([]);
  });
});

describe("prompt: timeoutMs and signal", () => {
  async function session(label: string) {
    const { ctl } = await newController(label);
    const h = await ctl.ensureSession({
      sessionKey: `agent:main:acp:${label}`,
      agentId: "main",
      command: agentArgv({ extra: ["--turn=by-text"] }),
    });
    trackLease(h.leaseId);
    return { ctl, h };
  }

  it("timeout: AcpxPromptTimeoutError after session/cancel ended the turn; the next prompt works", async () => {
    const { ctl, h } = await session("timeout");
    const e = (await ctl.prompt(h, "hang", { timeoutMs: 300 }).catch((x: unknown) => x)) as AcpxPromptTimeoutError;
    expect(e.name).toBe("AcpxPromptTimeoutError");
    expect(e.cancelSent).toBe(true);
    expect(e.turnEnded).toBe(true);
    expect(e.stopReason).toBe("cancelled"); // the agent ends a "hang" turn only on session/cancel
    await expect(ctl.prompt(h, "next")).resolves.toEqual({ stopReason: "end_turn" });
    expect(alive(h.rootPid)).toBe(true);
  });

  it("abort: an error named AbortError after session/cancel; the next prompt works", async () => {
    const { ctl, h } = await session("abort");
    const ac = new AbortController();
    const p = ctl.prompt(h, "hang", { signal: ac.signal });
    setTimeout(() => ac.abort(), 200);
    const e = (await p.catch((x: unknown) => x)) as AcpxPromptAbortError;
    expect(e.name).toBe("AbortError");
    expect(e.cancelSent).toBe(true);
    expect(e.stopReason).toBe("cancelled");
    await expect(ctl.prompt(h, "next")).resolves.toEqual({ stopReason: "end_turn" });
  });

  it("an agent that stops answering keeps the turn: the next prompt is refused until a close", async () => {
    const { ctl, h } = await session("deaf");
    const e = (await ctl
      .prompt(h, "deaf", { timeoutMs: 200, cancelGraceMs: 200 })
      .catch((x: unknown) => x)) as AcpxPromptTimeoutError;
    expect(e.name).toBe("AcpxPromptTimeoutError");
    expect(e.turnEnded).toBe(false);
    await expect(ctl.prompt(h, "next")).rejects.toThrow(/already has a prompt running/);
    const report = await ctl.closeSession({ handle: h });
    expect(report.outcome).toBe("closed");
    expect(report.interruptedPrompt).toBe(true);
  });

  it("bad options are TypeErrors / RangeErrors", async () => {
    const { ctl, h } = await session("badopts");
    await expect(ctl.prompt(h, "x", { timeoutMs: 0 })).rejects.toThrow(RangeError);
    await expect(ctl.prompt(h, "x", { timeoutMs: Number.NaN })).rejects.toThrow(TypeError);
    await expect(ctl.prompt(h, "x", { signal: {} as AbortSignal })).rejects.toThrow(TypeError);
    await expect(ctl.prompt(h, "x")).resolves.toEqual({ stopReason: "end_turn" });
  });
});

describe("a SIGKILLed wrapper is named as the wrapper's death", () => {
  it("during the handshake: AcpxEnsureError wrapper-failed naming the kill; the orphaned adapter is reaped by lease", async () => {
    const { ctl, stateDir } = await newController("kill-hs", { handshakeTimeoutMs: 20_000 });
    const pidfile = join(stateDir, "agent.json");
    const pending = ensureFails(ctl, {
      sessionKey: "agent:main:acp:killhs",
      agentId: "main",
      command: agentArgv({ pidfile, extra: ["--never-answer"] }),
    });
    const { pid: adapterPid } = await readPidfile(pidfile);
    // the wrapper is the adapter's parent
    const stat = readFileSync(`/proc/${adapterPid}/stat`, "utf8");
    const wrapperPid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    trackPid(wrapperPid);
    process.kill(wrapperPid, "SIGKILL");
    const e = await pending;
    expect(e.failure).toBe("wrapper-failed");
    expect(e.message).toContain(`the wrapper (pid ${wrapperPid}) was killed by SIGKILL`);
    expect(e.message).not.toContain("the adapter exited");
    expect(e.end?.kind).toBe("wrapper-killed");
    // The orphaned adapter is reaped through the lease (found by its markers).
    // Its lease may stay "closing" when the last remnant search met it mid-exit
    // (environment already unreadable, not yet a zombie): the maintenance
    // retry, here a startup reap, settles it.
    expect(["closed", "lost", "closing"]).toContain(e.leaseState);
    if (e.leaseState === "closing") await ctl.reapStartupOrphans();
    expect(["closed", "lost"]).toContain((await ctl.listLeases()).find((l) => l.leaseId === e.leaseId)?.state);
    expect(await waitFor(() => !alive(adapterPid), 5000)).toBeGreaterThanOrEqual(0);
    expect(leaseCarriers(e.leaseId!)).toEqual([]);
  });

  it("during a prompt: AcpxPromptError wrapper-killed; the session takes no new prompt; close reaps the orphaned adapter", async () => {
    const { ctl, stateDir } = await newController("kill-turn");
    const pidfile = join(stateDir, "agent.json");
    const h = await ctl.ensureSession({
      sessionKey: "agent:main:acp:killturn",
      agentId: "main",
      // Node destroys our end of the adapter's stdin when the wrapper (our child) exits; this adapter stays anyway
      command: agentArgv({ pidfile, surviveStdinClose: true, extra: ["--turn=by-text"] }),
    });
    trackLease(h.leaseId);
    const { pid: adapterPid } = await readPidfile(pidfile);
    const p = ctl.prompt(h, "hang");
    process.kill(h.rootPid, "SIGKILL");
    const e = (await p.catch((x: unknown) => x)) as AcpxPromptError;
    expect(e).toBeInstanceOf(AcpxPromptError);
    expect(e.failure).toBe("wrapper-killed");
    expect(e.message).toContain(`the wrapper (pid ${h.rootPid}) was killed by SIGKILL`);
    expect(e.message).not.toContain("the adapter exited");
    const again = (await ctl.prompt(h, "hello").catch((x: unknown) => x)) as AcpxPromptError;
    expect(again.failure).toBe("wrapper-killed");
    expect(alive(adapterPid)).toBe(true); // nothing supervises it now but its lease
    const report = await ctl.closeSession({ handle: h });
    expect(["closed", "lost"]).toContain(report.outcome);
    expect(await waitFor(() => !alive(adapterPid), 5000)).toBeGreaterThanOrEqual(0);
    expect(leaseCarriers(h.leaseId)).toEqual([]);
  });
});
