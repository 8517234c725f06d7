/**
 * The OpenClaw plugin entry (package.json `openclaw.extensions`, manifest
 * openclaw.plugin.json at the package root). `register(api)` registers what
 * an OpenClaw ACP backend plugin registers:
 * - a service, whose start creates the runtime on the plugin's config, waits
 *   until it runs (the startup reap of what an earlier gateway left
 *   included) and registers it with the host SDK's
 *   `registerAcpRuntimeBackend`; stop unregisters it and shuts the runtime
 *   down (every live session closed through its lease, the state dir freed),
 *   or with `durable` detaches it (every session left running for the next
 *   gateway to re-adopt, the state dir freed);
 * - the `reply_dispatch` hook, limited to the `acp` dispatch kind, handled
 *   by the SDK's `tryDispatchAcpReplyHook`. OpenClaw hands an inbound chat
 *   message to an ACP backend only through a plugin that claims this hook;
 *   without it a message to an ACP session goes to OpenClaw's built-in model
 *   agent. The SDK's handler routes the message to the backend `acp.backend`
 *   names, so whichever ACP plugin claims it first, the configured backend
 *   runs the turn. No timeout is set on the hook: a turn lasts as long as the
 *   agent works, and its end is the backend's (cancel, turn timeout).
 *
 * The SDK is the host's: `openclaw/plugin-sdk/acp-runtime` is imported at
 * start time (OpenClaw links its own package into an installed plugin's
 * node_modules), never bundled, so the backend lands in the registry the
 * host's session manager reads. A registration mode other than "full"
 * (discovery, setup, CLI metadata) registers nothing.
 */
import { readFileSync } from "node:fs";
import type { ControllerLogger } from "../acpx/report/logger.js";
import { parsePluginConfig, runtimeOptionsFor } from "./plugin-config.js";
import { createOpenClawAcpRuntime, type OpenClawAcpRuntime } from "./runtime.js";
import type { OpenClawAcpRuntimeContract } from "./types.js";
import type { OpenClawAcpErrorCode } from "./errors.js";

export const PLUGIN_ID = "proclease";
export const ACP_RUNTIME_SDK = "openclaw/plugin-sdk/acp-runtime";

/** What this plugin uses of `openclaw/plugin-sdk/acp-runtime` (openclaw@2026.9.6). */
export interface AcpRuntimeSdk {
  registerAcpRuntimeBackend(backend: {
    id: string;
    runtime: OpenClawAcpRuntimeContract;
    healthy?: () => boolean;
  }): void;
  unregisterAcpRuntimeBackend(id: string): void;
  AcpRuntimeError: new (
    code: OpenClawAcpErrorCode,
    message: string,
    options?: { detailCode?: string; cause?: unknown },
  ) => Error;
  /** the host's reply_dispatch handler for ACP sessions; absent in a stand-in SDK that only registers backends */
  tryDispatchAcpReplyHook?: ReplyDispatchHandler;
}

/** OpenClaw's reply_dispatch event and context pass through untouched: the host's SDK reads them, not this plugin. */
export type ReplyDispatchHandler = (event: unknown, ctx: unknown) => Promise<unknown>;

export const REPLY_DISPATCH_HOOK = "reply_dispatch";
/** the dispatch kinds OpenClaw's own ACP backend plugin claims: only messages the host routes to an ACP session */
export const REPLY_DISPATCH_KINDS = ["acp"] as const;

export interface ReplyDispatchHookOptions {
  eligibleDispatchKinds: readonly ["acp"];
}

/** The parts of OpenClaw's plugin API this entry uses. */
export interface PluginApiLike {
  registrationMode?: string;
  pluginConfig?: Record<string, unknown>;
  logger?: ControllerLogger;
  registerService(service: PluginServiceLike): void;
  /** OpenClaw's typed-hook registration (`api.on`); a host without it gets the service alone */
  on?(hookName: typeof REPLY_DISPATCH_HOOK, handler: ReplyDispatchHandler, opts: ReplyDispatchHookOptions): void;
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
  safeParse(
    value: unknown,
  ):
    | { success: true; data: unknown }
    | { success: false; error: { issues: Array<{ path: Array<string | number>; message: string }> } };
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
  const missing = [
    "registerAcpRuntimeBackend",
    "unregisterAcpRuntimeBackend",
    "AcpRuntimeError",
    "tryDispatchAcpReplyHook",
  ].filter((k) => typeof mod[k] !== "function");
  if (missing.length > 0)
    throw new Error(
      `proclease plugin: ${specifier} of this OpenClaw lacks ${missing.join(", ")} (tested with openclaw 2026.9.6)`,
    );
  return mod as unknown as AcpRuntimeSdk;
}

function readManifest(): Manifest {
  // dist/openclaw/plugin.js (and src/openclaw/plugin.ts) → the package root
  return JSON.parse(readFileSync(new URL("../../openclaw.plugin.json", import.meta.url), "utf8")) as Manifest;
}

export function createProcleasePlugin(opts: { loadSdk?: () => Promise<AcpRuntimeSdk> } = {}): ProcleasePlugin {
  const manifest = readManifest();
  const loadOnce = opts.loadSdk ?? loadHostAcpRuntimeSdk;
  // one load for the service and the hook; a failed load is retried on the next call
  let loading: Promise<AcpRuntimeSdk> | undefined;
  const loadSdk = (): Promise<AcpRuntimeSdk> => {
    loading ??= loadOnce().catch((err: unknown) => {
      loading = undefined;
      throw err;
    });
    return loading;
  };
  const dispatchReply: ReplyDispatchHandler = async (event, ctx) => {
    const host = await loadSdk();
    if (host.tryDispatchAcpReplyHook === undefined)
      throw new Error(`proclease plugin: ${ACP_RUNTIME_SDK} lacks tryDispatchAcpReplyHook`);
    return host.tryDispatchAcpReplyHook(event, ctx);
  };
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
          return {
            success: false,
            error: { issues: [{ path: [], message: err instanceof Error ? err.message : String(err) }] },
          };
        }
      },
    },
    runtime: () => runtime,
    register(api) {
      if (api.registrationMode !== undefined && api.registrationMode !== "full") return;
      // a malformed config fails the registration, loudly, before anything runs
      const config = parsePluginConfig(api.pluginConfig);
      api.on?.(REPLY_DISPATCH_HOOK, dispatchReply, { eligibleDispatchKinds: REPLY_DISPATCH_KINDS });
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
          logger?.info?.(
            `proclease: ACP runtime backend "${started.backendId}" registered (state dir ${runtimeOptionsFor(config, ctx.stateDir, undefined).stateDir})`,
          );
        },
        async stop() {
          const r = runtime;
          runtime = undefined;
          if (r === undefined) return;
          sdk?.unregisterAcpRuntimeBackend(r.backendId);
          // durable: every session's adapter keeps running for the next gateway (a config reload, a restart) to re-adopt;
          // otherwise every live session is closed through its lease (verified reap, lease closed), and a persistent
          // session keeps its agent session id, so the next gateway resumes it
          await (config.durable !== undefined ? r.detach() : r.shutdown());
        },
      });
    },
  };
}

const plugin: ProcleasePlugin = createProcleasePlugin();
export default plugin;
