/**
 * The wrapper's cleanup asks the one liveness rule (facts/liveness.ts) for
 * what its final sweeps still end: a process whose main thread exited while
 * another thread runs on (its leader reads Z) is alive, and a SIGKILL to its
 * pid reaches the live thread. Run in a child process that plays the wrapper
 * (test/fixtures/acpx/cleanup-sweep.mjs), on the built dist.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildCHelper, removeCHelpers } from "../fixtures/facts/procs.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const CLEANUP = join(root, "dist/acpx/wrapper/cleanup.js");
const zombieLeader = buildCHelper("zombie-leader");
const SKIP = zombieLeader.path === null ? ` (skipped: ${zombieLeader.why})` : "";
afterAll(() => removeCHelpers());

beforeAll(() => {
  if (SKIP) return;
  const newest = Math.max(
    ...["src/acpx/wrapper", "src/ownership", "src/facts"].flatMap((d) =>
      readdirSync(join(root, d))
        .filter((f) => f.endsWith(".ts"))
        .map((f) => statSync(join(root, d, f)).mtimeMs),
    ),
  );
  if (!existsSync(CLEANUP) || statSync(CLEANUP).mtimeMs < newest) {
    const r = spawnSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
    if (!existsSync(CLEANUP)) throw new Error(`build failed (tsc exit ${r.status}); ${CLEANUP} missing`);
  }
}, 120_000);

describe("the wrapper's final sweeps", () => {
  it.skipIf(SKIP)(
    `end a process forked during the grace whose leader is a zombie while its other thread runs${SKIP}`,
    () => {
      const r = spawnSync(
        process.execPath,
        [join(root, "test/fixtures/acpx/cleanup-sweep.mjs"), root, zombieLeader.path!],
        { encoding: "utf8", timeout: 20_000 },
      );
      const line = r.stdout.trim().split("\n").pop();
      expect(line, `stderr: ${r.stderr}`).toBeTruthy();
      const out = JSON.parse(line!) as { pid: number | null; ended: number[]; alive: boolean };
      expect(out.pid).not.toBeNull();
      expect(out.alive).toBe(false);
      expect(out.ended).toContain(out.pid);
    },
  );
});
