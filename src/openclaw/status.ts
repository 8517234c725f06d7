/**
 * What OpenClaw reads about a session: getStatus (the agent's state, the
 * lease's state and the tree verified against it now), getCapabilities
 * (the controls the agent offers, its config option keys) and the config
 * options in OpenClaw's shape.
 *
 * OpenClaw's manager asks getStatus before reusing a cached handle and
 * evicts it when `details.status` (or `status=` in the summary) says
 * "dead" or "no-session": a session whose processes ended, or that this
 * runtime does not serve, says so instead of throwing.
 */
import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import type { SessionStatus } from "../acpx/sessions/types.js";
import type { AcpxLifecycleController } from "../acpx/controller/types.js";
import type { LeaseStore } from "../ownership/index.js";
import type { SessionEntry } from "./session-table.js";
import type {
  OpenClawCapabilities,
  OpenClawConfigOptionResult,
  OpenClawRuntimeControl,
  OpenClawRuntimeStatus,
} from "./types.js";

export interface StatusContext {
  backendId: string;
  ctl: AcpxLifecycleController;
  leases: LeaseStore;
  trees: TreeCache;
}

/** A lease's tree as getStatus reports it: verified against the lease at `verifiedAt`. */
export interface TreeView {
  verified: boolean;
  rootPid?: number;
  members: Array<{ pid: number; ppid: number; pgid: number; state: string }>;
  /** epoch ms of the verification */
  verifiedAt: number;
}

/**
 * The last verified tree of each lease. OpenClaw's manager asks getStatus
 * before and after every turn (to reuse its cached handle, to reconcile
 * ids); a verification takes a process snapshot (milliseconds, tens under
 * load on a big host), so a status answers with the last tree, verified at
 * most TREE_MAX_AGE_MS ago or verified again in the background (one at a
 * time per lease) when older. The first status of a lease waits for its
 * verification. `verifiedAt` and `ageMs` say how old the view is.
 */
export const TREE_MAX_AGE_MS = 1000;

export class TreeCache {
  private readonly views = new Map<string, { view: TreeView; refreshing: Promise<void> | undefined }>();

  async get(leaseId: string, verify: () => Promise<TreeView>): Promise<TreeView> {
    const slot = this.views.get(leaseId);
    if (slot === undefined) {
      const view = await verify();
      this.views.set(leaseId, { view, refreshing: undefined });
      return view;
    }
    if (Date.now() - slot.view.verifiedAt > TREE_MAX_AGE_MS && slot.refreshing === undefined) {
      slot.refreshing = verify().then(
        (view) => {
          slot.view = view;
          slot.refreshing = undefined;
        },
        () => {
          // the view stays as it was, with its age; the next status tries again
          slot.refreshing = undefined;
        },
      );
    }
    return slot.view;
  }

  forget(leaseId: string): void {
    this.views.delete(leaseId);
  }
}

async function verifyTree(c: StatusContext, leaseId: string): Promise<TreeView> {
  const lease = await c.leases.get(leaseId);
  const tree = lease === null ? null : await c.ctl.verifyOwnedTree(lease);
  const verifiedAt = Date.now();
  if (tree === null) return { verified: false, members: [], verifiedAt };
  return {
    verified: true,
    rootPid: tree.root.pid,
    members: tree.members.map((m) => ({ pid: m.pid, ppid: m.ppid, pgid: m.pgid, state: m.state })),
    verifiedAt,
  };
}

/** The status of a key this runtime serves no live session for. */
export function noSessionStatus(c: Pick<StatusContext, "backendId">, key: string, why: string): OpenClawRuntimeStatus {
  return {
    summary: `status=no-session backend=${c.backendId}: ${why}`,
    details: { status: "no-session", backend: c.backendId, sessionKey: key, why },
  };
}

