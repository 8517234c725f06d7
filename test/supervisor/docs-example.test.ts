/**
 * docs/supervisor.md's worked example, run as a user would run it
 * (helpers/doc-example.ts): its stdout must be exactly the ```text block
 * that follows it on the page.
 */
import { describe, expect, it } from "vitest";
import { exampleOf, runExample } from "../helpers/doc-example.js";

const PAGE = "docs/supervisor.md";

describe("docs/supervisor.md example", () => {
  it("runs and prints what the page says it prints", async () => {
    const { code, output } = exampleOf(PAGE);
    expect(await runExample(PAGE, code)).toBe(output);
  }, 90_000);
});
