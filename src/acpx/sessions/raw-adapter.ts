/**
 * The raw surface, for a plugin that keeps its own ACP client (OpenClaw's
 * acpx extension does): `spawnRawAdapter` starts the adapter through the
 * wrapper on a lease exactly as ensureSession does (lease written first,
 * its own cgroup, limits, the root's identity recorded), skips the ACP
 * handshake, and hands over the adapter's stdin and stdout untouched. The
 * plugin speaks ACP itself. The session is the controller's like any other:
 * closeSession (or the RawAdapter's close) verifies and kills its tree
 * through the lifecycle, the startup reap covers it after a crash, and
 * listSessions shows it. startTurn, prompt, setMode and the like refuse it
 * (AcpxRawSessionError): the controller does not speak on a stream it handed over.
 */
import type { Readable, Writable } from "node:stream";
import type { ProcessLease, OwnedProcessTree } from "../../ownership/leases/types.js";
import { SessionConversation } from "../connection/conversation.js";
import type { LaunchedWrapper, SessionPipes } from "../launch/launch.js";
import type { SessionEnd } from "../launch/wrapper-end.js";
import type { ControllerDeps, LiveSessions } from "./live-sessions.js";
import { newSessionRecord } from "./session-store.js";
import type { AcpRuntimeEnsureInput, AcpRuntimeHandle } from "../connection/types.js";
import type { CloseReport } from "./types.js";

/** What spawnRawAdapter takes: ensureSession's input without the ACP parts (auth, MCP servers, resume). */
export type RawAdapterInput = Omit<
  AcpRuntimeEnsureInput,
  "auth" | "mcpServers" | "resumeSessionId" | "resume" | "replace"
>;

export interface RawAdapter {
  readonly handle: AcpRuntimeHandle;
  /** the lease as recorded when the adapter started */
  readonly lease: ProcessLease;
  /** the adapter's stdin: write ACP requests here */
  readonly stdin: Writable;
  /** the adapter's stdout: ACP from the agent */
  readonly stdout: Readable;
  /** the adapter's most recent stderr (at most 16 KB) */
  stderrTail(): string;
  /** resolves when the session's processes ended, saying how */
  readonly ended: Promise<SessionEnd>;
  /** closeSession for this adapter: verified tree killed, lease settled */
  close(reason?: string): Promise<CloseReport>;
  /** the live tree, verified against the lease now (null when nothing verifies) */
  verify(): Promise<OwnedProcessTree | null>;
}

/**
 * The end of a raw spawn, once the root's identity is recorded: the session
 * record (no agent session id: the plugin holds it) and the live session
 * without an ACP client.
 */
export async function finishRawSpawn(
  d: ControllerDeps,
  live: LiveSessions,
  input: AcpRuntimeEnsureInput,
  lease: ProcessLease,
  launched: LaunchedWrapper,
  processGroupId: number | undefined,
): Promise<AcpRuntimeHandle> {
  // no agent session id: the plugin holds it
  const { owner, record } = newSessionRecord(input, d.gatewayInstanceId, lease.leaseId, "");
  await d.sessions.put(record);
  const handle: AcpRuntimeHandle = {
    sessionKey: input.sessionKey,
    leaseId: lease.leaseId,
    rootPid: lease.rootPid,
    ...(processGroupId !== undefined ? { processGroupId } : {}),
    acpSessionId: "",
    owner,
    reused: false,
    resumed: false,
    resumeReason: "a raw adapter: the plugin opens its own ACP session",
    agentCapabilities: {},
  };
  const conv = new SessionConversation(
    { ...d.conversation, terminal: undefined, fs: undefined, onPermissionRequest: undefined },
    input,
  );
  conv.bind(handle);
  live.add({ handle, launched, client: undefined, conv, turn: undefined, closing: false, closeReason: undefined });
  live.inFlight.delete(lease.leaseId);
  return handle;
}

export function rawAdapterOf(
  handle: AcpRuntimeHandle,
  lease: ProcessLease,
  launched: SessionPipes,
  ctl: {
    closeSession(input: { handle: AcpRuntimeHandle; reason?: string }): Promise<CloseReport>;
    verifyOwnedTree(l: ProcessLease): Promise<OwnedProcessTree | null>;
  },
  currentLease: () => Promise<ProcessLease>,
): RawAdapter {
  return {
    handle,
    lease,
    stdin: launched.stdin,
    stdout: launched.stdout,
    stderrTail: () => launched.stderrTail(),
    ended: launched.ended,
    close: (reason) => ctl.closeSession({ handle, ...(reason !== undefined ? { reason } : {}) }),
    verify: async () => ctl.verifyOwnedTree(await currentLease()),
  };
}
