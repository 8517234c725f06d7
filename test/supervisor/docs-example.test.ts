/**
 * docs/supervisor.md's worked example, run as a user would run it
 * (helpers/doc-example.ts): its stdout must be exactly the ```text block
 * that follows it on the page, and it leaves nothing in its temp dir.
 */
import { describe, expect, it } from "vitest";
import { exampleOf, runExample } from "../helpers/doc-example.js";

const PAGE = "docs/supervisor.md";

describe("docs/supervisor.md example", () => {
  it("runs and prints what the page says it prints", async () => {
    const { code, output } = exampleOf(PAGE);
    const ran = await runExample(PAGE, code);
    expect(ran.stdout).toBe(output);
    expect(ran.leftInTmp).toEqual([]);
  }, 90_000);
});
