/**
 * An agent that asks and never reads the answers (issue 46, findings 1 and
 * 2): the gateway must not queue them without bound. Each case runs the
 * stand-in gateway in a process of its own (heap capped at 1 GB, so a
 * gateway that buffers dies of it instead of taking the machine), with a
 * hostile agent that stops reading its stdin when the prompt comes, then
 * floods requests. Asserted: the gateway's heap + external memory grows
 * under 256 MB, its event loop is never late by 250 ms or more, the excess
 * is refused and counted (requests in flight bounded), and the close ends
 * the session within 10 s without blocking the loop.
 * Build first (`npm run build`): the gateway and the wrapper run from dist/.
 */
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { cleanupAll } from "../acpx/controller-helpers.js";
import { hostileAgent } from "./hostile-agent.js";
import { describeRun, runGateway } from "./intake-helpers.js";
import { QUEUED_WRITE_OVERHEAD } from "../../src/acpx/connection/answer-writer.js";

afterEach(() => cleanupAll());

const HEAP_GROWTH_LIMIT_MB = 256;
const LOOP_LIMIT_MS = 250;
const CLOSE_LIMIT_MS = 10_000;
const IN_FLIGHT = 64;
const MiB = 1024 * 1024;

const dir = realpathSync(mkdtempSync(join(tmpdir(), "proclease-intake-files-")));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** stdin is left unread from the prompt on; `count` requests of `method` are written as fast as the pipe takes them */
const floodOnPrompt = (count: number, method: string, params: string): string => `
  if (m.method === "session/prompt") {
    stopReading();
    for (let i = 0; i < ${count}; i++) send({ jsonrpc: "2.0", id: 1000 + i, method: ${JSON.stringify(method)}, params: ${params} });
  }`;

