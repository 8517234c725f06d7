/**
 * The conversation on top of the lease lifecycle, with real processes (the
 * bundled wrapper around the fixture agent): streamed turns in arrival
 * order, updates outside turns (never lost), permissions (fail closed),
 * cancel, content blocks, session controls and the controller's hygiene
 * (same-key rule, typed errors, listSessions, shutdown, hooks, non-ACP
 * stdout). Build first (`npm run build`).
 */
import { execSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import {
  AcpxControllerDisposedError,
  AcpxEnsureError,
  AcpxSessionBusyError,
  AcpxSessionRequestError,
  AcpxUnsupportedContentError,
} from "../../src/acpx/report/errors.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type {
  AcpxLifecycleControllerOptions,
  LeaseSettledOutcome,
  SessionEndHow,
} from "../../src/acpx/sessions/types.js";
import type { AcpxProcessLease } from "../../src/ownership/leases/types.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  tempStateDir,
  trackLease,
  waitFor,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

async function newController(label: string, extra: Partial<AcpxLifecycleControllerOptions> = {}) {
  const ctl = await createAcpxLifecycleController({
    stateDir: tempStateDir(label),
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    ...extra,
  });
  controllers.push(ctl);
  return ctl;
}

async function ensure(
  ctl: Awaited<ReturnType<typeof newController>>,
  key: string,
  extra: string[] = [],
  more: object = {},
): Promise<AcpRuntimeHandle> {
  const h = await ctl.ensureSession({ sessionKey: key, agentId: "main", command: agentArgv({ extra }), ...more });
  trackLease(h.leaseId);
  return h;
}

async function collect(events: AsyncIterable<SessionUpdate>): Promise<SessionUpdate[]> {
  const out: SessionUpdate[] = [];
  for await (const u of events) out.push(u);
  return out;
}

/** The turn's updates without the fixture's available_commands_update, which it sends right after session/new and may land in the first turn (arrival order). */
async function collectTurn(events: AsyncIterable<SessionUpdate>): Promise<SessionUpdate[]> {
  return (await collect(events)).filter((u) => u.sessionUpdate !== "available_commands_update");
}

const text = (u: SessionUpdate): string =>
  u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" ? u.content.text : "";

