/**
 * Operator commands on state dirs that hold nothing: they answer, name the
 * backend, and create nothing (a typo in --state-dir must never mint a
 * second gateway identity or a lease store).
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/dispatch.js";

const root = mkdtempSync(join(tmpdir(), "proclease-opcli-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await main(args, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe("leases, explain, reap and status on an empty state dir", () => {
  // explain names something that is not there: "not found" exits 1, like an unknown pid in inspect
  for (const [args, code] of [
    [["leases"], 0],
    [["status"], 0],
    [["explain", "12345"], 1],
    [["reap"], 0],
    [["reap", "--dry-run"], 0],
  ] as const) {
    it(`${args.join(" ")}: names the backend, exits ${code}, and writes nothing`, async () => {
      const dir = join(root, `typo-${args.join("-")}`);
      const r = await cli([...args, "--state-dir", dir]);
      expect(r.code, r.err).toBe(code);
      expect(r.out).toMatch(/^backend: \w+ \(identity: \w+\)/);
      expect(readdirSync(root)).not.toContain(`typo-${args.join("-")}`);
    });
  }

  it("reap --grace-ms with a non-number is a usage error (exit 2), before anything runs", async () => {
    const r = await cli(["reap", "--grace-ms", "soon", "--state-dir", join(root, "x")]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--grace-ms/);
    expect(readdirSync(root)).not.toContain("x");
  });
});
