/**
 * The controller options of the conversation (permissions, client
 * capabilities, hooks, logger), validated at create, and the process
 * supervisor that serves ACP terminals: one per controller, on the
 * controller's state dir and instance id, so a terminal's lease lives in the
 * same store and the startup reap (reconcileTerminals) takes what a
 * previous incarnation left running, and the maintenance timer what a
 * close left closing.
 */
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import type { LeaseStore } from "../../ownership/index.js";
import {
  createProcessSupervisor,
  SUPERVISOR_SESSION_PREFIX,
  type ProcessSupervisor,
  type ReconcilableState,
  type ReconcileReport,
} from "../../supervisor/index.js";
import { assertFsOptions } from "../connection/client-fs.js";
import {
  assertTerminalOption,
  TERMINAL_RUN_PREFIX,
  type ClientTerminalOptions,
} from "../connection/client-terminal.js";
import type { ConversationConfig } from "../connection/conversation.js";
import { resolveIntakeLimits } from "../connection/intake-limits.js";
import { assertLogger, safeLogger } from "../report/logger.js";
import { assertKeeperOption } from "../../ownership/keeper/keeper.js";
import { DEFAULT_PERMISSION_TIMEOUT_MS } from "../connection/permissions.js";
import type { AcpxLifecycleControllerOptions } from "./types.js";
import { resolveUpdateLimits } from "../connection/update-bytes.js";

export function assertConversationOptions(opts: AcpxLifecycleControllerOptions): void {
  for (const k of ["onPermissionRequest", "onSessionEnd", "onLeaseSettled"] as const) {
    if (opts[k] !== undefined && typeof opts[k] !== "function") throw new TypeError(`opts.${k} must be a function`);
  }
  const t = opts.permissionTimeoutMs;
  if (t !== undefined && (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > 2 ** 31 - 1)) {
    throw new TypeError(`opts.permissionTimeoutMs must be a positive integer of milliseconds, got ${String(t)}`);
  }
  assertLogger(opts.logger, "opts.logger");
  assertKeeperOption(opts.keeper, "opts.keeper");
  if (opts.stderrInMessages !== undefined && typeof opts.stderrInMessages !== "boolean")
    throw new TypeError("opts.stderrInMessages must be a boolean");
  resolveUpdateLimits(opts.updateLimits);
  resolveIntakeLimits(opts.intakeLimits);
  const caps = opts.clientCapabilities;
  if (caps === undefined) return;
  if (typeof caps !== "object" || caps === null || Array.isArray(caps))
    throw new TypeError("opts.clientCapabilities must be an object { terminal?, fs? }");
  for (const k of Object.keys(caps))
    if (k !== "terminal" && k !== "fs")
      throw new TypeError(`opts.clientCapabilities.${k} is not a capability (terminal, fs)`);
  assertTerminalOption(caps.terminal, "opts.clientCapabilities.terminal");
  assertFsOptions(caps.fs, "opts.clientCapabilities.fs");
}

export interface SupervisorContext {
  stateDir: string;
  gatewayInstanceId: string;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  graceMs: number;
}

export function conversationConfig(opts: AcpxLifecycleControllerOptions, ctx: SupervisorContext): ConversationConfig {
  const t = opts.clientCapabilities?.terminal;
  const terminal: ClientTerminalOptions | undefined = t === undefined || t === false ? undefined : t === true ? {} : t;
  const supervisor =
    terminal === undefined
      ? undefined
      : createProcessSupervisor({
          stateDir: ctx.stateDir,
          gatewayInstanceId: ctx.gatewayInstanceId,
          facts: ctx.facts,
          signaller: ctx.signaller,
          graceMs: ctx.graceMs,
          containment: opts.containment === "off" ? "off" : "auto",
          // the controller's keeper, started by the session before any terminal, covers its runs (their holder is this process)
          keeper: "off",
        });
  return {
    log: safeLogger(opts.logger),
    onPermissionRequest: opts.onPermissionRequest,
    permissionTimeoutMs: opts.permissionTimeoutMs ?? DEFAULT_PERMISSION_TIMEOUT_MS,
    fs: opts.clientCapabilities?.fs,
    terminal,
    supervisor,
    stderrInMessages: opts.stderrInMessages === true,
    updateLimits: resolveUpdateLimits(opts.updateLimits),
    intakeLimits: resolveIntakeLimits(opts.intakeLimits),
  };
}

/**
 * The startup reap's part for terminals: the ACP terminal runs a previous
 * incarnation of this instance left behind, verified and killed through
 * their leases. Other supervisor runs on the same state dir (a gateway's own
 * exec supervisor) are left to their supervisor. Without terminals on, a
 * short-lived supervisor does the same, so turning terminals off never
 * strands a terminal left by a run that had them on.
 */
export async function reconcileTerminals(
  supervisor: ProcessSupervisor | undefined,
  ctx: SupervisorContext,
  opts: { states?: readonly ReconcilableState[]; held?: (runId: string) => boolean } = {},
): Promise<ReconcileReport> {
  const sup = supervisor ?? createProcessSupervisor({ ...ctx, containment: "auto" });
  // a terminal a live session still holds is its session's to end (release, close), even once its root exited
  const keep = (runId: string) => !runId.startsWith(TERMINAL_RUN_PREFIX) || opts.held?.(runId) === true;
  try {
    return await sup.reconcileOrphans({
      isSessionTracked: (run) => keep(run.runId),
      ...(opts.states ? { states: opts.states } : {}),
    });
  } finally {
    if (supervisor === undefined) await sup.shutdown();
  }
}

/**
 * reconcileTerminals for the terminal leases in `states`, when there is one
 * (null otherwise: nothing to do, no supervisor made). Startup takes open
 * and closing (what a previous incarnation left running); maintenance and
 * shutdown take closing (what a close or an exit with escapees left).
 */
export async function reconcileLeftTerminals(
  store: Pick<LeaseStore, "list">,
  supervisor: ProcessSupervisor | undefined,
  ctx: SupervisorContext,
  opts: { states: readonly ReconcilableState[]; held: (runId: string) => boolean },
): Promise<ReconcileReport | null> {
  const prefix = `${SUPERVISOR_SESSION_PREFIX}${TERMINAL_RUN_PREFIX}`;
  // only the live folder: reading the archive too would parse every lease this state dir ever settled, on every start
  const { leases } = await store.list({ states: opts.states });
  if (!leases.some((l) => l.sessionKey.startsWith(prefix))) return null;
  return reconcileTerminals(supervisor, ctx, opts);
}
