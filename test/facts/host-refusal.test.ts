/**
 * A read the host refuses is not a gone process. With every file descriptor
 * used up (EMFILE, a real limit set by prlimit), /proc cannot be opened: a
 * backend that answered "null" there would tell the reaper a live process is
 * gone. Each backend must fail instead, naming the cause.
 */
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { loadError, loadNative } from "../../src/facts/native.js";

const DIST = fileURLToPath(new URL("../../dist/facts", import.meta.url));
const SCRIPT = fileURLToPath(new URL("../fixtures/facts/no-descriptors.mjs", import.meta.url));
const prlimit = spawnSync("prlimit", ["--version"], { encoding: "utf8" });
const skip =
  process.platform !== "linux"
    ? `needs Linux, this is ${process.platform}`
    : loadNative() === null
      ? `native addon not loaded: ${loadError()}`
      : prlimit.status !== 0
        ? "prlimit (util-linux) is not installed"
        : null;
if (skip !== null) console.log(`[host-refusal] skipped: ${skip}`);

const target = spawn("sleep", ["60"], { stdio: "ignore" });
afterAll(() => {
  target.kill("SIGKILL");
});

describe("a read the host refuses (EMFILE) is not a gone process", () => {
  it.skipIf(skip !== null)(
    `native and procfs fail naming the cause; none answers null${skip ? ` (skipped: ${skip})` : ""}`,
    () => {
      const run = spawnSync("prlimit", ["--nofile=64", process.execPath, SCRIPT, DIST, String(target.pid)], {
        encoding: "utf8",
        timeout: 30_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const out = JSON.parse(run.stdout) as Record<string, unknown> & { exhausted: string };
      expect(out.exhausted).toBe("EMFILE"); // the premise: the limit was reached
      const native = out.native as Record<string, { value?: unknown; error?: string; code?: string; message?: string }>;
      for (const call of ["inspect", "inspectMany"]) {
        expect(native[call], `native ${call}`).toMatchObject({ error: "FactsReadError", code: "EMFILE" });
        expect(native[call]!.message).toMatch(/RLIMIT_NOFILE/);
      }
      expect(native.snapshot!.error, "native snapshot").toBe("Error");
      expect(native.snapshot!.message).toMatch(/cannot list processes/);
      const procfs = out.procfs as Record<string, { value?: unknown; error?: string; code?: string }>;
      for (const call of ["inspect", "inspectMany", "snapshot"]) {
        expect(procfs[call]!.value, `procfs ${call} must not answer`).toBeUndefined();
        expect(procfs[call]!.code, `procfs ${call}`).toBe("EMFILE");
      }
    },
  );
});
