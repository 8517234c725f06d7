/**
 * Output caps cut on code-point boundaries (a kept tail never starts with the
 * low half of a surrogate pair), for run capture and exec session logs; a
 * spawn may set its own cap.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createExecSessions } from "../../src/supervisor/exec/actions.js";
import { CappedOutput, capTail, truncationMarker } from "../../src/supervisor/shared/output.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import { waitFor } from "./helpers.js";

const base = { sessionId: "s", backendId: "t", mode: "child" } as const;
/** the marker's own text is ASCII: strip it to see the kept tail */
/** no lone surrogate (String.prototype.isWellFormed, which this lib target does not type) */
const wellFormed = (s: string) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
const tailOf = (s: string) => s.replace(/^\[proclease: output truncated, \d+ earlier characters dropped\]\n/, "");

describe("code-point-safe caps", () => {
  it("property: the kept tail is well-formed, at most the cap, and the longest such suffix", () => {
    const text = fc
      .array(fc.oneof(fc.constantFrom("a", "é", "€", "😀", "🐚", "\n"), fc.string()), { maxLength: 40 })
      .map((a) => a.join(""));
    fc.assert(
      fc.property(
        text,
        fc.integer({ min: 1, max: 30 }),
        fc.array(fc.nat({ max: 12 }), { maxLength: 6 }),
        (t, cap, cuts) => {
          const inputWellFormed = wellFormed(t);
          const tail = capTail(t, cap);
          expect(tail.length).toBeLessThanOrEqual(cap);
          expect(t.endsWith(tail)).toBe(true);
          if (inputWellFormed) expect(wellFormed(tail)).toBe(true);
          // longest: one more unit would either exceed the cap or start on a low surrogate
          if (tail.length < Math.min(cap, t.length)) expect(tail.length).toBe(cap - 1);
          // the streaming buffer keeps the same tail, whatever the chunking
          const out = new CappedOutput(cap);
          let at = 0;
          for (const c of cuts) {
            // chunks split only on code points, as a UTF-8 decoder delivers them
            let next = Math.min(t.length, at + c);
            if (next < t.length && next > 0 && /[\udc00-\udfff]/.test(t[next]!) && /[\ud800-\udbff]/.test(t[next - 1]!))
              next++;
            out.append(t.slice(at, next));
            at = next;
          }
          out.append(t.slice(at));
          const kept = tailOf(out.toString());
          expect(kept).toBe(tail);
          if (t.length > cap) expect(out.toString().startsWith(truncationMarker(t.length - tail.length))).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a real run printing emoji with maxOutputChars 4 keeps whole characters only (per spawn, over the supervisor's default)", async () => {
    const sup = createProcessSupervisor({ maxOutputChars: 1000 });
    // "😀😀a": 5 UTF-16 units; a naive 4-unit tail would begin with a lone \ude00
    const run = await sup.spawn({ ...base, argv: ["printf", "😀😀a"], maxOutputChars: 4 });
    const exit = await run.wait();
    expect(tailOf(exit.stdout)).toBe("😀a");
    expect(wellFormed(exit.stdout)).toBe(true);
    expect(exit.stdout).toMatch(/2 earlier characters dropped/);
    // the supervisor-wide cap applies where the spawn sets none
    const wide = await sup.spawn({ ...base, argv: ["printf", "😀😀a"] });
    expect((await wide.wait()).stdout).toBe("😀😀a");
    await expect(sup.spawn({ ...base, argv: ["true"], maxOutputChars: 0 })).rejects.toThrow(/maxOutputChars/);
    await expect(sup.spawn({ ...base, argv: ["true"], maxOutputChars: 2.5 })).rejects.toThrow(RangeError);
  });

  it("exec session logs and polls cut on code points too", async () => {
    const supervisor = createProcessSupervisor();
    const sessions = createExecSessions({ supervisor, maxOutputChars: 5 });
    const info = await sessions.start({ ...base, argv: ["printf", "x🐚🐚🐚"] });
    await waitFor(() => sessions.list().find((s) => s.id === info.id)?.status === "exited");
    const polled = await sessions.poll(info.id);
    expect(polled.output).toBe("🐚🐚");
    const log = sessions.log(info.id).lines.join("\n");
    expect(wellFormed(log)).toBe(true);
    expect(log.endsWith("🐚🐚")).toBe(true);
    expect(() => createExecSessions({ supervisor, maxOutputChars: -1 })).toThrow(/maxOutputChars/);
  });
});
