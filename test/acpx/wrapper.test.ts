/**
 * The wrapper's protocol and its adapter-group proof, and ACP spoken through
 * each wrapper to the fixture agent. The wrapper's own process behaviour is
 * wrapper-process.test.ts's; its teardown, wrapper-teardown.test.ts's.
 */
import { describe, expect, it } from "vitest";
import { adapterGroupProof, checkAdapterGroup, signalAdapterGroup } from "../../src/acpx/wrapper/adapter-group.js";
import { parseWrapperArgs } from "../../src/acpx/wrapper/args.js";
import {
  createReportReader,
  parseReportLine,
  wrapperArgs,
  type WrapperReport,
} from "../../src/acpx/wrapper/protocol.js";
import { ownProcessGroupId } from "../../src/facts/guards.js";
import { acpOver, AGENT, describeEachKind, spawnWrapper, tmp, useWrapperHarness } from "./wrapper-harness.js";

useWrapperHarness();

describe("protocol", () => {
  it("parses every report type and rejects malformed lines", () => {
    const good: WrapperReport[] = [
      { type: "started", wrapperPid: 10, adapterPid: 11, pgid: 11 },
      { type: "spawn-error", code: "ENOENT", message: "spawn nope ENOENT" },
      { type: "exit", code: null, signal: "SIGKILL" },
      { type: "exit", code: 3, signal: null },
      { type: "cleanup", reason: "parent-gone", ended: [11, 12], durationMs: 512 },
    ];
    for (const r of good) expect(parseReportLine(JSON.stringify(r))).toEqual(r);
    for (const bad of [
      "",
      "nope",
      "null",
      "{}",
      '{"type":"started","wrapperPid":0,"adapterPid":1,"pgid":1}',
      '{"type":"exit","code":"1","signal":null}',
      '{"type":"cleanup","reason":"why","ended":[],"durationMs":1}',
      '{"type":"cleanup","reason":"signal","ended":[-1],"durationMs":1}',
    ]) {
      expect(parseReportLine(bad)).toBeNull();
    }
  });

  it("reassembles reports split across chunks and skips garbage lines", () => {
    const got: WrapperReport[] = [];
    const r = createReportReader((x) => got.push(x));
    r.push('{"type":"exit","co');
    r.push('de":0,"signal":null}\ngarbage\n{"type":"started","wrapperPid":5,');
    r.push('"adapterPid":6,"pgid":6}');
    expect(got).toEqual([{ type: "exit", code: 0, signal: null }]);
    r.end();
    expect(got[1]).toEqual({ type: "started", wrapperPid: 5, adapterPid: 6, pgid: 6 });
  });

  it("validates wrapper arguments on both sides, naming the bad one", () => {
    expect(wrapperArgs("/w.js", ["a", "b"], { graceMs: 250 })).toEqual(["/w.js", "--grace-ms", "250", "--", "a", "b"]);
    expect(() => wrapperArgs("/w.js", [])).toThrow(TypeError);
    expect(() => wrapperArgs("/w.js", ["a"], { graceMs: -1 })).toThrow(/graceMs/);
    expect(() => wrapperArgs("/w.js", ["a"], { graceMs: Number.NaN })).toThrow(TypeError);
    expect(parseWrapperArgs(["--", "x", "--grace-ms", "1"])).toEqual({
      graceMs: 3000,
      command: ["x", "--grace-ms", "1"],
    });
    expect(parseWrapperArgs(["--grace-ms=10", "--", "x"]).graceMs).toBe(10);
    expect(() => parseWrapperArgs(["x"])).toThrow(/"--"/);
    expect(() => parseWrapperArgs(["--grace-ms", "abc", "--", "x"])).toThrow(/--grace-ms/);
    expect(() => parseWrapperArgs(["--grace-ms", "99999999", "--", "x"])).toThrow(RangeError);
    expect(() => parseWrapperArgs(["--"])).toThrow(/adapter command/);
  });
});

