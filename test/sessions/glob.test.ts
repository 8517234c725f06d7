import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compileStarGlob, isAgentAllowed, matchStarGlob } from "../../src/sessions/index.js";

// Reference built from OUR generated patterns only (never user input), escaped.
function referenceRegex(pattern: string): RegExp {
  const body = pattern
    .split("*")
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("[\\s\\S]*");
  return new RegExp(`^${body}$`);
}

describe("matchStarGlob", () => {
  const table: Array<[pattern: string, text: string, expected: boolean]> = [
    ["", "", true],
    ["", "a", false],
    ["*", "", true],
    ["*", "anything:at all", true],
    ["**", "", true],
    ["***", "abc", true],
    ["a", "a", true],
    ["a", "A", false], // case-sensitive
    ["a", "ab", false],
    ["a*", "a", true],
    ["a*", "abc", true],
    ["a*", "ba", false],
    ["a*", "", false],
    ["*a", "a", true],
    ["*a", "bca", true],
    ["*a", "ab", false],
    ["a*a", "a", false], // prefix and suffix may not overlap
    ["a*a", "aa", true],
    ["a*b*c", "abc", true],
    ["a*b*c", "axxbyyc", true],
    ["a*b*c", "acb", false],
    ["a*b*c", "abcb", false],
    ["a**b", "ab", true],
    ["a***", "a", true],
    ["***a", "ba", true],
    ["***a", "ab", false],
    ["a**b**c", "abc", true],
    ["a**b**c", "ac", false],
    ["*a*", "", false],
    ["a**b", "axb", true],
    ["*b*", "abc", true],
    ["*b*", "ac", false],
    ["*ab*ab*", "abab", true],
    ["*ab*ab*", "aba", false],
    ["*aab*", "aaab", true], // needs the KMP failure link, not a naive restart
    ["*abcabd*", "abcabcabd", true],
    ["code?", "codex", false], // ? is literal
    ["code?", "code?", true],
    ["[ab]", "a", false],
    ["a.c", "abc", false],
  ];
  it.each(table)("%j vs %j → %s", (pattern, text, expected) => {
    expect(matchStarGlob(pattern, text)).toBe(expected);
    expect(compileStarGlob(pattern)(text)).toBe(expected);
  });

  it("agrees with an escaped-regex reference on random patterns over a small alphabet", () => {
    const ch = fc.constantFrom("a", "b", "*");
    fc.assert(
      fc.property(fc.array(ch, { maxLength: 10 }), fc.array(fc.constantFrom("a", "b"), { maxLength: 14 }), (p, t) => {
        const pattern = p.join("");
        const text = t.join("");
        expect(matchStarGlob(pattern, text)).toBe(referenceRegex(pattern).test(text));
      }),
      { numRuns: 3000 },
    );
  });

  it("adversarial *a*a*…*b against a long aaaa… answers false without blowing up (timing lives in bench/glob.bench.mjs)", () => {
    const pattern = `${"*a".repeat(500)}*b`;
    const text = "a".repeat(50_000);
    expect(matchStarGlob(pattern, text)).toBe(false);
    expect(matchStarGlob(`${"*a".repeat(500)}*b*`, text)).toBe(false);
    expect(matchStarGlob(`${"*a".repeat(500)}*`, text)).toBe(true);
  });

  it("rejects a non-string pattern with a TypeError naming it; a non-string text never matches", () => {
    expect(() => compileStarGlob(42 as unknown as string)).toThrow(/pattern/);
    expect(compileStarGlob("*")(undefined as unknown as string)).toBe(false);
  });
});

describe("isAgentAllowed", () => {
  it("empty or absent allow list admits every agent", () => {
    expect(isAgentAllowed({ enabled: true }, "anyone")).toBe(true);
    expect(isAgentAllowed({ enabled: true, allow: [] }, "anyone")).toBe(true);
  });
  it("matches any pattern in the list", () => {
    const policy = { enabled: true, allow: ["main", "code*", "*-bot"] };
    expect(isAgentAllowed(policy, "main")).toBe(true);
    expect(isAgentAllowed(policy, "codex")).toBe(true);
    expect(isAgentAllowed(policy, "ops-bot")).toBe(true);
    expect(isAgentAllowed(policy, "research")).toBe(false);
    expect(isAgentAllowed(policy, "mainx")).toBe(false);
  });
});
