/**
 * The plugin entry as OpenClaw loads it: the manifest beside package.json,
 * the entry package.json names, register(api) → the reply_dispatch hook
 * (routed to the host SDK's dispatcher) and a service whose start
 * creates the runtime on the plugin config and registers it with the SDK's
 * registry, and whose stop unregisters it and gives the state dir back.
 * Without OpenClaw installed the SDK is a stand-in registry with the SDK's
 * three names; CI's openclaw step (.ci/openclaw-check.mjs) loads the real
 * one. The host SDK import itself is checked here: without openclaw it
 * fails naming the specifier.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import {
  createProcleasePlugin,
  loadHostAcpRuntimeSdk,
  type AcpRuntimeSdk,
  type PluginServiceLike,
} from "../../src/openclaw/plugin.js";
import type { OpenClawAcpRuntime } from "../../src/openclaw/runtime.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackLease,
  trackStateDir,
} from "../acpx/controller-helpers.js";
import { fixture } from "./helpers.js";

const controllers = disposeAfterEach();

function standInSdk() {
  const backends = new Map<string, { runtime: unknown; healthy?: () => boolean }>();
  class AcpRuntimeError extends Error {
    constructor(
      readonly code: string,
      message: string,
      readonly options?: { detailCode?: string },
    ) {
      super(message);
    }
  }
  const sdk: AcpRuntimeSdk = {
    registerAcpRuntimeBackend: (b) => backends.set(b.id, b),
    unregisterAcpRuntimeBackend: (id) => backends.delete(id),
    AcpRuntimeError,
  };
  return { sdk, backends, AcpRuntimeError };
}

describe("the OpenClaw plugin entry", () => {
  it("package.json names the built entry and the manifest ships beside it; the entry's schema is the manifest's", async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      openclaw: { extensions: string[] };
      files: string[];
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
      dependencies: Record<string, string>;
    };
    expect(pkg.openclaw.extensions).toEqual(["./dist/openclaw/plugin.js"]);
    expect(existsSync(join(ROOT, "dist/openclaw/plugin.js"))).toBe(true);
    expect(pkg.files).toContain("openclaw.plugin.json");
    expect(pkg.peerDependenciesMeta.openclaw).toEqual({ optional: true });
    expect(Object.keys(pkg.dependencies)).not.toContain("openclaw");
    const manifest = JSON.parse(readFileSync(join(ROOT, "openclaw.plugin.json"), "utf8")) as {
      id: string;
      configSchema: unknown;
    };
    // the built entry OpenClaw loads, by path (a type-check of the tests must not need dist/ built)
    const entry = (
      (await import(pathToFileURL(join(ROOT, "dist/openclaw/plugin.js")).href)) as {
        default: { id: string; configSchema: { jsonSchema: unknown } };
      }
    ).default;
    expect(entry.id).toBe(manifest.id);
    expect(entry.configSchema.jsonSchema).toEqual(manifest.configSchema);
  });

  it("register → service start: the runtime runs on the plugin config and is registered under its backend id; stop unregisters it, closes its live sessions through their leases and frees the state dir", async () => {
    const { sdk, backends, AcpRuntimeError } = standInSdk();
    const plugin = createProcleasePlugin({ loadSdk: async () => sdk });
    const services: PluginServiceLike[] = [];
    const logged: string[] = [];
    plugin.register({
      registrationMode: "full",
      pluginConfig: {
        backendId: "leased",
        graceMs: GRACE_MS,
        agents: { fixture: { command: fixture("--require-auth=api-key") }, plain: { command: fixture() } },
      },
      logger: { info: (m) => logged.push(m) },
      registerService: (s) => services.push(s),
    });
    expect(services.map((s) => s.id)).toEqual(["proclease-acp-runtime"]);
    const hostStateDir = tempStateDir("oc-plugin");
    trackStateDir(join(hostStateDir, "proclease"));
    await services[0]!.start({ stateDir: hostStateDir });
    const registered = backends.get("leased") as { runtime: OpenClawAcpRuntime; healthy: () => boolean };
    expect(registered.runtime).toBe(plugin.runtime());
    expect(registered.healthy()).toBe(true);
    expect(logged.some((m) => m.includes(`"leased" registered (state dir ${join(hostStateDir, "proclease")})`))).toBe(
      true,
    );
    // errors are the host's AcpRuntimeError: detailCode survives OpenClaw's boundary
    const e = await registered.runtime
      .ensureSession({ sessionKey: "agent:main:acp:p", agentId: "main", agent: "fixture", mode: "persistent" })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(AcpRuntimeError);
    expect(e).toMatchObject({
      code: "ACP_SESSION_INIT_FAILED",
      options: { detailCode: "AUTH_REQUIRED" },
      retryable: false,
    });
    const live = await registered.runtime.ensureSession({
      sessionKey: "agent:main:acp:live",
      agentId: "main",
      agent: "plain",
      mode: "persistent",
    });
    trackLease(live.leaseId);
    const pids = leaseCarriers(live.leaseId);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    await services[0]!.stop({ stateDir: hostStateDir });
    expect(backends.has("leased")).toBe(false);
    // the stop closed the live session through its lease
    expect(pids.filter((p) => alive(p))).toEqual([]);
    const store = await openLeaseStore(join(hostStateDir, "proclease"), { readOnly: true });
    expect((await store.get(live.leaseId))?.state).toBe("closed");
    expect(registered.healthy()).toBe(false);
    // the state dir is free again: another gateway's controller takes it
    const ctl = await createAcpxLifecycleController({
      stateDir: join(hostStateDir, "proclease"),
      maintenanceIntervalMs: 0,
    });
    controllers.push(ctl);
  });

  it("an authMethod in the plugin config authenticates the agent; permissions allow-once answers with its allow_once option", async () => {
    const { sdk, backends } = standInSdk();
    const plugin = createProcleasePlugin({ loadSdk: async () => sdk });
    const services: PluginServiceLike[] = [];
    plugin.register({
      pluginConfig: {
        graceMs: GRACE_MS,
        permissions: "allow-once",
        agents: { fixture: { command: fixture("--require-auth=api-key"), authMethod: "api-key" } },
      },
      registerService: (s) => services.push(s),
    });
    const hostStateDir = tempStateDir("oc-plugin-auth");
    // the plugin's state dir is <host state dir>/proclease: its lease cgroups are removed with it
    trackStateDir(join(hostStateDir, "proclease"));
    await services[0]!.start({ stateDir: hostStateDir });
    const rt = (backends.get("proclease") as { runtime: OpenClawAcpRuntime }).runtime;
    controllers.push(await rt.controller());
    const h = await rt.ensureSession({
      sessionKey: "agent:main:acp:a",
      agentId: "main",
      agent: "fixture",
      mode: "persistent",
    });
    trackLease(h.leaseId);
    let text = "";
    for await (const ev of rt.runTurn({ handle: h, text: "/story", mode: "prompt", requestId: "r" }))
      if (ev.type === "text_delta" && ev.stream === "output") text += ev.text;
    expect(text).toBe("permission: allow. Done.");
  });

  it("registers the reply_dispatch hook for ACP dispatches beside the service; the hook hands OpenClaw's event and context to the host SDK's tryDispatchAcpReplyHook untouched", async () => {
    const { sdk } = standInSdk();
    const seen: Array<{ event: unknown; ctx: unknown }> = [];
    let loads = 0;
    const host: AcpRuntimeSdk = {
      ...sdk,
      tryDispatchAcpReplyHook: async (event, ctx) => {
        seen.push({ event, ctx });
        return { handled: true, queuedFinal: true };
      },
    };
    const plugin = createProcleasePlugin({
      loadSdk: async () => {
        loads += 1;
        return host;
      },
    });
    const hooks: Array<{ name: string; handler: (event: unknown, ctx: unknown) => Promise<unknown>; opts: unknown }> =
      [];
    const services: PluginServiceLike[] = [];
    plugin.register({
      registrationMode: "full",
      pluginConfig: { agents: { a: { command: ["x"] } } },
      registerService: (s) => services.push(s),
      on: (name, handler, opts) => hooks.push({ name, handler, opts }),
    });
    expect(services).toHaveLength(1);
    expect(hooks.map((h) => [h.name, h.opts])).toEqual([["reply_dispatch", { eligibleDispatchKinds: ["acp"] }]]);
    const event = { sessionKey: "agent:a:acp:1", runId: "r1" };
    const ctx = { dispatchKind: "acp" };
    expect(await hooks[0]!.handler(event, ctx)).toEqual({ handled: true, queuedFinal: true });
    expect(await hooks[0]!.handler(event, ctx)).toEqual({ handled: true, queuedFinal: true });
    expect(seen).toEqual([
      { event, ctx },
      { event, ctx },
    ]);
    expect(seen[0]!.event).toBe(event);
    expect(loads).toBe(1);
    // a host SDK without the dispatcher: the hook fails naming what is missing (OpenClaw logs it and declines)
    const bare = createProcleasePlugin({ loadSdk: async () => sdk });
    const bareHooks: Array<(event: unknown, ctx: unknown) => Promise<unknown>> = [];
    bare.register({
      pluginConfig: { agents: { a: { command: ["x"] } } },
      registerService: () => {},
      on: (_n, h) => bareHooks.push(h),
    });
    await expect(bareHooks[0]!(event, ctx)).rejects.toThrow(/lacks tryDispatchAcpReplyHook/);
  });

  it("registers nothing outside full registration, and a malformed config fails register naming the field", () => {
    const plugin = createProcleasePlugin({ loadSdk: async () => standInSdk().sdk });
    const services: PluginServiceLike[] = [];
    const hooks: string[] = [];
    plugin.register({
      registrationMode: "discovery",
      pluginConfig: {},
      registerService: (s) => services.push(s),
      on: (name) => hooks.push(name),
    });
    expect(services).toEqual([]);
    expect(hooks).toEqual([]);
    expect(() =>
      plugin.register({
        registrationMode: "full",
        pluginConfig: { agents: { x: { command: ["a"], shell: "bash -c" } } },
        registerService: (s) => services.push(s),
      }),
    ).toThrow(/agents\.x\.shell is not an agent option/);
    expect(plugin.configSchema.safeParse({ agents: {}, graceMs: -1 })).toMatchObject({
      success: false,
      error: { issues: [{ message: expect.stringMatching(/graceMs/) }] },
    });
    expect(plugin.configSchema.safeParse({ agents: { a: { command: ["x"] } } })).toMatchObject({ success: true });
  });

  it("the host SDK is imported at start from the host: without openclaw installed the error names the specifier", async () => {
    await expect(loadHostAcpRuntimeSdk()).rejects.toThrow(
      /openclaw\/plugin-sdk\/acp-runtime could not be loaded from the host/,
    );
  });
});
