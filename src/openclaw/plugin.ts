/**
 * The OpenClaw plugin entry (package.json `openclaw.extensions`, manifest
 * openclaw.plugin.json at the package root): `register(api)` registers a
 * service, and the service's start creates the runtime on the plugin's
 * config, waits until it runs (the startup reap of what an earlier gateway
 * left included) and registers it with the host SDK's
 * `registerAcpRuntimeBackend`; stop unregisters it and shuts the runtime
 * down (every live session closed through its lease, the state dir freed).
 *
 * The SDK is the host's: `openclaw/plugin-sdk/acp-runtime` is imported at
 * start time (OpenClaw links its own package into an installed plugin's
 * node_modules), never bundled, so the backend lands in the registry the
 * host's session manager reads. A registration mode other than "full"
 * (discovery, setup, CLI metadata) registers nothing.
 */
import { readFileSync } from "node:fs";
import type { ControllerLogger } from "../acpx/logger.js";
import { parsePluginConfig, runtimeOptionsFor } from "./plugin-config.js";
import { createOpenClawAcpRuntime, type OpenClawAcpRuntime } from "./runtime.js";
import type { OpenClawAcpRuntimeContract } from "./types.js";
import type { OpenClawAcpErrorCode } from "./errors.js";

export const PLUGIN_ID = "proclease";
export const ACP_RUNTIME_SDK = "openclaw/plugin-sdk/acp-runtime";

/** What this plugin uses of `openclaw/plugin-sdk/acp-runtime` (openclaw@2026.9.6). */
export interface AcpRuntimeSdk {
  registerAcpRuntimeBackend(backend: { id: string; runtime: OpenClawAcpRuntimeContract; healthy?: () => boolean }): void;
  unregisterAcpRuntimeBackend(id: string): void;
  AcpRuntimeError: new (code: OpenClawAcpErrorCode, message: string, options?: { detailCode?: string; cause?: unknown }) => Error;
}

/** The parts of OpenClaw's plugin API this entry uses. */
export interface PluginApiLike {
  registrationMode?: string;
  pluginConfig?: Record<string, unknown>;
  logger?: ControllerLogger;
  registerService(service: PluginServiceLike): void;
}

export interface PluginServiceContextLike {
  /** OpenClaw's state dir; the runtime's defaults to <it>/proclease */
  stateDir: string;
  logger?: ControllerLogger;
}

export interface PluginServiceLike {
  id: string;
  start(ctx: PluginServiceContextLike): Promise<void>;
  stop(ctx: PluginServiceContextLike): Promise<void>;
}

export interface PluginConfigSchemaLike {
  safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: { issues: Array<{ path: Array<string | number>; message: string }> } };
  jsonSchema: Record<string, unknown>;
}

export interface ProcleasePlugin {
  id: string;
  name: string;
  description: string;
  configSchema: PluginConfigSchemaLike;
  register(api: PluginApiLike): void;
  /** the runtime the service started (undefined before start and after stop) */
  runtime(): OpenClawAcpRuntime | undefined;
}

interface Manifest {
  id: string;
  name: string;
  description: string;
  configSchema: Record<string, unknown>;
}

/** Loads the host's SDK; a missing or foreign one is an error naming what is missing. */
export async function loadHostAcpRuntimeSdk(): Promise<AcpRuntimeSdk> {
  const specifier: string = ACP_RUNTIME_SDK;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(specifier)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(
      `proclease plugin: the OpenClaw SDK ${specifier} could not be loaded from the host (${err instanceof Error ? err.message : String(err)}); the plugin runs inside an OpenClaw install, which links its own openclaw package into the plugin's node_modules`,
      { cause: err },
    );
  }
  const missing = ["registerAcpRuntimeBackend", "unregisterAcpRuntimeBackend", "AcpRuntimeError"].filter((k) => typeof mod[k] !== "function");
  if (missing.length > 0) throw new Error(`proclease plugin: ${specifier} of this OpenClaw lacks ${missing.join(", ")} (tested with openclaw 2026.9.6)`);
  return mod as unknown as AcpRuntimeSdk;
}

function readManifest(): Manifest {
  // dist/openclaw/plugin.js (and src/openclaw/plugin.ts) → the package root
  return JSON.parse(readFileSync(new URL("../../openclaw.plugin.json", import.meta.url), "utf8")) as Manifest;
}

export function createProcleasePlugin(opts: { loadSdk?: () => Promise<AcpRuntimeSdk> } = {}): ProcleasePlugin {
  const manifest = readManifest();
  const loadSdk = opts.loadSdk ?? loadHostAcpRuntimeSdk;
  let runtime: OpenClawAcpRuntime | undefined;
  let sdk: AcpRuntimeSdk | undefined;
  return {
    id: manifest.id,
    name: manifest.name,
    description: manifest.description,
    configSchema: {
      jsonSchema: manifest.configSchema,
      safeParse(value) {
        try {
          return { success: true, data: parsePluginConfig(value) };
        } catch (err) {
          return { success: false, error: { issues: [{ path: [], message: err instanceof Error ? err.message : String(err) }] } };
        }
      },
    },
    runtime: () => runtime,
    register(api) {
      if (api.registrationMode !== undefined && api.registrationMode !== "full") return;
      // a malformed config fails the registration, loudly, before anything runs
      const config = parsePluginConfig(api.pluginConfig);
      api.registerService({
        id: `${PLUGIN_ID}-acp-runtime`,
        async start(ctx) {
          sdk = await loadSdk();
          const host = sdk;
          const logger = ctx.logger ?? api.logger;
          const started = createOpenClawAcpRuntime({
            ...runtimeOptionsFor(config, ctx.stateDir, logger),
            errorFactory: (code, message, o) => new host.AcpRuntimeError(code, message, o),
          });
          // a backend that cannot start (state dir held by another gateway, unwritable) is not registered; start fails naming why
          await started.ready;
          runtime = started;
          host.registerAcpRuntimeBackend({ id: started.backendId, runtime: started, healthy: () => started.healthy() });
          logger?.info?.(`proclease: ACP runtime backend "${started.backendId}" registered (state dir ${runtimeOptionsFor(config, ctx.stateDir, undefined).stateDir})`);
        },
        async stop() {
          const r = runtime;
          runtime = undefined;
          if (r === undefined) return;
          sdk?.unregisterAcpRuntimeBackend(r.backendId);
          // every live session is closed through its lease (verified reap, lease closed); a persistent
          // session keeps its agent session id, so the next gateway resumes it
          await r.shutdown();
        },
      });
    },
  };
}

const plugin: ProcleasePlugin = createProcleasePlugin();
export default plugin;
