/**
 * Re-adopting a durable session an earlier gateway left waiting
 * (docs/lifecycle-controller.md "Durable sessions"), by proof both ways:
 *
 * 1. the record and its lease: this instance's, open, durable, the same key,
 *    the same command, agent and cwd as the ensure asks for;
 * 2. the live tree verified against the lease (verifyOwnedTree: pid, start
 *    time, wrapper argv, markers, command hash, group), as before any signal;
 * 3. the socket: the kernel names who listens on it (SO_PEERCRED), which must
 *    be the lease's root, with the lease's start time read again after the
 *    connect (a pid reused in between is another process);
 * 4. the wrapper, in turn, lets in only the process that holds this state
 *    dir's lock and names its lease and instance (native/wrapper_attach_linux.c).
 *
 * A wrapper that refuses, or anything that does not prove out, leaves the
 * session to the caller's old path (closed through the lifecycle, resumed in
 * a new process): nothing is signalled here. Once attached, the session is
 * served as one this controller spawned: its handle says `adopted`, its
 * rootPid is the earlier one, and the turn in flight (if any) comes back as
 * `turn`, whose updates the wrapper's journal replays from the turn's start.
 */
import { retakeTerminals } from "../durable/terminal-runs.js";
import { TERMINAL_RUN_PREFIX } from "../connection/client-terminal.js";
import { closeSync } from "node:fs";
import { Socket } from "node:net";
import { sameProcess } from "../../facts/identity.js";
import { loadNative } from "../../facts/native.js";
import { verifyOwnedTree } from "../../ownership/index.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import { AcpClient } from "../connection/acp-client.js";
import { handleFields, SessionConversation } from "../connection/conversation.js";
import type { EnsureInput } from "./ensure-input.js";
import type { ControllerDeps, LiveSession, LiveSessions } from "./live-sessions.js";
import { sessionDifferences } from "./session-reuse.js";
import type { AcpxSessionRecord } from "./session-store.js";
import { adoptTurn } from "../connection/turn-stream.js";
import type { AcpRuntimeHandle, AdoptedTurn } from "../connection/types.js";
import { adoptionFactsOf, type AdoptionFacts } from "./adopt-record.js";
import { attachOver, type AttachedWrapper } from "../durable/attached.js";
import { socketName } from "../durable/protocol.js";

/** How long the wrapper has to answer the auth frame. */
const ATTACH_ANSWER_MS = 5000;

export type AdoptOutcome =
  | { kind: "adopted"; handle: AcpRuntimeHandle; live: LiveSession; turn: AdoptedTurn | undefined }
  | { kind: "not-adopted"; code: AdoptRefusal; why: string };

/** Why a session was not re-adopted, for code to read. */
export type AdoptRefusal =
  | "no-record-facts"
  | "no-lease"
  | "not-this-session"
  | "not-durable"
  | "settled"
  | "different-session"
  | "not-verified"
  | "no-socket"
  | "peer-not-the-wrapper"
  | "wrapper-refused";

type Refused = Extract<AdoptOutcome, { kind: "not-adopted" }>;
const no = (code: AdoptRefusal, why: string): Refused => ({ kind: "not-adopted", code, why });

/** tryAdopt with the lease held from reconciles meanwhile; why not, logged. */
export async function adoptWaiting(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  record: AcpxSessionRecord,
): Promise<AdoptOutcome> {
  const r = await live.held(record.leaseId, () => tryAdopt(d, live, input, record));
  if (r.kind === "not-adopted")
    d.conversation.log.info?.(
      `proclease: session ${JSON.stringify(input.sessionKey)} was not re-adopted (${r.code}): ${r.why}`,
      { leaseId: record.leaseId, code: r.code },
    );
  return r;
}

/** The record's session re-adopted for `input`, or why not (nothing was signalled, the wrapper still waits). */
export async function tryAdopt(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  record: AcpxSessionRecord,
): Promise<AdoptOutcome> {
  const facts = adoptionFactsOf(record);
  if (facts === null) return no("no-record-facts", "its record keeps no handshake facts to re-adopt it by");
  const checked = await checkLease(d, input, record);
  if ("kind" in checked) return checked;
  const lease = checked.lease;
  const tree = await verifyOwnedTree(lease, d.facts, { gatewayInstanceId: d.gatewayInstanceId });
  if (tree === null) return no("not-verified", `its tree does not verify against lease ${lease.leaseId}`);
  const link = await connect(d, lease);
  if ("kind" in link) return link;
  const att = await attachOver(link.sock, lease.rootPid, lease, ATTACH_ANSWER_MS);
  if (att.kind === "refused") return no("wrapper-refused", `its wrapper (pid ${lease.rootPid}) refused: ${att.code}`);
  try {
    return serve(d, live, input, record, lease, facts, att.wrapper);
  } catch (err) {
    // the wrapper goes back to waiting: a later ensure (or controller) may try again
    att.wrapper.letGo();
    throw err;
  }
}

