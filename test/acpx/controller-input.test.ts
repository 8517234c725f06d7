/**
 * Input the controller refuses before it acts: a session key with control
 * characters (nothing is written or spawned), and a prompt whose
 * session/prompt message would exceed the ACP transport's limit (nothing is
 * sent; the session answers the next prompt). Real sessions (the bundled
 * wrapper around the fixture agent). Build first (`npm run build`).
 */
import { describe, expect, it } from "vitest";
import { ACP_MAX_MESSAGE_BYTES, promptOverLimit } from "../../src/acpx/connection/acp-client.js";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxPromptTooLargeError } from "../../src/acpx/index.js";
import { classify } from "../../src/openclaw/errors.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { agentArgv, disposeAfterEach, GRACE_MS, say, tempStateDir, trackLease } from "./controller-helpers.js";

const controllers = disposeAfterEach();

async function newController(label: string): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({
    stateDir: tempStateDir(label),
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
  });
  controllers.push(ctl);
  return ctl;
}

describe("ensureSession refuses a session key with control characters", () => {
  const hostile: [string, string, string][] = [
    ["ESC (a colour sequence)", "agent:\x1b[31mred", "U+001B at index 6"],
    ["CR (overwrites a terminal line)", "agent:a\rb", "U+000D at index 7"],
    ["LF", "agent\n", "U+000A at index 5"],
    ["NUL", "a\0", "U+0000 at index 1"],
    ["DEL", "a\x7f", "U+007F at index 1"],
    ["C1 CSI", "a\u009b31m", "U+009B at index 1"],
    ["C1 NEL", "\u0085", "U+0085 at index 0"],
  ];
  it.each(hostile)(
    "%s: a TypeError naming the character; no lease written, nothing spawned",
    async (_what, sessionKey, where) => {
      const ctl = await newController("key-control");
      const err = await ctl.ensureSession({ sessionKey, agentId: "main", command: agentArgv({}) }).then(
        (h) => {
          trackLease(h.leaseId);
          return h;
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TypeError);
      expect((err as Error).message).toBe(
        `input.sessionKey must not contain control characters (C0, DEL or C1); found ${where}`,
      );
      expect(await ctl.listLeases()).toEqual([]);
    },
  );

  it("spawnRawAdapter refuses the same keys (one validation for both)", async () => {
    const ctl = await newController("key-control-raw");
    await expect(
      ctl.spawnRawAdapter({ sessionKey: "raw\x1b]0;title\x07", agentId: "main", command: agentArgv({}) }),
    ).rejects.toThrow(/input\.sessionKey must not contain control characters.*U\+001B at index 3/);
    expect(await ctl.listLeases()).toEqual([]);
  });

  it("an owner key that is not a string is refused at the edge: no lease written, nothing spawned (ensure and raw alike)", async () => {
    const ctl = await newController("owner-keys");
    for (const [field, value] of [
      ["spawnedBy", 42],
      ["parentSessionKey", ""],
      ["ownerSessionKey", {}],
    ] as const) {
      const input = { sessionKey: `k-${field}`, agentId: "main", command: agentArgv({}), [field]: value };
      const message = new RegExp(`^${field} must be a non-empty string when given, got `);
      await expect(ctl.ensureSession(input as never)).rejects.toThrow(message);
      await expect(ctl.spawnRawAdapter(input as never)).rejects.toThrow(message);
      await expect(ctl.ensureSession(input as never)).rejects.toBeInstanceOf(TypeError);
    }
    expect(await ctl.listLeases()).toEqual([]);
  });

  it("printable non-ASCII is a key like any other (it is the CLI's to escape what a terminal would misread)", async () => {
    const ctl = await newController("key-unicode");
    const sessionKey = "agent:mañana:🙂:\u202eevil";
    const h = await ctl.ensureSession({ sessionKey, agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    expect(h.sessionKey).toBe(sessionKey);
    expect((await ctl.listLeases())[0]?.sessionKey).toBe(sessionKey);
  });
});

describe("a prompt over the ACP transport's limit", () => {
  it("is refused before sending, naming the limit and the size; the same session answers the next prompt", async () => {
    const ctl = await newController("oversize");
    const h = await ctl.ensureSession({ sessionKey: "k-big", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    const big = "x".repeat(33 * 1024 * 1024);

    const err = await ctl.prompt(h, big).then(
      () => undefined,
      (e: unknown) => e,
    );
    // the SDK's DEFAULT_MAX_MESSAGE_BYTES: an adapter on the SDK closes the connection past it
    expect(err).toMatchObject({
      name: "AcpxPromptTooLargeError",
      code: "prompt-too-large",
      sessionKey: "k-big",
      limitBytes: 32 * 1024 * 1024,
    });
    expect(err).toBeInstanceOf(AcpxPromptTooLargeError);
    const e = err as AcpxPromptTooLargeError;
    expect(e.sizeBytes).toBeGreaterThan(big.length);
    expect(e.message).toContain(`${e.sizeBytes} bytes`);
    expect(e.message).toContain(`limit of ${32 * 1024 * 1024} bytes`);
    // OpenClaw's boundary names it too, as a bad input that no retry fixes
    expect(classify(e, "turn", "proclease")).toMatchObject({
      code: "ACP_INVALID_RUNTIME_OPTION",
      detailCode: "PROMPT_TOO_LARGE",
      retryable: false,
    });
    expect(await say(ctl, h, "/echo")).toBe("block text");

    // a streamed turn: the result and the events both end with the same error; content blocks are measured too
    const turn = ctl.startTurn(h, [
      { type: "text", text: "y" },
      { type: "text", text: big },
    ]);
    await expect(turn.result).rejects.toBeInstanceOf(AcpxPromptTooLargeError);
    await expect(
      (async () => {
        for await (const _u of turn.events) void _u;
      })(),
    ).rejects.toBeInstanceOf(AcpxPromptTooLargeError);
    expect(await ctl.prompt(h, "hello")).toEqual({ stopReason: "end_turn" });
    expect((await ctl.sessionStatus(h)).leaseState).toBe("open");
  });

  it("the measure is the encoded line's: escapes and multi-byte text count, and so does anything beside a block's text", () => {
    const MiB = 1024 * 1024;
    // 6 MiB of U+0001: short as a string, 36 MiB as JSON (each one is written \u0001)
    expect(promptOverLimit("s", "\u0001".repeat(6 * MiB))).toBeGreaterThan(36 * MiB);
    // 11 MiB of "€": 33 MiB of UTF-8
    expect(promptOverLimit("s", "€".repeat(11 * MiB))).toBeGreaterThan(33 * MiB);
    expect(promptOverLimit("s", [{ type: "text", text: "a", _meta: { big: "x".repeat(33 * MiB) } }])).toBeGreaterThan(
      33 * MiB,
    );
    expect(
      promptOverLimit("s", [{ type: "image", mimeType: "image/png", data: "A".repeat(33 * MiB) }]),
    ).toBeGreaterThan(33 * MiB);
    expect(promptOverLimit("s", "€".repeat(10 * MiB))).toBeUndefined();
    expect(promptOverLimit("s", "x".repeat(MiB))).toBeUndefined();
  });

  it("a prompt just under the limit is sent and answered (the measure is the message's, not a round figure)", async () => {
    const ctl = await newController("undersize");
    const h = await ctl.ensureSession({ sessionKey: "k-fits", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    // the envelope around the text is well under 1 KiB
    expect(await ctl.prompt(h, "z".repeat(ACP_MAX_MESSAGE_BYTES - 1024))).toEqual({ stopReason: "end_turn" });
  });
});
