/**
 * A malformed `command` is refused with a message that names what was given:
 * a string (the usual mistake: a shell command line) is told it must be an
 * argv array, not that the command was empty. The unsupported-content message
 * reads as English whatever the block type, and a second controller on a
 * state dir this process holds is told so.
 */
import { describe, expect, it } from "vitest";
import { parseEnsureInput } from "../../src/acpx/sessions/ensure-input.js";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxUnsupportedContentError } from "../../src/acpx/report/errors.js";
import { StateDirLockedError } from "../../src/ownership/index.js";
import { disposeAfterEach, tempStateDir } from "./controller-helpers.js";
import { validateRuntimeOptions } from "../../src/openclaw/options.js";
import { validateSpawnInput } from "../../src/supervisor/run/input.js";

const ok = { sessionKey: "k", agentId: "a" };

describe("parseEnsureInput: command", () => {
  it("names a string, another type and an empty array, each as what it is", () => {
    expect(() => parseEnsureInput({ ...ok, command: "npx @agentclientprotocol/codex-acp" })).toThrow(
      new TypeError(
        'input.command must be an argv array, got a string: give the program and each argument as its own entry (["npx", "@agentclientprotocol/codex-acp"]); a command is never run through a shell',
      ),
    );
    expect(() => parseEnsureInput({ ...ok, command: { 0: "node" } })).toThrow(
      new TypeError("input.command must be an argv array (the adapter's program and its arguments), got object"),
    );
    expect(() => parseEnsureInput({ ...ok, command: null })).toThrow(/got null$/);
    expect(() => parseEnsureInput({ ...ok })).toThrow(/got undefined$/);
    expect(() => parseEnsureInput({ ...ok, command: [] })).toThrow(
      new TypeError("input.command must be a non-empty argv array, got an empty array"),
    );
  });
});

describe("the other argv intakes say the same of a string", () => {
  it("an OpenClaw agent's command and a supervisor run's argv", () => {
    expect(() =>
      validateRuntimeOptions({ stateDir: "/nonexistent", agents: { codex: { command: "npx codex-acp" as never } } }),
    ).toThrow(/^options\.agents\.codex\.command must be an argv array, got a string: /);
    expect(() =>
      validateSpawnInput({ mode: "child", argv: "sleep 1" as never, sessionId: "s", backendId: "exec" }),
    ).toThrow(/^argv must be an argv array, got a string: /);
  });
});

describe("AcpxUnsupportedContentError's message", () => {
  it("reads as English for every block type (no 'a audio')", () => {
    for (const [type, cap] of [
      ["audio", "promptCapabilities.audio"],
      ["image", "promptCapabilities.image"],
      ["resource", "promptCapabilities.embeddedContext"],
    ] as const) {
      const e = new AcpxUnsupportedContentError("k", type, cap);
      expect(e.message).toBe(
        `ACP session "k": the agent did not advertise ${cap}, so a content block of type "${type}" cannot be sent; nothing was sent`,
      );
    }
  });
});

describe("a state dir already held by this process", () => {
  const controllers = disposeAfterEach();
  it("says the holder is this same process and what to do, not 'another gateway'", async () => {
    const stateDir = tempStateDir("lock-here");
    controllers.push(await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 }));
    const err = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StateDirLockedError);
    expect(err).toMatchObject({ holderPid: process.pid });
    expect((err as Error).message).toBe(
      `state dir ${stateDir} is held by this same process (pid ${process.pid}): another controller in this process opened it and has not been disposed. Call dispose() or shutdown() on that one first, or give this one its own state dir`,
    );
    expect((err as Error).message).not.toContain("another gateway");
  });
});
