/**
 * The OpenClaw ACP runtime backend on real processes (the bundled wrapper
 * around the fixture agent), without OpenClaw: the event mapping of a real
 * turn, the terminal result and its failures in OpenClaw's codes, cancel,
 * the handles' backend id, status with the lease and its verified tree,
 * controls, the auth error, and stale handles. Build first (`npm run build`).
 */
import { describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { inspectEach } from "../../src/facts/inspect-many.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import type { ProcessFacts, ProcessInfo } from "../../src/facts/types.js";
import { ProcleaseAcpRuntimeError } from "../../src/openclaw/errors.js";
import { alive, disposeAfterEach, leaseCarriers, waitFor } from "../acpx/controller-helpers.js";
import { collect, drain, ensure, fixture, newRuntime, rejection, replyText, turnInput } from "./helpers.js";

const controllers = disposeAfterEach();
const FACTS = getProcessFacts();
// the close below needs environments (the remnant search): procfs or native
const NO_ENV = FACTS.backend === "ps" || FACTS.backend === "none";
const NO_ENV_NOTE = NO_ENV ? ` [skipped: the ${FACTS.backend} backend cannot read environments]` : "";
if (NO_ENV) console.log(`openclaw runtime.test:${NO_ENV_NOTE}`);

/**
 * The host's facts with two switches (as test/acpx/controller-settlement's):
 * `blind` pids cannot be inspected (inspect throws, as when /proc refuses a
 * read), and `ghost` stays in every snapshot after it exited.
 */
function trickyFacts(): { facts: ProcessFacts; blind: Set<number>; ghost: ProcessInfo | null } {
  const t = {
    blind: new Set<number>(),
    ghost: null as ProcessInfo | null,
    facts: undefined as unknown as ProcessFacts,
  };
  t.facts = {
    backend: FACTS.backend,
    identityStrength: FACTS.identityStrength,
    async snapshot() {
      const snap = await FACTS.snapshot();
      const g = t.ghost;
      return g === null || snap.processes.has(g.pid)
        ? snap
        : buildSnapshot(snap.takenAt, [...snap.processes.values(), g]);
    },
    inspect: (pid, o) =>
      t.blind.has(pid) ? Promise.reject(new Error(`inspect of ${pid} refused (test)`)) : FACTS.inspect(pid, o),
    inspectMany: (pids, o) => inspectEach(t.facts.inspect, pids, o, 8),
  };
  return t;
}

const allowFirst = {
  onPermissionRequest: (r: { options: Array<{ optionId: string }> }) => ({
    outcome: "selected" as const,
    optionId: r.options[0]!.optionId,
  }),
};

describe("a turn, as OpenClaw sees it", () => {
  it("maps each ACP update of a real turn to OpenClaw's event, in arrival order, and the end of the turn to its result", async () => {
    const rt = await newRuntime(controllers, "events", allowFirst);
    const h = await ensure(rt);
    const turn = rt.startTurn(turnInput(h, "/story"));
    await turn.promptStarted;
    // the fixture's available_commands_update follows session/new and may land in the first turn
    const events = (await drain(turn)).filter((e) => e.tag !== "available_commands_update");
    expect(events).toEqual([
      { type: "text_delta", text: "thinking about it", stream: "thought", tag: "agent_thought_chunk" },
      { type: "status", tag: "plan", text: "plan: [in_progress] look at the file" },
      {
        type: "tool_call",
        text: "Write notes.txt",
        tag: "tool_call",
        toolCallId: "call-1",
        title: "Write notes.txt",
        status: "pending",
        kind: "edit",
      },
      // the update carries no title: it gets the one its tool call announced
      {
        type: "tool_call",
        text: "Write notes.txt: completed",
        tag: "tool_call_update",
        toolCallId: "call-1",
        title: "Write notes.txt",
        status: "completed",
      },
      { type: "text_delta", text: "permission: allow. ", stream: "output", tag: "agent_message_chunk" },
      { type: "text_delta", text: "Done.", stream: "output", tag: "agent_message_chunk" },
      { type: "status", tag: "usage_update", text: "usage: 1200 of 200000", used: 1200, size: 200000 },
    ]);
    expect(await turn.result).toEqual({ status: "completed", stopReason: "end_turn" });
  });

  it("runTurn streams the same events and ends with done; mode, config and command updates are tagged status lines", async () => {
    const rt = await newRuntime(controllers, "run-turn");
    const h = await ensure(rt);
    await rt.setMode({ handle: h, mode: "code" });
    await rt.setConfigOption({ handle: h, key: "model", value: "fixture-large" });
    const events = await collect(rt.runTurn(turnInput(h, "/whoami")));
    const tags = events.filter((e) => e.type === "status").map((e) => (e as { tag?: string }).tag);
    // the agent's current_mode_update and config_option_update arrive after its answers: outside or inside this turn, never lost as events of it
    expect(
      tags.every((t) => ["current_mode_update", "config_option_update", "available_commands_update"].includes(t!)),
    ).toBe(true);
    const who = JSON.parse(replyText(events)) as { modeId: string; model: string };
    expect(who).toMatchObject({ modeId: "code", model: "fixture-large" });
    expect(events.at(-1)).toEqual({ type: "done", status: "completed", stopReason: "end_turn" });
  });

  it("an agent error ends the turn failed: ACP_TURN_FAILED, detailCode AGENT_ERROR, not retryable (runTurn: an error event)", async () => {
    const rt = await newRuntime(controllers, "agent-error", {
      agents: { fixture: { command: fixture("--error-on=session/prompt") } },
    });
    const h = await ensure(rt);
    const r = await rt.startTurn(turnInput(h, "hi")).result;
    expect(r.status).toBe("failed");
    expect(r.status === "failed" && r.error).toMatchObject({
      code: "ACP_TURN_FAILED",
      detailCode: "AGENT_ERROR",
      retryable: false,
    });
    expect(r.status === "failed" && r.error.message).toMatch(/^proclease backend "proclease": .*Internal error/);
    const events = await collect(rt.runTurn(turnInput(h, "again")));
    expect(events.at(-1)).toMatchObject({
      type: "error",
      code: "ACP_TURN_FAILED",
      detailCode: "AGENT_ERROR",
      retryable: false,
    });
  });

  it("cancel() mid-turn sends session/cancel: the result is cancelled, nothing is signalled, the session takes the next turn", async () => {
    const rt = await newRuntime(controllers, "cancel", { agents: { fixture: { command: fixture("--turn=by-text") } } });
    const h = await ensure(rt);
    const turn = rt.startTurn(turnInput(h, "hang"));
    const it = turn.events[Symbol.asyncIterator]();
    // the fixture's thought chunk says the turn has started
    for (let e = await it.next(); !e.done; e = await it.next())
      if (e.value.type === "text_delta" && e.value.stream === "thought") break;
    await rt.cancel({ handle: h, reason: "user asked" });
    expect(await turn.result).toEqual({ status: "cancelled", stopReason: "cancelled" });
    const st = await rt.getStatus({ handle: h });
    expect(st.details).toMatchObject({ status: "idle", lease: { state: "open" } });
    expect(replyText(await collect(rt.runTurn(turnInput(h, "next"))))).toBe("ok");
  });

  it("an aborted signal cancels the turn the same way; one aborted before the start sends nothing", async () => {
    const rt = await newRuntime(controllers, "abort", { agents: { fixture: { command: fixture("--turn=by-text") } } });
    const h = await ensure(rt);
    const ac = new AbortController();
    const turn = rt.startTurn(turnInput(h, "hang", { signal: ac.signal }));
    await turn.promptStarted;
    ac.abort();
    expect(await turn.result).toEqual({ status: "cancelled", stopReason: "cancelled" });
    const early = rt.startTurn(turnInput(h, "hi", { signal: AbortSignal.abort() }));
    expect(await early.result).toEqual({ status: "cancelled", stopReason: "cancelled" });
    await expect(early.promptStarted).rejects.toThrow(/aborted before its prompt was sent/);
  });

  it("a second turn while one runs fails SESSION_BUSY (retryable) and its promptStarted rejects; closeStream ends the events, not the turn", async () => {
    const rt = await newRuntime(controllers, "busy", { agents: { fixture: { command: fixture("--turn=by-text") } } });
    const h = await ensure(rt);
    const first = rt.startTurn(turnInput(h, "hang"));
    await first.promptStarted;
    const second = rt.startTurn({ ...turnInput(h, "steer this"), mode: "steer" });
    expect(await second.result).toMatchObject({
      status: "failed",
      error: { code: "ACP_TURN_FAILED", detailCode: "SESSION_BUSY", retryable: true },
    });
    await expect(second.promptStarted).rejects.toMatchObject({ code: "ACP_TURN_FAILED", detailCode: "SESSION_BUSY" });
    await first.closeStream();
    expect(await drain(first)).toEqual([]);
    await first.cancel();
    expect(await first.result).toMatchObject({ status: "cancelled" });
  });
});

describe("handles and status", () => {
  it('handles carry backend === backendId (default "proclease"), the agent session id and the lease', async () => {
    const rt = await newRuntime(controllers, "backend-id");
    const h = await ensure(rt, { sessionKey: "agent:main:acp:handle" });
    expect(h).toMatchObject({
      sessionKey: "agent:main:acp:handle",
      agentId: "main",
      backend: "proclease",
      runtimeSessionName: "oc:main:agent:main:acp:handle",
    });
    expect(h.agentSessionId).toMatch(/^fixture-/);
    expect(h.backendSessionId).toBe(h.agentSessionId);
    const custom = await newRuntime(controllers, "backend-id-2", { backendId: "leased-acp" });
    expect((await ensure(custom)).backend).toBe("leased-acp");
    await expect(newRuntime(controllers, "backend-id-3", { backendId: "Upper" })).rejects.toThrow(/lowercase/);
  });

  it("getStatus gives the lease's state and its tree, verified (at most a second ago, its age said); after close, no-session", async () => {
    const rt = await newRuntime(controllers, "status");
    const h = await ensure(rt);
    const st = await rt.getStatus({ handle: h });
    const d = st.details as {
      lease: { leaseId: string; state: string; rootPid: number };
      tree: { verified: boolean; rootPid: number; members: Array<{ pid: number }>; verifiedAt: number; ageMs: number };
      status: string;
    };
    // the first status of a lease waits for its verification
    expect(d.tree.ageMs).toBeLessThan(1000);
    expect(d.tree.verifiedAt).toBeLessThanOrEqual(Date.now());
    expect(d.status).toBe("idle");
    expect(d.lease).toMatchObject({ leaseId: h.leaseId, state: "open" });
    expect(d.tree.verified).toBe(true);
    expect(d.tree.rootPid).toBe(d.lease.rootPid);
    const pids = d.tree.members.map((m) => m.pid);
    // the wrapper and the adapter, every one of them carrying this lease
    expect(pids).toContain(d.lease.rootPid);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    expect(new Set(leaseCarriers(h.leaseId))).toEqual(new Set(pids));
    expect(st.summary).toMatch(
      new RegExp(`^status=idle backend=proclease lease=${h.leaseId} \\(open\\) tree=${pids.length} processes`),
    );
    expect(st.agentSessionId).toBe(h.agentSessionId);
    // the next statuses answer with that view until it is a second old, then one verifies it again in the background
    const verifiedAt = (s: Awaited<ReturnType<typeof rt.getStatus>>): number =>
      (s.details as { tree: { verifiedAt: number } }).tree.verifiedAt;
    expect(verifiedAt(await rt.getStatus({ handle: h }))).toBe(d.tree.verifiedAt);
    expect(
      await waitFor(async () => verifiedAt(await rt.getStatus({ handle: h })) > d.tree.verifiedAt, 10_000, 100),
    ).toBeGreaterThanOrEqual(1000);
    await rt.close({ handle: h, reason: "test" });
    expect(await waitFor(() => pids.every((p) => !alive(p)), 10_000)).toBeGreaterThanOrEqual(0);
    const after = await rt.getStatus({ handle: h });
    expect(after.details).toMatchObject({ status: "no-session" });
    expect(after.summary).toMatch(/^status=no-session /);
    const lease = (await (await rt.controller()).listLeases()).find((l) => l.leaseId === h.leaseId);
    expect(lease?.state).toBe("closed");
  });

  it("capabilities and config options come from what the agent offers; a boolean option takes OpenClaw's string", async () => {
    const rt = await newRuntime(controllers, "controls");
    const h = await ensure(rt);
    expect(await rt.getCapabilities({ handle: h })).toEqual({
      controls: ["session/set_config_option", "session/set_mode", "session/status"],
      configOptionKeys: ["model", "verbose"],
    });
    const r = await rt.setConfigOption({ handle: h, key: "verbose", value: "true" });
    expect(r.configOptions).toEqual([
      {
        id: "model",
        category: "model",
        currentValue: "fixture-small",
        options: [{ value: "fixture-small" }, { value: "fixture-large" }],
      },
      { id: "verbose", currentValue: true },
    ]);
    const bad = await rejection(rt.setMode({ handle: h, mode: "yolo" }));
    expect(bad).toMatchObject({ code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "INVALID_VALUE", retryable: false });
    const none = await newRuntime(controllers, "controls-none", {
      agents: { fixture: { command: fixture("--session-caps=none") } },
    });
    const h2 = await ensure(none);
    expect(await none.getCapabilities({ handle: h2 })).toEqual({ controls: ["session/status"] });
    expect(await rejection(none.setMode({ handle: h2, mode: "code" }))).toMatchObject({
      code: "ACP_BACKEND_UNSUPPORTED_CONTROL",
      detailCode: "UNSUPPORTED",
    });
  });

  it("a model asked for at ensure is applied when offered, dropped when only inherited, and fails closed when explicit", async () => {
    const rt = await newRuntime(controllers, "model");
    const h = await ensure(rt, { model: "fixture-large" });
    expect(h.appliedModel).toEqual({ kind: "applied", model: "fixture-large" });
    expect(JSON.parse(replyText(await collect(rt.runTurn(turnInput(h, "/whoami")))))).toMatchObject({
      model: "fixture-large",
    });
    expect((await ensure(rt, { model: "gpt-9" })).appliedModel).toEqual({ kind: "dropped" });
    const e = await rejection(
      ensure(rt, { sessionKey: "agent:main:acp:explicit", model: "gpt-9", modelExplicit: true }),
    );
    expect(e).toMatchObject({ code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "MODEL_UNAVAILABLE", retryable: false });
    expect(e.message).toMatch(/fixture-small, fixture-large/);
    // the session it had started was closed again
    const leases = await (await rt.controller()).listLeases();
    expect(leases.filter((l) => l.sessionKey === "oc:main:agent:main:acp:explicit").map((l) => l.state)).toEqual([
      "closed",
    ]);
  });

  it("a handle of an earlier lease of the key never reaches the current session", async () => {
    const rt = await newRuntime(controllers, "stale");
    const first = await ensure(rt, { sessionKey: "agent:main:acp:stale" });
    await rt.close({ handle: first, reason: "test" });
    const second = await ensure(rt, { sessionKey: "agent:main:acp:stale" });
    expect(second.leaseId).not.toBe(first.leaseId);
    await rt.close({ handle: first, reason: "stale close" });
    await rt.cancel({ handle: first });
    expect((await rt.getStatus({ handle: second })).details).toMatchObject({
      status: "idle",
      lease: { state: "open" },
    });
    expect(await rt.startTurn(turnInput(first, "hi")).result).toMatchObject({
      status: "failed",
      error: { detailCode: "NO_SESSION" },
    });
  });
});

describe("errors OpenClaw can act on", () => {
  it("an agent that needs a login fails ensure with ACP_SESSION_INIT_FAILED / AUTH_REQUIRED and the methods it offers; the lease settles", async () => {
    const rt = await newRuntime(controllers, "auth", {
      agents: { fixture: { command: fixture("--require-auth=api-key,chat-gpt") } },
    });
    const e = await rejection(ensure(rt, { sessionKey: "agent:main:acp:auth" }));
    expect(e).toBeInstanceOf(ProcleaseAcpRuntimeError);
    expect(e).toMatchObject({ code: "ACP_SESSION_INIT_FAILED", detailCode: "AUTH_REQUIRED", retryable: false });
    expect((e.authMethods as Array<{ id: string }>).map((m) => m.id)).toEqual(["api-key", "chat-gpt"]);
    expect(e.message).toMatch(/api-key/);
    expect(e.message).toMatch(/chat-gpt/);
    const leases = await (await rt.controller()).listLeases();
    expect(leases.map((l) => l.state).every((s) => s === "closed" || s === "lost")).toBe(true);
    // with a method configured for the agent, the same agent opens a session
    const ok = await newRuntime(controllers, "auth-ok", {
      agents: { fixture: { command: fixture("--require-auth=api-key"), auth: { methodId: "api-key" } } },
    });
    expect((await ensure(ok)).agentSessionId).toMatch(/^fixture-/);
  });

  it("an agent name that is not configured fails AGENT_NOT_CONFIGURED naming the configured ones; an adapter that cannot start fails SPAWN_ERROR", async () => {
    const rt = await newRuntime(controllers, "agents", {
      agents: { fixture: { command: fixture() }, ghost: { command: ["/nonexistent/adapter"] } },
    });
    const e = await rejection(ensure(rt, { agent: "codex" }));
    expect(e).toMatchObject({ code: "ACP_SESSION_INIT_FAILED", detailCode: "AGENT_NOT_CONFIGURED", retryable: false });
    expect(e.message).toMatch(/configured: fixture, ghost/);
    // OpenClaw lowercases agent names; so does the lookup
    expect((await ensure(rt, { agent: " Fixture " })).backend).toBe("proclease");
    expect(await rejection(ensure(rt, { agent: "ghost" }))).toMatchObject({
      code: "ACP_SESSION_INIT_FAILED",
      detailCode: "SPAWN_ERROR",
      retryable: false,
    });
  });

  it.skipIf(NO_ENV)(
    `a close that cannot verify the tree fails loudly, CLOSE_UNSETTLED and retryable, the lease stays closing until the facts answer${NO_ENV_NOTE}`,
    async () => {
      const t = trickyFacts();
      const rt = await newRuntime(controllers, "unsettled", {
        facts: t.facts,
        containment: "off",
        maintenanceIntervalMs: 150,
        agents: { fixture: { command: fixture("--grandchild=setsid") } },
      });
      const h = await ensure(rt);
      const rootPid = ((await rt.getStatus({ handle: h })).details as { lease: { rootPid: number } }).lease.rootPid;
      t.ghost = (await FACTS.snapshot()).processes.get(rootPid) ?? null;
      t.blind.add(rootPid);
      const e = await rejection(rt.close({ handle: h, reason: "root uninspectable" }));
      expect(e).toMatchObject({ code: "ACP_TURN_FAILED", detailCode: "CLOSE_UNSETTLED", retryable: true });
      expect(e.message).toMatch(/the root could not be inspected/);
      expect((await (await rt.controller()).listLeases()).find((l) => l.leaseId === h.leaseId)?.state).toBe("closing");
      // once the facts answer again, the maintenance timer settles it
      t.blind.clear();
      t.ghost = null;
      expect(
        await waitFor(
          async () =>
            ["closed", "lost"].includes(
              (await (await rt.controller()).listLeases()).find((l) => l.leaseId === h.leaseId)?.state ?? "",
            ),
          10_000,
        ),
      ).toBeGreaterThanOrEqual(0);
      expect(leaseCarriers(h.leaseId)).toEqual([]);
    },
  );

  it("without process facts the backend says it is unhealthy (OpenClaw's registry then refuses it), and doctor says why", async () => {
    const rt = await newRuntime(controllers, "no-facts", { facts: getProcessFacts({ backend: "none" }) });
    expect(rt.healthy()).toBe(false);
    const d = await rt.doctor();
    expect(d).toMatchObject({ ok: false, code: "FACTS_UNAVAILABLE" });
    expect(d.message).toMatch(/no process can be verified and none is ever signalled/);
  });

  it("a host error factory builds the thrown errors (the plugin passes the SDK's AcpRuntimeError), keeping retryable and authMethods", async () => {
    class HostError extends Error {
      constructor(
        readonly code: string,
        message: string,
        readonly options?: { detailCode?: string },
      ) {
        super(message);
      }
    }
    const rt = await newRuntime(controllers, "factory", {
      errorFactory: (code, message, o) => new HostError(code, message, o),
    });
    const e = await rejection(ensure(rt, { agent: "nope" }));
    expect(e).toBeInstanceOf(HostError);
    expect(e).toMatchObject({
      code: "ACP_SESSION_INIT_FAILED",
      options: { detailCode: "AGENT_NOT_CONFIGURED" },
      retryable: false,
    });
  });
});
