/**
 * Which supervisor calls throw at the call and which reject
 * (docs/supervisor.md "Which calls throw synchronously"): a caller that
 * wraps only `await` in try/catch must know the calls that fail before a
 * promise exists.
 */
import { describe, expect, it } from "vitest";
import { createExecSessions, UnknownSessionError } from "../../src/supervisor/exec/actions.js";
import { createProcessSupervisor, SupervisorShutdownError } from "../../src/supervisor/core/supervisor.js";

const base = { sessionId: "agent-session", backendId: "exec" } as const;

describe("supervisor calls that throw synchronously", () => {
  it("createProcessSupervisor throws on a bad option", () => {
    expect(() => createProcessSupervisor({ containment: "always" as "auto" })).toThrow(TypeError);
    expect(() => createProcessSupervisor({ keeper: "yes" as "on" })).toThrow(TypeError);
    expect(() => createProcessSupervisor({ maxOutputChars: 0 })).toThrow(RangeError);
  });

  it("spawn rejects, never throws: after shutdown, and for a malformed input", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    let bad: Promise<unknown> | undefined;
    expect(() => {
      bad = sup.spawn({ ...base, mode: "child", argv: [] });
    }).not.toThrow();
    await expect(bad).rejects.toThrow(TypeError);
    await sup.shutdown();
    let refused: Promise<unknown> | undefined;
    expect(() => {
      refused = sup.spawn({ ...base, mode: "child", argv: ["true"] });
    }).not.toThrow();
    await expect(refused).rejects.toBeInstanceOf(SupervisorShutdownError);
    expect(sup.cancel("nope")).toBe(false);
    expect(sup.getRecord("nope")).toBeUndefined();
  });

  it("exec sessions: an unknown id throws at the call for log, write and clear; poll, kill and remove reject", async () => {
    const sessions = createExecSessions({ supervisor: createProcessSupervisor({ graceMs: 300 }) });
    expect(() => createExecSessions({ supervisor: createProcessSupervisor(), maxOutputChars: 0 })).toThrow(RangeError);
    expect(() => sessions.log("nope")).toThrow(UnknownSessionError);
    expect(() => sessions.write("nope", "x")).toThrow(UnknownSessionError);
    expect(() => sessions.clear("nope")).toThrow(UnknownSessionError);
    for (const call of [() => sessions.poll("nope"), () => sessions.kill("nope"), () => sessions.remove("nope")]) {
      let pending: Promise<unknown> | undefined;
      expect(() => {
        pending = call();
      }).not.toThrow();
      await expect(pending).rejects.toBeInstanceOf(UnknownSessionError);
    }
  });
});
