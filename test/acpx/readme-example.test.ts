/**
 * The README's conversation example, run as a user would run it
 * (helpers/doc-example.ts): its stdout must be exactly the ```text block
 * that follows it in the README.
 */
import { describe, expect, it } from "vitest";
import { exampleOf, runExample } from "../helpers/doc-example.js";

describe("README conversation example", () => {
  it("runs and prints what the README says it prints", async () => {
    const { code, output } = exampleOf("README.md");
    expect(await runExample("README.md", code)).toBe(output);
  }, 90_000);
});
