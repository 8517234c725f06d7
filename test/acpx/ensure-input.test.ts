/**
 * ensureSession's input is parsed once, at the edge (src/acpx/sessions/ensure-input.ts):
 * the first wrong field is named with its TypeError, and what passes is a
 * frozen copy the caller can no longer change under the spawn.
 */
import { describe, expect, it } from "vitest";
import { parseEnsureInput, parseRawAdapterInput, withResumeSessionId } from "../../src/acpx/sessions/ensure-input.js";
import { CwdUnusableError } from "../../src/ownership/index.js";

const ok = { sessionKey: "k", agentId: "a", command: ["node", "agent.mjs"] };

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("did not throw");
}

describe("parseEnsureInput", () => {
  it("names the first wrong field, in the order the fields are read", () => {
    const rejected: [unknown, string][] = [
      [null, "input must be an object"],
      [
        { ...ok, sessionKey: "a\rb", agentId: "" },
        "input.sessionKey must not contain control characters (C0, DEL or C1); found U+000D at index 1",
      ],
      [{ ...ok, agentId: "", command: [] }, "input.agentId must be a non-empty string"],
      [{ ...ok, command: ["node", 1] }, "input.command[1] must be a string"],
      [{ ...ok, env: { A: 1 }, envRemove: "A" }, "input.env.A must be a string"],
      [
        { ...ok, envRemove: ["OPENCLAW_ACPX_LEASE_ID"] },
        "input.envRemove[0]: OPENCLAW_ACPX_LEASE_ID cannot be removed: OPENCLAW_ACPX_LEASE_ID and OPENCLAW_GATEWAY_INSTANCE_ID are the lease markers the wrapper and the adapter must carry",
      ],
      [{ ...ok, auth: { methodId: "" }, limits: { pidsMax: 0 } }, "input.auth.methodId must be a non-empty string"],
      [
        { ...ok, limits: { pidsMax: 0 }, resume: "no" },
        'input.limits.pidsMax must be a positive integer or "max", got 0',
      ],
      [{ ...ok, resume: "no", mcpServers: {} }, "input.resume must be a boolean"],
      [{ ...ok, mcpServers: [{ name: "m" }, {}] }, "input.mcpServers[1] must be an ACP MCP server config with a name"],
    ];
    for (const [input, message] of rejected) {
      const err = thrown(() => parseEnsureInput(input));
      expect(err).toBeInstanceOf(TypeError);
      expect(err.message).toBe(message);
    }
  });

  it("checks the cwd on disk last among the spawn's fields, before the reuse fields", () => {
    expect(() => parseEnsureInput({ ...ok, cwd: "/nonexistent/proclease", resume: "no" })).toThrow(CwdUnusableError);
  });

  it("returns a frozen copy: the caller's later changes do not reach the spawn", () => {
    const command = ["node", "agent.mjs"];
    const env = { A: "1" };
    const envRemove = ["SECRET"];
    const p = parseEnsureInput({
      ...ok,
      command,
      env,
      envRemove,
      limits: { memoryMax: "max", pidsMax: 64 },
      resume: false,
    });
    command.push("--evil");
    env.A = "2";
    envRemove.length = 0;
    expect(p.command).toEqual(["node", "agent.mjs"]);
    expect(p.env).toEqual({ A: "1" });
    expect(p.envRemove).toEqual(["SECRET"]);
    // "max" asks for nothing, so only the positive limit is carried
    expect(p.limits).toEqual({ pidsMax: 64 });
    expect(p.resume).toBe(false);
    for (const v of [p, p.command, p.env, p.envRemove, p.limits]) expect(Object.isFrozen(v)).toBe(true);
    const resumed = withResumeSessionId(p, "agent-session-1");
    expect(resumed.resumeSessionId).toBe("agent-session-1");
    expect(Object.isFrozen(resumed)).toBe(true);
  });
});

describe("parseRawAdapterInput", () => {
  it("checks the spawn's fields only: a raw adapter's plugin speaks ACP, so resume and MCP servers are not read", () => {
    expect(() => parseRawAdapterInput({ ...ok, sessionKey: "" })).toThrow(
      new TypeError("input.sessionKey must be a non-empty string"),
    );
    const p = parseRawAdapterInput({ ...ok, resume: "no", mcpServers: 1 });
    expect(p).not.toHaveProperty("resume");
    expect(p).not.toHaveProperty("mcpServers");
  });
});