describe("an agent that never reads its answers", () => {
  it("asks for a 10 MiB file 200 times: one answer is built at a time, the rest wait or are refused; memory stays bounded", async () => {
    const file = join(dir, "ten-mib.txt");
    writeFileSync(file, "0123456789abcdef\n".repeat((10 * 1024 * 1024) / 17));
    const run = await runGateway("fs-flood", {
      command: hostileAgent("fs-flood", {
        onMessage: floodOnPrompt(200, "fs/read_text_file", `{ sessionId, path: ${JSON.stringify(file)} }`),
      }),
      options: { clientCapabilities: { fs: { roots: [dir], write: false } } },
      prompt: "go",
      until: { refusedAtLeast: 200 - IN_FLIGHT - 1 },
      deadlineMs: 20_000,
    });
    console.log(`fs flood: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.conditionMet).toBe(true);
    expect(r!.heapGrowthMb).toBeLessThan(HEAP_GROWTH_LIMIT_MB);
    expect(r!.floodLoopMs).toBeLessThan(LOOP_LIMIT_MS);
    expect(r!.intake!.requestsInFlight).toBeLessThanOrEqual(IN_FLIGHT);
    expect(r!.intake!.refused["too-many-requests"]).toBeGreaterThanOrEqual(200 - IN_FLIGHT - 1);
    expect(r!.closeOutcome).toBe("closed");
    expect(r!.closeMs).toBeLessThan(CLOSE_LIMIT_MS);
  }, 120_000);

  it("sends 100,000 permission requests while the hook waits on a human: 64 wait, the rest are refused at once; the close is quick", async () => {
    const run = await runGateway("perm-hook", {
      command: hostileAgent("perm-hook", {
        onMessage: floodOnPrompt(
          100_000,
          "session/request_permission",
          `{ sessionId, toolCall: { toolCallId: "t" + i }, options: [{ optionId: "a", name: "Allow", kind: "allow_once" }] }`,
        ),
      }),
      hook: "never",
      prompt: "go",
      until: { refusedAtLeast: 100_000 - IN_FLIGHT, held: true },
      deadlineMs: 60_000,
    });
    console.log(`permission flood, hook waiting: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.conditionMet).toBe(true);
    expect(r!.heapGrowthMb).toBeLessThan(HEAP_GROWTH_LIMIT_MB);
    expect(r!.floodLoopMs).toBeLessThan(LOOP_LIMIT_MS);
    expect(r!.intake!.requestsInFlight).toBeLessThanOrEqual(IN_FLIGHT);
    expect(r!.intake!.refused["too-many-requests"]).toBeGreaterThan(0);
    expect(r!.closeOutcome).toBe("closed");
    expect(r!.closeMs).toBeLessThan(CLOSE_LIMIT_MS);
    expect(r!.closeLoopMs).toBeLessThan(LOOP_LIMIT_MS);
  }, 180_000);

  it("sends 40 permission requests of 2 MiB each while the hook waits: once 16 MiB wait, its stdout is held; memory stays bounded", async () => {
    const run = await runGateway("perm-bytes", {
      command: hostileAgent("perm-bytes", {
        onMessage: floodOnPrompt(
          40,
          "session/request_permission",
          `{ sessionId, toolCall: { toolCallId: "t" + i, content: [{ type: "content", content: { type: "text", text: "d".repeat(2 * 1024 * 1024) } }] }, options: [{ optionId: "a", name: "Allow", kind: "allow_once" }] }`,
        ),
      }),
      hook: "never",
      prompt: "go",
      until: { held: true },
      deadlineMs: 30_000,
    });
    console.log(`large permission requests, hook waiting: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.conditionMet).toBe(true);
    expect(r!.intake!.requestHolds).toBe(1);
    // the bound, plus what was read before the hold took effect: one message and the rest of its pipe chunk
    expect(r!.intake!.requestBytesInFlight).toBeLessThanOrEqual(16 * MiB + 2 * MiB + 64 * 1024);
    expect(r!.intake!.requestsInFlight).toBeLessThan(40);
    expect(r!.intake!.refused).toEqual({});
    expect(r!.heapGrowthMb).toBeLessThan(64);
    expect(r!.floodLoopMs).toBeLessThan(LOOP_LIMIT_MS);
    expect(r!.closeOutcome).toBe("closed");
    expect(r!.closeMs).toBeLessThan(CLOSE_LIMIT_MS);
  }, 120_000);

  it("sends 200,000 small permission requests with no hook, at the default bounds: each queued answer is charged what holding and making it costs, so the hold comes before the gateway's memory grows by 64 MB", async () => {
    const run = await runGateway("perm-small", {
      command: hostileAgent("perm-small", {
        onMessage: floodOnPrompt(
          200_000,
          "session/request_permission",
          `{ sessionId, toolCall: { toolCallId: "t" + i }, options: [{ optionId: "a", name: "Allow", kind: "allow_once" }] }`,
        ),
      }),
      prompt: "go",
      until: { held: true },
      deadlineMs: 60_000,
    });
    console.log(`small permission flood, default bounds: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.conditionMet).toBe(true);
    expect(r!.stdoutHeld).toBe(true);
    // about 100 bytes an answer: charged by their bytes alone, 160,000 of them fit under 16 MiB
    expect(r!.intake!.queuedAnswerBytes / (QUEUED_WRITE_OVERHEAD + 100)).toBeLessThan(10_000);
    expect(r!.rssGrowthMb).toBeLessThan(64);
    expect(r!.closeOutcome).toBe("closed");
  }, 180_000);

  it("sends 100,000 permission requests with no hook: each is answered at once; past the answer bound the agent is held", async () => {
    const run = await runGateway("perm-none", {
      command: hostileAgent("perm-none", {
        onMessage: floodOnPrompt(
          100_000,
          "session/request_permission",
          `{ sessionId, toolCall: { toolCallId: "t" + i }, options: [{ optionId: "a", name: "Allow", kind: "allow_once" }] }`,
        ),
      }),
      // 100,000 answers "cancelled" are 7 MB: a bound below that shows the hold
      options: { intakeLimits: { maxQueuedAnswerBytes: 4 * MiB } },
      prompt: "go",
      until: { held: true },
      deadlineMs: 30_000,
    });
    console.log(`permission flood, no hook: ${describeRun(run)}`);
    const r = run.result;
    expect(r, describeRun(run)).toBeDefined();
    expect(r!.heapGrowthMb).toBeLessThan(HEAP_GROWTH_LIMIT_MB);
    expect(r!.floodLoopMs).toBeLessThan(LOOP_LIMIT_MS);
    expect(r!.conditionMet).toBe(true);
    expect(r!.stdoutHeld).toBe(true);
    expect(r!.intake!.requestsInFlight).toBe(0);
    expect(r!.intake!.refused).toEqual({});
    // the bound, plus the answers to what was read before the hold took effect: one 64 KiB pipe chunk of requests of over 100 bytes
    const oneChunkOfAnswers = ((64 * 1024) / 100) * (QUEUED_WRITE_OVERHEAD + 100);
    expect(r!.intake!.queuedAnswerBytes).toBeLessThanOrEqual(4 * MiB + oneChunkOfAnswers);
    expect(r!.closeOutcome).toBe("closed");
    expect(r!.closeMs).toBeLessThan(CLOSE_LIMIT_MS);
  }, 180_000);
});
