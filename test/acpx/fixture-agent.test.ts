/**
 * The fixture agent is reachable from the package: the "proclease/fixture-agent"
 * export and fixtureAgentPath() name the same file, and an adapter started
 * from it speaks ACP (its conversation knobs are tested in conversation.test.ts).
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { fixtureAgentPath } from "../../src/acpx/launch/fixture-agent.js";
import { AGENT } from "./controller-helpers.js";

describe("fixture agent export", () => {
  it("resolves through the package's exports and fixtureAgentPath()", () => {
    const viaExports = createRequire(import.meta.url).resolve("proclease/fixture-agent");
    expect(viaExports).toBe(AGENT);
    expect(fixtureAgentPath()).toBe(AGENT);
    expect(existsSync(fixtureAgentPath())).toBe(true);
  });
});
