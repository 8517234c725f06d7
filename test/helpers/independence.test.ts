/**
 * The tests' oracles stay independent of the code they judge: nothing in
 * test/helpers/ (liveness, stat fields, environment markers, the cgroup
 * probe) imports the library's facts layer, so a defect there cannot move
 * the library and its judges together.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const HERE = dirname(fileURLToPath(import.meta.url));

describe("the test oracles' independence", () => {
  it("no helper in test/helpers/ (test files aside) imports src/facts or src/containment", () => {
    const helpers = readdirSync(HERE).filter(
      (f) => /\.(ts|mjs)$/.test(f) && !f.endsWith(".test.ts") && !f.endsWith(".d.mts"),
    );
    expect(helpers).toEqual(expect.arrayContaining(["liveness.ts", "cgroup-probe.mjs"]));
    const offenders = helpers.filter((f) =>
      /from\s+["'][^"']*src\/(facts|containment)\//.test(readFileSync(join(HERE, f), "utf8")),
    );
    expect(offenders).toEqual([]);
  });
});