export async function sessionStatus(c: StatusContext, entry: SessionEntry): Promise<OpenClawRuntimeStatus> {
  const ids = { backendSessionId: entry.handle.acpSessionId, agentSessionId: entry.handle.acpSessionId };
  const st = await c.ctl.sessionStatus(entry.handle);
  const tree = await c.trees.get(entry.handle.leaseId, () => verifyTree(c, entry.handle.leaseId));
  const ageMs = Math.max(0, Date.now() - tree.verifiedAt);
  const status = entry.ended !== undefined ? "dead" : st.busy ? "running" : "idle";
  const details: Record<string, unknown> = {
    status,
    backend: c.backendId,
    agent: entry.agent.name,
    mode: entry.mode,
    sessionKey: entry.key,
    acpSessionId: entry.handle.acpSessionId,
    resumed: entry.handle.resumed,
    ...(entry.handle.resumeReason !== undefined ? { resumeReason: entry.handle.resumeReason } : {}),
    ...(entry.ended !== undefined ? { ended: entry.ended } : {}),
    lease: {
      leaseId: entry.handle.leaseId,
      state: st.leaseState,
      gatewayInstanceId: c.ctl.gatewayInstanceId,
      rootPid: entry.handle.rootPid,
      ...(entry.handle.processGroupId !== undefined ? { processGroupId: entry.handle.processGroupId } : {}),
    },
    // verified against the lease: the wrapper, the adapter and what it forked, leaves first
    tree: { ...tree, ageMs },
    ...agentDetails(st),
  };
  const n = tree.members.length;
  const summary =
    `status=${status} backend=${c.backendId} lease=${entry.handle.leaseId} (${st.leaseState}) ` +
    `tree=${tree.verified ? `${n} process${n === 1 ? "" : "es"}` : "not verified"} (${ageMs} ms ago)` +
    (st.modes ? ` mode=${st.modes.currentModeId}` : "");
  return { summary, ...ids, details };
}

function agentDetails(st: SessionStatus): Record<string, unknown> {
  return {
    busy: st.busy,
    ...(st.modes
      ? { modes: { current: st.modes.currentModeId, available: st.modes.availableModes.map((m) => m.id) } }
      : {}),
    ...(st.configOptions
      ? { configOptions: st.configOptions.map((o) => ({ id: o.id, currentValue: o.currentValue })) }
      : {}),
    commands: st.availableCommands.map((cmd) => cmd.name),
    ...(st.contextUsage ? { contextUsage: st.contextUsage } : {}),
    ...(st.title !== null ? { title: st.title } : {}),
    terminals: st.terminals,
    droppedUpdates: st.droppedUpdates,
    stdoutHeld: st.stdoutHeld,
  };
}

/** The controls a session offers (all three when no session is named yet) and its config option keys. */
export async function capabilities(
  ctl: AcpxLifecycleController,
  entry: SessionEntry | undefined,
): Promise<OpenClawCapabilities> {
  if (entry === undefined) return { controls: ["session/set_config_option", "session/set_mode", "session/status"] };
  const st = await ctl.sessionStatus(entry.handle);
  const controls: OpenClawRuntimeControl[] = [];
  if (st.configOptions !== null) controls.push("session/set_config_option");
  if (st.modes !== null) controls.push("session/set_mode");
  controls.push("session/status");
  return {
    controls,
    ...(st.configOptions !== null && st.configOptions.length > 0
      ? { configOptionKeys: st.configOptions.map((o) => o.id) }
      : {}),
  };
}

/** ACP's config options in OpenClaw's shape: values flat or grouped, as the agent offered them. */
export function configOptionResult(options: readonly SessionConfigOption[]): OpenClawConfigOptionResult {
  return {
    configOptions: options.map((o) => ({
      id: o.id,
      ...(o.category !== undefined ? { category: o.category } : {}),
      currentValue: o.currentValue,
      ...(o.type === "select" ? { options: selectValues(o.options) } : {}),
    })),
  };
}

function selectValues(options: unknown): Array<{ value: string }> | Array<{ options: Array<{ value: string }> }> {
  if (!Array.isArray(options) || options.length === 0) return [];
  const first = options[0] as { options?: unknown };
  if (Array.isArray(first.options)) {
    return (options as Array<{ options: Array<{ value: string }> }>).map((g) => ({
      options: g.options.map((v) => ({ value: v.value })),
    }));
  }
  return (options as Array<{ value: string }>).map((v) => ({ value: v.value }));
}

/**
 * OpenClaw sends every config value as a string; a boolean option of the
 * agent takes "true" or "false" (anything else is refused by the control's
 * own check, which names the option).
 */
export function configValue(
  options: readonly SessionConfigOption[] | null,
  key: string,
  value: string,
): string | boolean {
  const option = options?.find((o) => o.id === key);
  if (option?.type === "boolean" && (value === "true" || value === "false")) return value === "true";
  return value;
}