describe("startTurn: streamed updates", () => {
  it("delivers every update of the turn in arrival order, unmodified, then the result", async () => {
    const ctl = await newController("stream");
    const h = await ensure(ctl, "k-stream");
    const turn = ctl.startTurn(h, "/chunks 500");
    const got = await collectTurn(turn.events);
    const r = await turn.result;
    expect(r).toEqual({ stopReason: "end_turn", cancelRequested: false });
    expect(got).toHaveLength(500);
    // the fixture numbers its chunks in _meta.i: arrival order is send order
    expect(got.map((u) => (u._meta as { i: number }).i)).toEqual([...Array(500).keys()]);
    expect(got[0]).toMatchObject({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x" } });
    expect(typeof (got[0]!._meta as { sentAt: number }).sentAt).toBe("number");
  });

  it("a story turn streams thought, plan, tool call, its update, the reply and usage; result carries usage", async () => {
    const ctl = await newController("story", {
      onPermissionRequest: (req) => ({ outcome: { outcome: "selected", optionId: req.options[0]!.optionId } }),
    });
    const h = await ensure(ctl, "k-story");
    const turn = ctl.startTurn(h, "/story");
    const got = await collectTurn(turn.events);
    expect(got.map((u) => u.sessionUpdate)).toEqual([
      "agent_thought_chunk",
      "plan",
      "tool_call",
      "tool_call_update",
      "agent_message_chunk",
      "agent_message_chunk",
      "usage_update",
    ]);
    expect(got.map(text).join("")).toBe("permission: allow. Done.");
    const r = await turn.result;
    expect(r.usage).toEqual({ totalTokens: 42, inputTokens: 30, outputTokens: 12 });
    expect(r.contextUsage).toEqual({ used: 1200, size: 200000 });
  });

  it("updates outside a turn reach onUpdate, the backlog first (available_commands_update after session/new is kept)", async () => {
    const warnings: string[] = [];
    const ctl = await newController("outside", { logger: { warn: (m: string) => warnings.push(m) } });
    const h = await ensure(ctl, "k-outside");
    // the fixture sends its commands right after answering session/new; the state tracks them with no listener attached
    expect(
      await waitFor(async () => (await ctl.sessionStatus(h)).availableCommands.length > 0, 5000),
    ).toBeGreaterThanOrEqual(0);
    const seen: SessionUpdate[] = [];
    const off = ctl.onUpdate(h, (u) => seen.push(u));
    expect(seen.map((u) => u.sessionUpdate)).toEqual(["available_commands_update"]);
    // a listener that throws is logged and breaks nothing
    const offBad = ctl.onUpdate(h, () => {
      throw new Error("listener exploded");
    });
    // prompt() turns are not streamed: their updates go to the listeners
    await expect(ctl.prompt(h, "hello")).resolves.toEqual({ stopReason: "end_turn" });
    expect(seen.map(text)).toContain("ok");
    // a startTurn turn's updates go to its events only
    const n = seen.length;
    await collect(ctl.startTurn(h, "hello").events);
    expect(seen.length).toBe(n);
    off();
    offBad();
    expect(warnings.some((w) => w.includes("listener exploded"))).toBe(true);
    const st = await ctl.sessionStatus(h);
    expect(st.availableCommands.map((c) => c.name)).toEqual(["story", "whoami"]);
  });

  it("cancel() sends session/cancel and resolves once the turn ended; result says cancelled", async () => {
    const ctl = await newController("cancel");
    const h = await ensure(ctl, "k-cancel", ["--turn=by-text"]);
    const turn = ctl.startTurn(h, "hang");
    // the fixture's first update says the turn has started
    const it = turn.events[Symbol.asyncIterator]();
    let first = await it.next();
    while (first.value?.sessionUpdate === "available_commands_update") first = await it.next();
    expect(first.value).toMatchObject({ sessionUpdate: "agent_thought_chunk" });
    const report = await turn.cancel();
    expect(report).toEqual({ cancelSent: true, turnEnded: true, stopReason: "cancelled" });
    await expect(turn.result).resolves.toEqual({ stopReason: "cancelled", cancelRequested: true });
    // a deaf agent never ends the turn: cancel gives up after the grace and says so
    const deaf = ctl.startTurn(h, "deaf", { cancelGraceMs: 300 });
    await deaf.events[Symbol.asyncIterator]().next();
    expect(await deaf.cancel()).toEqual({ cancelSent: true, turnEnded: false });
    expect(() => ctl.startTurn(h, "again")).toThrow(AcpxSessionBusyError);
    expect((await ctl.sessionStatus(h)).busy).toBe(true);
    // cancelTurn reports the same way
    expect(await ctl.cancelTurn({ ...h, leaseId: "stale" })).toEqual({ cancelSent: false, turnEnded: true });
  });

  it("content blocks: sent as given; a block the agent did not advertise is refused before anything is sent", async () => {
    const ctl = await newController("blocks");
    const h = await ensure(ctl, "k-blocks");
    const turn = ctl.startTurn(h, [
      { type: "text", text: "/echo" },
      { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
      { type: "resource_link", uri: "file:///tmp/x.txt", name: "x.txt" },
      { type: "resource", resource: { uri: "file:///tmp/y.txt", text: "hello" } },
    ]);
    expect((await collectTurn(turn.events)).map(text)).toEqual([
      "block text",
      "block image",
      "block resource_link",
      "block resource",
    ]);
    expect(() => ctl.startTurn(h, [{ type: "audio", mimeType: "audio/wav", data: "AAAA" }])).toThrow(
      AcpxUnsupportedContentError,
    );
    expect(() => ctl.startTurn(h, [])).toThrow(TypeError);
    await expect(ctl.prompt(h, "still fine")).resolves.toEqual({ stopReason: "end_turn" });
  });
});

describe("permissions", () => {
  it("without a hook every request is answered cancelled (fail closed)", async () => {
    const ctl = await newController("perm-default");
    const h = await ensure(ctl, "k-perm-default");
    const got = await collect(ctl.startTurn(h, "/story").events);
    expect(got.map(text).join("")).toBe("permission: cancelled. Not done.");
  });

  it("a hook gets the request with the handle and a signal; its answer reaches the agent", async () => {
    const asked: { sessionKey: string; title: string | null | undefined; signal: boolean }[] = [];
    const ctl = await newController("perm-hook", {
      onPermissionRequest: async (req, { handle, signal }) => {
        asked.push({ sessionKey: handle.sessionKey, title: req.toolCall.title, signal: signal instanceof AbortSignal });
        return { outcome: "selected", optionId: "reject" };
      },
    });
    const h = await ensure(ctl, "k-perm-hook");
    expect((await collect(ctl.startTurn(h, "/story").events)).map(text).join("")).toBe("permission: reject. Not done.");
    expect(asked).toEqual([{ sessionKey: "k-perm-hook", title: "Write notes.txt", signal: true }]);
  });

  it("a hook that throws, answers an option never offered, or times out answers cancelled, and the logger says why", async () => {
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m) };
    let mode = "throw";
    const ctl = await newController("perm-bad", {
      logger,
      permissionTimeoutMs: 200,
      onPermissionRequest: async () => {
        if (mode === "throw") throw new Error("hook exploded");
        if (mode === "bogus") return { outcome: { outcome: "selected", optionId: "not-offered" } };
        return new Promise(() => undefined);
      },
    });
    const h = await ensure(ctl, "k-perm-bad");
    for (const m of ["throw", "bogus", "hang"]) {
      mode = m;
      expect((await collect(ctl.startTurn(h, "/story").events)).map(text).join(""), m).toBe(
        "permission: cancelled. Not done.",
      );
    }
    expect(warnings.some((w) => w.includes("hook exploded"))).toBe(true);
    expect(warnings.some((w) => w.includes('"not-offered", which the agent did not offer'))).toBe(true);
    expect(warnings.some((w) => w.includes("no answer within 200 ms"))).toBe(true);
  });

  it("cancelling the turn aborts the hook's signal and answers cancelled at once", async () => {
    let aborted = false;
    let turnRef: ReturnType<Awaited<ReturnType<typeof newController>>["startTurn"]> | undefined;
    const ctl = await newController("perm-cancel", {
      onPermissionRequest: (_req, { signal }) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
            // too late: the answer was already "cancelled"
            resolve({ outcome: "selected", optionId: "allow" });
          });
          // the user presses stop while the question is open
          setTimeout(() => void turnRef?.cancel(), 50);
        }),
    });
    const h = await ensure(ctl, "k-perm-cancel");
    turnRef = ctl.startTurn(h, "/story");
    const got = await collect(turnRef.events);
    expect(aborted).toBe(true);
    expect(got.map(text).join("")).toBe("permission: cancelled. Not done.");
    expect((await turnRef.result).cancelRequested).toBe(true);
  });
});

