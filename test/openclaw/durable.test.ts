/**
 * The OpenClaw plugin with `durable` (docs/openclaw.md "Durable sessions"):
 * a service stop (a config reload, `openclaw gateway restart`, SIGTERM)
 * detaches instead of closing, so each session's adapter keeps running; the
 * next start re-adopts it, the next message is answered by the same adapter
 * process, and the turn the stop interrupted, which the agent finished
 * meanwhile, is shown before that reply. Real processes; the SDK is the
 * stand-in registry of plugin.test.ts.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createProcleasePlugin, type AcpRuntimeSdk, type PluginServiceLike } from "../../src/openclaw/plugin.js";
import type { OpenClawAcpRuntime } from "../../src/openclaw/runtime.js";
import {
  alive,
  disposeAfterEach,
  GRACE_MS,
  tempStateDir,
  trackLease,
  trackStateDir,
} from "../acpx/controller-helpers.js";
import { nativeWrapperPath } from "../acpx/durable-helpers.js";
import { collect, fixture, replyText, turnInput } from "./helpers.js";

disposeAfterEach();
const have = nativeWrapperPath() !== null && existsSync(nativeWrapperPath()!);
const d = have ? describe : describe.skip;
if (!have) console.log("durable OpenClaw tests skipped: no native wrapper (Linux with the addon built)");

function sdk(): { sdk: AcpRuntimeSdk; backends: Map<string, { runtime: unknown }> } {
  const backends = new Map<string, { runtime: unknown }>();
  class AcpRuntimeError extends Error {
    constructor(
      readonly code: string,
      message: string,
    ) {
      super(message);
    }
  }
  return {
    backends,
    sdk: {
      registerAcpRuntimeBackend: (b) => backends.set(b.id, b),
      unregisterAcpRuntimeBackend: (id) => backends.delete(id),
      AcpRuntimeError,
    },
  };
}

/** One gateway run of the plugin on `hostStateDir`: its service started, its runtime returned. */
async function gatewayRun(
  hostStateDir: string,
  flags: string[] = [],
): Promise<{ service: PluginServiceLike; runtime: OpenClawAcpRuntime }> {
  const s = sdk();
  const plugin = createProcleasePlugin({ loadSdk: async () => s.sdk });
  const services: PluginServiceLike[] = [];
  plugin.register({
    registrationMode: "full",
    pluginConfig: {
      graceMs: GRACE_MS,
      durable: { reattachWithinMs: 60_000 },
      agents: { fixture: { command: fixture("--stream-batch", "4", "--stream-gap-ms", "30", ...flags) } },
    },
    registerService: (x) => services.push(x),
  });
  await services[0]!.start({ stateDir: hostStateDir });
  return { service: services[0]!, runtime: s.backends.get("proclease")!.runtime as OpenClawAcpRuntime };
}

const session = {
  sessionKey: "agent:main:acp:durable",
  agentId: "main",
  agent: "fixture",
  mode: "persistent",
} as const;
const whoamiPid = (text: string) => (JSON.parse(text) as { pid: number }).pid;

/** The first gateway run on a state dir of its own, its session ensured, and its adapter's pid (the fixture's /whoami). */
async function firstRun(name: string, flags: string[] = []) {
  const hostStateDir = tempStateDir(name);
  trackStateDir(join(hostStateDir, "proclease"));
  const first = await gatewayRun(hostStateDir, flags);
  const h = await first.runtime.ensureSession(session);
  trackLease(h.leaseId);
  const pid = whoamiPid(replyText(await collect(first.runtime.runTurn(turnInput(h, "/whoami")))));
  return { hostStateDir, first, h, pid };
}

/** The next gateway re-adopts the session: the interrupted `/count 40`, whole and once, ended end_turn, comes first, then the same adapter process answers. */
async function expectReadopted(hostStateDir: string, h: { leaseId: string }, pid: number): Promise<void> {
  const second = await gatewayRun(hostStateDir);
  const h2 = await second.runtime.ensureSession(session);
  expect(h2.leaseId).toBe(h.leaseId);
  const events = await collect(second.runtime.runTurn(turnInput(h2, "/whoami")));
  const status = events.find((e) => e.type === "status");
  expect(status).toMatchObject({ type: "status", text: expect.stringMatching(/interrupted \(it ended: end_turn\)/) });
  const text = replyText(events);
  const counted = Array.from({ length: 40 }, (_, i) => `${i + 1} `).join("");
  expect(text.startsWith(counted)).toBe(true);
  expect(whoamiPid(text.slice(counted.length))).toBe(pid);
  await second.service.stop({ stateDir: hostStateDir });
}

d("the OpenClaw plugin with durable sessions", () => {
  it("a service stop mid-turn keeps the adapter; after the restart the same adapter answers, and the interrupted turn's reply comes first", async () => {
    const { hostStateDir, first, h, pid } = await firstRun("oc-durable");
    // a turn under way when the service stops (a config reload, a restart)
    const turn = first.runtime.startTurn(turnInput(h, "/count 40"));
    await turn.promptStarted;
    for await (const ev of turn.events) if (ev.type === "text_delta") break;
    await first.service.stop({ stateDir: hostStateDir });
    expect(alive(pid)).toBe(true);
    await expectReadopted(hostStateDir, h, pid);
  });

  it("OpenClaw's own shutdown (turn signals aborted, then cancel and close with reason gateway-shutdown, then the service's stop) is a handover: the turn runs to its end and the same adapter answers after the restart", async () => {
    const { hostStateDir, first, h, pid } = await firstRun("oc-durable-shutdown");
    const abort = new AbortController();
    const turn = first.runtime.startTurn(turnInput(h, "/count 40", { signal: abort.signal }));
    await turn.promptStarted;
    for await (const ev of turn.events) if (ev.type === "text_delta") break;
    // as OpenClaw's session manager disposes itself at gateway shutdown (server-close, "gateway-shutdown")
    abort.abort();
    await first.runtime.cancel({ handle: h, reason: "gateway-shutdown" });
    await first.runtime.close({ handle: h, reason: "gateway-shutdown" });
    await first.service.stop({ stateDir: hostStateDir });
    expect(alive(pid)).toBe(true);
    await expectReadopted(hostStateDir, h, pid);
  });

  it("with any other reason, an aborted signal and a close do what they always did: the turn is cancelled, the session ended", async () => {
    const { hostStateDir, first, h, pid } = await firstRun("oc-durable-reasons", ["--turn=by-text"]);
    const abort = new AbortController();
    const turn = first.runtime.startTurn(turnInput(h, "hang", { signal: abort.signal }));
    await turn.promptStarted;
    abort.abort();
    expect(await turn.result).toEqual({ status: "cancelled", stopReason: "cancelled" });
    await first.runtime.close({ handle: h, reason: "user-close" });
    expect(alive(pid)).toBe(false);
    await first.service.stop({ stateDir: hostStateDir });
  });

  it("the plugin config's durable is checked at register: reattachWithinMs from 1 to 600000", () => {
    const plugin = createProcleasePlugin({ loadSdk: async () => sdk().sdk });
    for (const durable of [{ reattachWithinMs: 0 }, { reattachWithinMs: 600_001 }, { within: 5 }])
      expect(() =>
        plugin.register({
          registrationMode: "full",
          pluginConfig: { durable, agents: { fixture: { command: fixture() } } },
          registerService: () => undefined,
        }),
      ).toThrow(TypeError);
  });
});
