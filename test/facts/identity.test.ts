import { describe, expect, it } from "vitest";
import { compareIdentity, identityOf, isKnownStartTime, sameProcess } from "../../src/facts/identity.js";

describe("process identity is one value: pid and start time together", () => {
  it("same pid and start time is the same process, whatever type carried the start", () => {
    expect(sameProcess({ pid: 42, startTime: "1234" }, { pid: 42, startTime: "1234" })).toBe(true);
    expect(sameProcess({ pid: 42, startTime: 1234 }, { pid: 42, startTime: 1234n })).toBe(true);
    expect(identityOf({ pid: 7, startTime: 99n })).toEqual({ pid: 7, startTime: "99" });
  });

  it("a reused pid (another start time) or another pid is another process", () => {
    expect(sameProcess({ pid: 42, startTime: "1234" }, { pid: 42, startTime: "1235" })).toBe(false);
    expect(sameProcess({ pid: 42, startTime: "1234" }, { pid: 43, startTime: "1234" })).toBe(false);
  });

  it("an unknown start time or a bad pid is never the same process (fail closed)", () => {
    expect(sameProcess({ pid: 42, startTime: undefined }, { pid: 42, startTime: undefined })).toBe(false);
    expect(sameProcess({ pid: 42, startTime: "" }, { pid: 42, startTime: "" })).toBe(false);
    expect(sameProcess({ pid: 42, startTime: null }, { pid: 42, startTime: "1" })).toBe(false);
    expect(sameProcess({ pid: 0, startTime: "1" }, { pid: 0, startTime: "1" })).toBe(false);
    expect(sameProcess({ pid: Number.NaN, startTime: "1" }, { pid: Number.NaN, startTime: "1" })).toBe(false);
    expect(sameProcess({ pid: -1, startTime: "1" }, { pid: -1, startTime: "1" })).toBe(false);
    expect(sameProcess(null, { pid: 42, startTime: "1" })).toBe(false);
    expect(sameProcess({ pid: 42, startTime: "1" }, undefined)).toBe(false);
  });

  it('compareIdentity answers three ways, so no caller rebuilds "unknown" from a boolean', () => {
    expect(compareIdentity({ pid: 42, startTime: "1234" }, { pid: 42, startTime: 1234n })).toBe("same");
    expect(compareIdentity({ pid: 42, startTime: "1234" }, { pid: 42, startTime: "1235" })).toBe("different");
    expect(compareIdentity({ pid: 42, startTime: "1234" }, { pid: 43, startTime: undefined })).toBe("different");
    // a pid that matches with an unreadable start time proves nothing either way
    expect(compareIdentity({ pid: 42, startTime: "1234" }, { pid: 42, startTime: "" })).toBe("unknown");
    expect(compareIdentity({ pid: 42, startTime: "Tue Dec  1" }, { pid: 42, startTime: "Tue Dec  1" })).toBe("unknown");
    expect(compareIdentity({ pid: 0, startTime: "1" }, { pid: 0, startTime: "1" })).toBe("unknown");
    expect(compareIdentity(null, { pid: 42, startTime: "1" })).toBe("unknown");
  });

  it("a known start time is a decimal string (what every backend writes), nothing else", () => {
    expect([isKnownStartTime("0"), isKnownStartTime("123456789012345678901"), isKnownStartTime(7n)]).toEqual([
      true,
      true,
      true,
    ]);
    expect([
      isKnownStartTime(""),
      isKnownStartTime(undefined),
      isKnownStartTime(null),
      isKnownStartTime("12a"),
      isKnownStartTime("-1"),
    ]).toEqual([false, false, false, false, false]);
  });
});