/** The lease the record names, when it is this instance's open durable session for this key and command. */
async function checkLease(
  d: ControllerDeps,
  input: EnsureInput,
  record: AcpxSessionRecord,
): Promise<{ lease: ProcessLease } | Refused> {
  const lease = await d.leases.get(record.leaseId);
  if (lease === null) return no("no-lease", `its lease ${record.leaseId} is gone`);
  if (
    lease.kind !== "acpx" ||
    lease.gatewayInstanceId !== d.gatewayInstanceId ||
    lease.sessionKey !== input.sessionKey ||
    lease.rootPid <= 0
  )
    return no("not-this-session", `lease ${lease.leaseId} is not this instance's session for the key`);
  if (lease.durable === undefined) return no("not-durable", `lease ${lease.leaseId} is not durable`);
  if (lease.state !== "open") return no("settled", `lease ${lease.leaseId} is ${lease.state}`);
  const differences = sessionDifferences(
    { handle: { owner: record.owner } as AcpRuntimeHandle, command: record.command ?? [], cwd: record.cwd },
    { agentId: input.agentId, command: input.command, cwd: input.cwd },
  );
  if (record.agentId !== undefined && record.agentId !== input.agentId) differences.push("agentId");
  if (differences.length > 0) return no("different-session", `the waiting session differs: ${differences.join(", ")}`);
  return { lease };
}

/** The wrapper's socket, when the kernel says the lease's root listens on it (and is still the lease's root). */
async function connect(d: ControllerDeps, lease: ProcessLease): Promise<{ sock: Socket } | Refused> {
  const native = loadNative();
  const r = native?.connectAttach?.(d.durable!.attachDir, socketName(lease.leaseId)) ?? -38;
  if (typeof r === "number") return no("no-socket", `its wrapper's socket does not answer (errno ${-r})`);
  const gone = (why: string): Refused => {
    closeSync(r.fd);
    return no("peer-not-the-wrapper", why);
  };
  if (r.pid !== lease.rootPid)
    return gone(`the socket's listener is pid ${r.pid}, not the lease's root ${lease.rootPid}`);
  if (typeof process.getuid === "function" && r.uid !== process.getuid())
    return gone(`the socket's listener runs as uid ${r.uid}`);
  // after the connect: the listener is still the process the lease recorded (not a pid reused since the verification)
  const now = await d.facts.inspect(r.pid).catch(() => null);
  if (!sameProcess(now, { pid: lease.rootPid, startTime: lease.rootStartTime }))
    return gone(`pid ${r.pid} is no longer the lease's root (start time)`);
  return { sock: new Socket({ fd: r.fd, readable: true, writable: true }) };
}

/** The attached wrapper served as a live session: conversation, ACP client above the id floor, the turn in flight. */
function serve(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  record: AcpxSessionRecord,
  lease: ProcessLease,
  facts: AdoptionFacts,
  w: AttachedWrapper,
): AdoptOutcome {
  const conv = new SessionConversation(d.conversation, input);
  conv.opened({
    sessionId: record.acpSessionId,
    protocolVersion: facts.init.protocolVersion,
    authMethods: [],
    init: facts.init,
    opened: facts.opened,
  });
  // the terminals that waited with it, taken back before the client reads a request about them
  retakeInto(d, conv, lease.leaseId);
  const client = new AcpClient({
    input: w.stdout,
    output: w.stdin,
    ...conv.clientOptions(),
    idOffset: w.header.idFloor + 1,
  });
  const handle: AcpRuntimeHandle = {
    sessionKey: input.sessionKey,
    leaseId: lease.leaseId,
    rootPid: lease.rootPid,
    ...(lease.processGroupId !== undefined ? { processGroupId: lease.processGroupId } : {}),
    acpSessionId: record.acpSessionId,
    owner: record.owner,
    ...handleFields(conv),
    // the same adapter process, its agent session never left: nothing was resumed
    resumed: false,
    resumeReason: "re-adopted: the same adapter process, whose agent session never ended",
    adopted: true,
  };
  conv.bind(handle, lease.rootStartTime);
  const session: LiveSession = {
    handle,
    launched: w,
    client,
    conv,
    turn: undefined,
    closing: false,
    closeReason: undefined,
  };
  let turn: AdoptedTurn | undefined;
  const t = w.header.turn;
  if (t !== null) {
    const request = client.adoptPrompt(t.id);
    request.catch(() => undefined);
    session.turn = request;
    const free = (): void => {
      if (session.turn === request) session.turn = undefined;
    };
    request.then(free, free);
    const stream = adoptTurn(
      {
        sessionKey: input.sessionKey,
        acpSessionId: record.acpSessionId,
        client,
        launched: w,
        conv,
        setTurn: () => undefined,
      },
      request,
      d.conversation.stderrInMessages,
    );
    turn = { ...stream, replayed: t.updates, gap: t.gap };
  }
  live.add(session);
  // the router and the turn's queue are in place: the journal flows from here
  w.start();
  return { kind: "adopted", handle, live: session, turn };
}

/** The session's terminals an earlier gateway left (durable/terminal-runs.ts), taken back into its conversation. */
function retakeInto(d: ControllerDeps, conv: SessionConversation, leaseId: string): void {
  const dt = d.conversation.durableTerminals;
  if (dt === undefined || conv.terminals === undefined) return;
  const deps = { store: d.leases, facts: d.facts, gatewayInstanceId: d.gatewayInstanceId, dt };
  conv.terminals.retake(retakeTerminals(deps, leaseId, TERMINAL_RUN_PREFIX));
}
