/**
 * Messages shaped to cost the gateway (issue 46, findings 3, 4 and 6), from
 * real hostile agents writing raw JSON-RPC:
 * - lines of 31 MiB and 11 MiB made of tiny JSON values, and one nested
 *   100,000 deep: each is refused before JSON.parse builds it (too large:
 *   skipped as it arrives; too many values, too deep: read from its bytes),
 *   counted, and the turn goes on; the loop is never blocked 250 ms;
 * - a session/new answer whose modes nest 10,000 deep: the ensure fails
 *   with the refusal named, nothing of the session left running;
 * - responses to ids the gateway never sent (1 MiB ids, an id holding ESC
 *   and a newline), session/updates the ACP schema refuses, response-shaped
 *   messages without an id: none reaches the gateway's stderr raw (the SDK
 *   would console.error each one), what is logged is escaped and within the
 *   session's log rate, and each is counted.
 * Build first (`npm run build`): the gateway and the wrapper run from dist/.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import {
  cleanupAll,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  tempStateDir,
  waitFor,
} from "../acpx/controller-helpers.js";
import { hostileAgent } from "./hostile-agent.js";
import { describeRun, runGateway } from "./intake-helpers.js";

const controllers = disposeAfterEach();
afterEach(() => cleanupAll());

const LOOP_LIMIT_MS = 250;
const HEAP_GROWTH_LIMIT_MB = 256;

/** a session/update line whose _meta holds `count` numbers (two bytes each) */
const tinyValues = (count: number): string =>
  `'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + sessionId + '","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"_meta":{"v":[' + "0,".repeat(${count}) + '0]}}}}'`;

describe("messages shaped to cost the gateway", () => {
  it("31 MiB and 11 MiB lines of tiny values and a 100,000-deep nest are refused before parsing; the turn goes on", async () => {
    const deep = `'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + sessionId + '","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"},"_meta":{"d":' + "[".repeat(100000) + "]".repeat(100000) + '}}}}'`;
    const run = await runGateway("shapes", {
      command: hostileAgent("shapes", {
        onMessage: `
          if (m.method === "session/prompt") {
            for (let i = 0; i < 3; i++) sendRaw(${tinyValues(31 * 512 * 1024)});
            for (let i = 0; i < 2; i++) sendRaw(${tinyValues(11 * 512 * 1024)});
            sendRaw(${deep});
            send({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "still here" } } } });
            send({ jsonrpc: "2.0", id: m.id, result: { stopReason: "end_turn" } });
          }`,
      }),
      prompt: "go",
      until: { refusedAtLeast: 6 },
      deadlineMs: 60_000,
      settleMs: 1000,
    });
    console.log(`shapes: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.conditionMet).toBe(true);
    expect(r!.intake!.refused).toEqual({ "message-too-large": 3, "json-too-many-values": 2, "json-too-deep": 1 });
    expect(r!.promptOutcome).toBe("resolved end_turn");
    expect(r!.floodLoopMs).toBeLessThan(LOOP_LIMIT_MS);
    expect(r!.heapGrowthMb).toBeLessThan(HEAP_GROWTH_LIMIT_MB);
    expect(r!.closeOutcome).toBe("closed");
  }, 120_000);

  it("a session/new answer whose modes nest 10,000 deep: the ensure fails naming the bound; nothing is left running", async () => {
    const ctl = await createAcpxLifecycleController({
      stateDir: tempStateDir("deep-modes"),
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
    });
    controllers.push(ctl);
    const command = hostileAgent("deep-modes", {
      sessionNewLine: `'{"jsonrpc":"2.0","id":' + m.id + ',"result":{"sessionId":"' + sessionId + '","modes":{"currentModeId":"a","availableModes":[{"id":"a","name":"A","_meta":{"d":' + "[".repeat(10000) + "]".repeat(10000) + '}}]}}}'`,
      onMessage: "",
    });
    const err = await ctl.ensureSession({ sessionKey: "k-deep", agentId: "main", command }).then(
      () => undefined,
      (e: unknown) =>
        e as { name: string; message: string; acpError?: { data?: unknown }; leaseId?: string; leaseState?: string },
    );
    expect(err?.name).toBe("AcpxEnsureError");
    expect(err?.message).toMatch(/maxJsonDepth/);
    expect(err?.acpError?.data).toEqual({ refusal: "json-too-deep", limit: 64 });
    expect(["closed", "lost"]).toContain(err?.leaseState);
    expect(await waitFor(() => leaseCarriers(err!.leaseId!).length === 0, 5000)).toBeGreaterThanOrEqual(0);
    expect(await ctl.listSessions()).toEqual([]);
  }, 60_000);

  it("responses to ids never sent, schema-refused updates and id-less responses never reach stderr raw; each is counted", async () => {
    const forged = "\u001b[31mX\nFORGED gateway: every session closed\u001b[0m";
    const run = await runGateway("unknown-ids", {
      command: hostileAgent("unknown-ids", {
        onMessage: `
          if (m.method === "session/prompt") {
            const big = "A".repeat(1024 * 1024);
            for (let i = 0; i < 100; i++) sendRaw('{"jsonrpc":"2.0","id":"' + big + i + '","result":{}}');
            send({ jsonrpc: "2.0", id: ${JSON.stringify(forged)}, result: {} });
            send({ jsonrpc: "2.0", id: 999999, error: { code: 1, message: ${JSON.stringify(forged)} } });
            for (let i = 0; i < 1000; i++) send({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: 5 } } });
            for (let i = 0; i < 1000; i++) send({ jsonrpc: "2.0", result: ${JSON.stringify(forged)} });
            send({ jsonrpc: "2.0", id: m.id, result: { stopReason: "end_turn" } });
          }`,
      }),
      prompt: "go",
      until: { refusedAtLeast: 2102 },
      deadlineMs: 30_000,
      settleMs: 1500,
    });
    console.log(`unknown ids: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.intake!.refused).toEqual({
      "unknown-response": 102,
      "invalid-notification": 1000,
      "invalid-message": 1000,
    });
    expect(r!.promptOutcome).toBe("resolved end_turn");
    // nothing the agent sent reaches stderr raw: no escape code, no line it forged, none of the SDK's own lines
    expect(run.stderr).not.toContain("\u001b");
    expect(run.stderr).not.toMatch(/^FORGED/m);
    expect(run.stderr).not.toMatch(/Got response to unknown request|Invalid message|Error handling notification/);
    // within the session's log rate (64 KiB a second) over the few seconds of the run, where the SDK wrote 100 MiB
    expect(run.stderrBytes).toBeLessThan(1024 * 1024);
    expect(run.stderr).toMatch(/unknown-response/);
    expect(run.stderr).toMatch(/dropped: over \d+ log bytes per second/);
    expect(r!.intake!.logLinesDropped).toBeGreaterThan(0);
  }, 120_000);
});
