/**
 * The CLI's shared formatting rules (src/cli/shared/io.ts): every command's tables,
 * ages and counts read the same, and a multi-line cell (an OS error, a
 * stderr tail in a doctor row) never breaks a table's alignment.
 */
import { describe, expect, it } from "vitest";
import { formatAge, painter, plural, table, visibleLength } from "../../src/cli/shared/io.js";

describe("table", () => {
  it("continues a multi-line cell in its own column; the rows after it stay aligned", () => {
    const out = table([
      ["subreaper", "no", "check could not run: error: line one\nline two"],
      ["foreign-env", "yes", "readable"],
    ]);
    expect(out).toBe(
      "subreaper    no   check could not run: error: line one\n" +
        "                  line two\n" +
        "foreign-env  yes  readable\n",
    );
  });

  it("pads by visible width, so coloured cells align with plain ones", () => {
    const paint = painter({ out: () => {}, err: () => {}, color: true });
    const out = table([
      [paint("green", "match"), "a"],
      ["unknown", "b"],
    ]).split("\n");
    expect(visibleLength(out[0]!)).toBe(visibleLength(out[1]!));
    expect(out[0]).toContain("\x1b[32mmatch\x1b[0m");
    expect(table([["x", "y"]])).toBe("x  y\n");
    expect(painter({ out: () => {}, err: () => {} })("red", "plain")).toBe("plain");
  });
});

describe("ages and counts", () => {
  it("formatAge: seconds, then minutes, hours and days, never negative; unknown is '-'", () => {
    expect([0, 42_000, 307_000, 7_980_000, 273_600_000, -5000].map(formatAge)).toEqual([
      "0s",
      "42s",
      "5m07s",
      "2h13m",
      "3d04h",
      "0s",
    ]);
    expect(formatAge(null)).toBe("-");
    expect(formatAge(Number.NaN)).toBe("-");
  });

  it("plural: 1 snapshot, 0 snapshots, 2 processes", () => {
    expect([plural(1, "snapshot"), plural(0, "snapshot"), plural(2, "process"), plural(1, "lease")]).toEqual([
      "1 snapshot",
      "0 snapshots",
      "2 processes",
      "1 lease",
    ]);
  });
});