describe("session controls", () => {
  it("modes and config options are readable; setMode and setConfigOption map to ACP and are checked first", async () => {
    const ctl = await newController("controls");
    const h = await ensure(ctl, "k-controls");
    let st = await ctl.sessionStatus(h);
    expect(st.modes?.currentModeId).toBe("ask");
    expect(st.modes?.availableModes.map((m) => m.id)).toEqual(["ask", "code", "plan"]);
    expect(st.configOptions?.map((o) => o.id)).toEqual(["model", "verbose"]);
    await ctl.setMode(h, "code");
    const opts = await ctl.setConfigOption(h, "model", "fixture-large");
    expect(opts.find((o) => o.id === "model")).toMatchObject({ currentValue: "fixture-large" });
    await ctl.setConfigOption(h, "verbose", true);
    st = await ctl.sessionStatus(h);
    expect(st.modes?.currentModeId).toBe("code");
    expect(st.configOptions?.find((o) => o.id === "verbose")).toMatchObject({ currentValue: true });
    // the agent itself saw them
    const who = JSON.parse((await collect(ctl.startTurn(h, "/whoami").events)).map(text).join("")) as {
      modeId: string;
      model: string;
    };
    expect(who).toMatchObject({ modeId: "code", model: "fixture-large" });
    await expect(ctl.setMode(h, "nope")).rejects.toMatchObject({ name: "AcpxSessionRequestError", failure: "invalid" });
    await expect(ctl.setConfigOption(h, "model", "fixture-huge")).rejects.toMatchObject({ failure: "invalid" });
    await expect(ctl.setConfigOption(h, "verbose", "yes")).rejects.toMatchObject({ failure: "invalid" });
    await expect(ctl.setConfigOption(h, "temperature", "1")).rejects.toMatchObject({ failure: "unsupported" });
  });

  it("an agent without modes or config options: typed unsupported, nothing sent", async () => {
    const ctl = await newController("controls-none");
    const h = await ensure(ctl, "k-controls-none", ["--session-caps=close"]);
    await expect(ctl.setMode(h, "code")).rejects.toBeInstanceOf(AcpxSessionRequestError);
    await expect(ctl.setMode(h, "code")).rejects.toMatchObject({ failure: "unsupported", code: "unsupported" });
    expect((await ctl.sessionStatus(h)).modes).toBeNull();
  });

  it("MCP servers reach session/new as given", async () => {
    const ctl = await newController("mcp");
    const mcpServers = [{ name: "files", command: "/bin/true", args: [], env: [] }];
    const h = await ensure(ctl, "k-mcp", [], { mcpServers });
    const who = JSON.parse((await collect(ctl.startTurn(h, "/whoami").events)).map(text).join("")) as {
      mcpServers: string[];
    };
    expect(who.mcpServers).toEqual(["files"]);
  });
});