describe("adapter group proof (computed from the wrapper's state, never asserted)", () => {
  it("holds only for the group of the unreaped adapter it was created for", () => {
    expect(adapterGroupProof(4242, 4242)).toEqual({ groupVerifiedAsOwn: true, leaderIsVerifiedRoot: true });
    // reaped adapter (libuv has its status): no proof, whatever the pgid
    expect(adapterGroupProof(4242, null)).toEqual({ groupVerifiedAsOwn: false, leaderIsVerifiedRoot: false });
    // another group than the adapter's
    expect(adapterGroupProof(4243, 4242)).toEqual({ groupVerifiedAsOwn: false, leaderIsVerifiedRoot: false });
    expect(checkAdapterGroup(4243, 4242)).toMatchObject({ allowed: false, code: "group-not-verified" });
    expect(checkAdapterGroup(4242, null).allowed).toBe(false);
  });

  it("the guard still refuses our own group and our own pid even with a matching proof; nothing is sent", () => {
    const own = ownProcessGroupId();
    expect(own).not.toBeNull();
    expect(checkAdapterGroup(own!, own!)).toMatchObject({ allowed: false, code: "own-group" });
    expect(checkAdapterGroup(process.pid, process.pid).allowed).toBe(false);
    expect(checkAdapterGroup(1, 1).allowed).toBe(false);
    // refused or unproven: signalAdapterGroup reports nothing sent (and this test process is still here)
    expect(signalAdapterGroup(own!, own!, "SIGTERM")).toBe(false);
    expect(signalAdapterGroup(null, null, "SIGTERM")).toBe(false);
    expect(signalAdapterGroup(4242, null, "SIGTERM")).toBe(false);
  });
});

describeEachKind("fixture ACP agent, spoken to through the $name wrapper", () => {
  it("answers the handshake and quick turns", async () => {
    const w = spawnWrapper(["node", AGENT]);
    const acp = acpOver(w);
    const init = await acp.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    expect(init.protocolVersion).toBe(1);
    const { sessionId } = await acp.agent.request("session/new", { cwd: tmp, mcpServers: [] });
    expect(sessionId).toMatch(/^fixture-/);
    const turn = await acp.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] });
    expect(turn.stopReason).toBe("end_turn");
    w.child.stdin!.end();
    // stdin EOF ends the default agent, and the wrapper with its status
    expect(await w.exited).toEqual({ code: 0, signal: null });
  });

  it("--turn=until-cancel: a turn ends only on session/cancel, and the session stays usable", async () => {
    const w = spawnWrapper(["node", AGENT, "--turn=until-cancel"]);
    const acp = acpOver(w);
    await acp.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    const { sessionId } = await acp.agent.request("session/new", { cwd: tmp, mcpServers: [] });
    for (let i = 0; i < 2; i++) {
      let settled = false;
      const turn = acp.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `t${i}` }] });
      void turn.then(() => (settled = true));
      // "the turn has not ended" after events, not a pause: a request the agent does not
      // know, sent after the prompt, has been answered (an error) while the prompt has not
      await expect(acp.agent.request("proclease/ping", {})).rejects.toBeDefined();
      expect(settled).toBe(false);
      await acp.agent.notify("session/cancel", { sessionId });
      expect((await turn).stopReason).toBe("cancelled");
    }
    expect(w.child.exitCode).toBeNull();
  });

  it("--crash-on=session/new exits 3 mid-handshake; --never-answer leaves initialize pending", async () => {
    const crash = spawnWrapper(["node", AGENT, "--crash-on=session/new"]);
    const acp = acpOver(crash);
    await acp.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    await expect(acp.agent.request("session/new", { cwd: tmp, mcpServers: [] })).rejects.toBeDefined();
    expect(await crash.exited).toEqual({ code: 3, signal: null });

    const mute = spawnWrapper(["node", AGENT, "--never-answer"]);
    const acp2 = acpOver(mute);
    const pending = acp2.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    pending.catch(() => {});
    let answered = false;
    pending.then(
      () => (answered = true),
      () => {},
    );
    // silent after events, not after a pause: a request sent after initialize (one no agent
    // knows) comes back as an error, or not at all from a mute agent; either way the
    // initialize is still unanswered once the agent has had the later one
    const later = await Promise.race([
      acp2.agent.request("proclease/ping", {}).then(
        () => "ok",
        () => "error",
      ),
      mute.exited.then(() => "exited"),
    ]);
    expect(later).not.toBe("exited");
    expect(answered).toBe(false);
  });
});
