/**
 * An agent's login failure inside the OpenClaw backend names what an OpenClaw
 * operator changes: the plugin setting `agents.<name>.authMethod`, the methods
 * the agent offers, and that the key goes in the agent's environment
 * (`agents.<name>.env`, or the gateway's own). Real processes: the fixture
 * agent with --require-auth. Build first (`npm run build`). The plugin config's
 * graceMs is bounded where OpenClaw validates it, as the controller bounds it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parsePluginConfig } from "../../src/openclaw/plugin-config.js";
import { disposeAfterEach, ROOT } from "../acpx/controller-helpers.js";
import { ensure, fixture, newRuntime, rejection } from "./helpers.js";

const controllers = disposeAfterEach();

describe("the auth failure names the plugin setting and where the key goes", () => {
  it("no method configured: AUTH_REQUIRED, naming agents.<name>.authMethod and agents.<name>.env", async () => {
    const rt = await newRuntime(controllers, "auth-msg", {
      agents: { fixture: { command: fixture("--require-auth=api-key,chat-gpt") } },
    });
    const e = await rejection(ensure(rt, { sessionKey: "agent:fixture:acp:auth-msg" }));
    expect(e).toMatchObject({ code: "ACP_SESSION_INIT_FAILED", detailCode: "AUTH_REQUIRED", retryable: false });
    expect(e.message).toContain(
      'agent "fixture" requires authentication and no method is configured: set plugins.entries.proclease.config.agents.fixture.authMethod to one the agent offers',
    );
    expect(e.message).toContain(
      'the agent offers "api-key" (authenticate with api-key), "chat-gpt" (authenticate with chat-gpt)',
    );
    expect(e.message).toContain("give the agent its key in its environment: agents.fixture.env in the same config");
    expect(e.message).not.toContain("ensureSession({ auth");
  });

  it("a method the agent refuses: AUTH_FAILED, naming the method tried and the same two settings", async () => {
    const rt = await newRuntime(controllers, "auth-msg-bad", {
      agents: { fixture: { command: fixture("--require-auth=api-key"), auth: { methodId: "chat-gpt" } } },
    });
    const e = await rejection(ensure(rt, { sessionKey: "agent:fixture:acp:auth-bad" }));
    expect(e).toMatchObject({ code: "ACP_SESSION_INIT_FAILED", retryable: false });
    expect(e.message).toMatch(/agents\.fixture\.authMethod/);
    expect(e.message).toMatch(/agents\.fixture\.env/);
  });
});

describe("the plugin config's graceMs", () => {
  it("is refused above the controller's bound at parse time, not when the service starts", () => {
    const agents = { fixture: { command: ["node"] } };
    expect(() => parsePluginConfig({ agents, graceMs: 600_001 })).toThrow(
      new TypeError("plugin config: graceMs must be an integer from 0 to 600000, got 600001"),
    );
    expect(parsePluginConfig({ agents, graceMs: 600_000 }).graceMs).toBe(600_000);
    const manifest = JSON.parse(readFileSync(join(ROOT, "openclaw.plugin.json"), "utf8")) as {
      configSchema: { properties: { graceMs: { maximum?: number } } };
    };
    expect(manifest.configSchema.properties.graceMs.maximum).toBe(600_000);
  });
});