describe("controller hygiene", () => {
  it("same key: the running session is reused only for the same command, agentId and cwd; otherwise typed, unless replace", async () => {
    const ctl = await newController("same-key");
    const h = await ensure(ctl, "k-same");
    expect(h.reused).toBe(false);
    const again = await ensure(ctl, "k-same");
    expect(again).toMatchObject({ leaseId: h.leaseId, reused: true });
    const other = await ctl
      .ensureSession({ sessionKey: "k-same", agentId: "other", command: agentArgv({}) })
      .catch((e: unknown) => e);
    expect(other).toBeInstanceOf(AcpxEnsureError);
    expect(other).toMatchObject({ failure: "session-mismatch", code: "session-mismatch" });
    expect((other as Error).message).toContain('agentId "main" (asked "other")');
    await expect(ensure(ctl, "k-same", ["--turn=quick"])).rejects.toMatchObject({ failure: "session-mismatch" });
    await expect(
      ctl.ensureSession({ sessionKey: "k-same", agentId: "main", command: agentArgv({}), cwd: "/" }),
    ).rejects.toMatchObject({ failure: "session-mismatch" });
    expect(alive(h.rootPid)).toBe(true);
    const replaced = await ensure(ctl, "k-same", ["--turn=quick"], { replace: true });
    expect(replaced.leaseId).not.toBe(h.leaseId);
    expect(await waitFor(() => !alive(h.rootPid), 5000)).toBeGreaterThanOrEqual(0);
    const old = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId);
    expect(old?.state).toBe("closed");
  });

  it("busy and disposed are typed errors", async () => {
    const ctl = await newController("typed");
    const h = await ensure(ctl, "k-typed", ["--turn=until-cancel"]);
    const turn = ctl.startTurn(h, "long");
    await expect(ctl.prompt(h, "second")).rejects.toBeInstanceOf(AcpxSessionBusyError);
    await expect(ctl.prompt(h, "second")).rejects.toMatchObject({ code: "session-busy" });
    await turn.cancel();
    await ctl.closeSession({ handle: h });
    await ctl.dispose();
    await expect(ensure(ctl, "k-typed-2")).rejects.toBeInstanceOf(AcpxControllerDisposedError);
    await expect(ctl.reapStartupOrphans()).rejects.toMatchObject({ code: "controller-disposed" });
  });

  it("listSessions shows live and kept sessions; shutdown closes every session, then disposes", async () => {
    const settled: [string, LeaseSettledOutcome["via"], string][] = [];
    const ended: [string, SessionEndHow["kind"]][] = [];
    const ctl = await newController("shutdown", {
      onLeaseSettled: (lease: AcpxProcessLease, o) => settled.push([lease.leaseId, o.via, lease.state]),
      onSessionEnd: (handle, how) => ended.push([handle.sessionKey, how.kind]),
    });
    const a = await ensure(ctl, "k-a");
    const b = await ensure(ctl, "k-b", ["--grandchild=setsid"]);
    await ctl.closeSession({ handle: a });
    const c = await ensure(ctl, "k-c");
    const list = await ctl.listSessions();
    expect(list.map((s) => [s.sessionKey, s.live]).sort()).toEqual([
      ["k-a", false],
      ["k-b", true],
      ["k-c", true],
    ]);
    expect(list.find((s) => s.sessionKey === "k-a")?.closedAt).toBeGreaterThan(0);
    const reports = await ctl.shutdown();
    expect(reports.map((r) => [r.sessionKey, r.outcome]).sort()).toEqual([
      ["k-b", "closed"],
      ["k-c", "closed"],
    ]);
    for (const h of [a, b, c]) expect(leaseCarriers(h.leaseId)).toEqual([]);
    expect(settled.map(([id, via, state]) => [id, via, state]).sort()).toEqual(
      [
        [a.leaseId, "close", "closed"],
        [b.leaseId, "close", "closed"],
        [c.leaseId, "close", "closed"],
      ].sort(),
    );
    expect(ended.sort()).toEqual([
      ["k-a", "closed"],
      ["k-b", "closed"],
      ["k-c", "closed"],
    ]);
    await expect(ensure(ctl, "k-d")).rejects.toMatchObject({ code: "controller-disposed", how: "shut down" });
    // a second shutdown is refused like every other call; dispose() stays idempotent
    await expect(ctl.shutdown()).rejects.toMatchObject({ code: "controller-disposed", how: "shut down" });
    await expect(ctl.dispose()).resolves.toBeUndefined();
  });

  it("onSessionEnd says when the adapter died while idle", async () => {
    const ended: SessionEndHow[] = [];
    const ctl = await newController("died", { onSessionEnd: (_h, how) => ended.push(how) });
    const h = await ensure(ctl, "k-died");
    // the adapter is the wrapper's child
    const adapter = Number(execSync(`pgrep -P ${h.rootPid}`).toString().trim().split("\n")[0]);
    process.kill(adapter, "SIGKILL");
    expect(await waitFor(() => ended.length > 0, 5000)).toBeGreaterThanOrEqual(0);
    expect(ended[0]).toMatchObject({ kind: "adapter-died", duringTurn: false });
    await ctl.closeSession({ handle: h });
  });

  it("an adapter that prints something other than ACP on stdout is named in the handshake error", async () => {
    const settled: [string, string][] = [];
    const ctl = await newController("garbage", {
      handshakeTimeoutMs: 1500,
      onLeaseSettled: (l, o) => settled.push([l.leaseId, o.via]),
    });
    const e = (await ctl
      .ensureSession({
        sessionKey: "k-garbage",
        agentId: "main",
        command: ["sh", "-c", "echo 'Usage: my-agent [--acp] <prompt>'; exec sleep 60"],
      })
      .catch((err: unknown) => err)) as AcpxEnsureError;
    expect(e).toBeInstanceOf(AcpxEnsureError);
    if (e.leaseId) trackLease(e.leaseId);
    expect(e.failure).toBe("handshake-timeout");
    expect(e.message).toContain(
      'the adapter wrote something other than ACP on stdout: "Usage: my-agent [--acp] <prompt>"',
    );
    expect(e.stdoutHead).toBe("Usage: my-agent [--acp] <prompt>\n");
    expect(["closed", "lost"]).toContain(e.leaseState);
    expect(await waitFor(() => settled.length > 0, 5000)).toBeGreaterThanOrEqual(0);
    expect(settled).toEqual([[e.leaseId, "ensure-failed"]]);
  });
});
