/**
 * The README's conversation example, run as a user would run it
 * (helpers/doc-example.ts): its stdout must be exactly the ```text block
 * that follows it in the README, and it leaves nothing in its temp dir (its
 * state dir included).
 */
import { describe, expect, it } from "vitest";
import { exampleOf, runExample } from "../helpers/doc-example.js";

describe("README conversation example", () => {
  it("runs and prints what the README says it prints", async () => {
    const { code, output } = exampleOf("README.md");
    const ran = await runExample("README.md", code);
    expect(ran.stdout).toBe(output);
    expect(ran.leftInTmp).toEqual([]);
  }, 90_000);
});
