/**
 * EMFILE, for real: a gateway started under `prlimit --nofile=128` asked for
 * 40 sessions. Every spawn error is handled (a ChildProcess emits "error"
 * more than once on this path), so the gateway lives; each failed ensure
 * names the resource and the limit (RLIMIT_NOFILE) and settles its lease;
 * nothing is left running; once descriptors are back (the sessions closed)
 * the next reconcile settles everything.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  ADDON_WAYS,
  agentArgv,
  instanceCarriers,
  killGateways,
  killInstance,
  leaseFiles,
  startGateway,
  tempDir,
  removeTempDirs,
  waitFor,
} from "./harness.js";
import { afterAll } from "vitest";

const skip =
  process.platform !== "linux"
    ? "not Linux"
    : spawnSync("prlimit", ["--version"]).status !== 0
      ? "prlimit(1) is not installed"
      : null;
if (skip) console.log(`[faults] descriptors skipped: ${skip}`);

/** Settled leases whose lease cgroup is still on the host: a settled lease has nothing left to drain or remove it. */
const cgroupsLeft = (files: ReturnType<typeof leaseFiles>) =>
  files.filter((f) => f.lease?.cgroup?.path !== undefined && existsSync(f.lease.cgroup.path)).map((f) => f.lease);

/** Lease cgroups still in this state dir's instance folder under each root it recorded, whoever recorded them (or nobody did). */
function instanceFolderLeft(stateDir: string, instanceId: string): string[] {
  let roots: string[] = [];
  try {
    roots = (JSON.parse(readFileSync(join(stateDir, "acpx", "containment.json"), "utf8")) as { roots: string[] }).roots;
  } catch {
    return []; // containment off: nothing was made
  }
  return roots.flatMap((r) => {
    try {
      return readdirSync(join(r, instanceId), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => join(r, instanceId, d.name));
    } catch {
      return [];
    }
  });
}

let instance: string | undefined;
afterEach(() => {
  killGateways();
  killInstance(instance);
});
afterAll(removeTempDirs);

describe.skipIf(skip !== null)(
  `descriptors run out (EMFILE from prlimit --nofile=128)${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    it("40 ensureSession calls: the gateway lives, each failure names RLIMIT_NOFILE, every lease settles, nothing is left running", async () => {
      const stateDir = tempDir("emfile");
      const gw = await startGateway({ prefix: ["prlimit", "--nofile=128:128", "--"] });
      ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
        stateDir,
        maintenanceIntervalMs: 0,
      }));
      const keys = Array.from({ length: 40 }, (_, i) => `fd-${i}`);
      const results = await Promise.all(
        keys.map((key) => gw.request("ensure", { key, command: agentArgv() }, 120_000)),
      );
      expect(await gw.lives()).toBe(true);
      const failed = results.filter((r) => !r.ok);
      const ok = results.filter((r) => r.ok);
      // the limit is what it is for: some ensures fail; the point is how
      expect(failed.length).toBeGreaterThan(0);
      for (const f of failed) {
        const e = f.error!;
        const text = `${e.message} ${e.cause?.message ?? ""}`;
        // a /proc read refused for want of a descriptor reads as "gone" in the facts layer: named as such when it happens
        if (/read it as gone/.test(text)) continue;
        expect(text, text).toMatch(/EMFILE/);
        expect(text, text).toMatch(/RLIMIT_NOFILE soft 128, hard 128/);
        expect(text, text).not.toMatch(/\n\s+at /);
      }
      for (const r of ok) await gw.call("close", { key: (r.value as { sessionKey: string }).sessionKey });
      const rep = await gw.call<{ entries: { stateAfter: string }[] }>("reap");
      expect(rep.entries.every((e) => e.stateAfter === "closed" || e.stateAfter === "lost")).toBe(true);
      await waitFor(() => instanceCarriers(instance!).length === 0, 15_000);
      const files = leaseFiles(stateDir);
      expect(files.filter((f) => f.corrupt)).toEqual([]);
      expect(files.filter((f) => f.lease!.state !== "closed" && f.lease!.state !== "lost")).toEqual([]);
      expect(cgroupsLeft(files)).toEqual([]);
      expect(instanceFolderLeft(stateDir, instance!)).toEqual([]);
      expect(await gw.lives()).toBe(true);
      await gw.call("dispose");
    }, 240_000);

    // the addon's file jobs and fs/promises fail at different steps when descriptors run out: both must leave every record settled
    it.each(ADDON_WAYS)(
      "60 supervisor runs (background, leased), with $how: the gateway lives, each spawn error names RLIMIT_NOFILE, every lease settles",
      async (way) => {
        const stateDir = tempDir("emfile-sup");
        const gw = await startGateway({ prefix: ["prlimit", "--nofile=128:128", "--"], way });
        await gw.call("supervisor", { stateDir });
        const ids = Array.from({ length: 60 }, (_, i) => `run-${i}`);
        const spawned = await Promise.all(
          ids.map((runId) => gw.request("spawn", { runId, argv: ["sleep", "3"], background: true }, 120_000)),
        );
        expect(await gw.lives()).toBe(true);
        const waits = await Promise.all(
          ids.map((runId, i) =>
            spawned[i]!.ok ? gw.request("wait", { runId }, 120_000) : Promise.resolve(spawned[i]!),
          ),
        );
        const failures = waits
          .map((w) =>
            w.ok
              ? (w.value as { reason: string; stderr: string }).reason === "spawn-error"
                ? (w.value as { stderr: string }).stderr
                : null
              : `${w.error!.message}`,
          )
          .filter((x): x is string => x !== null);
        expect(failures.length).toBeGreaterThan(0);
        for (const f of failures) expect(f, f).toMatch(/EMFILE/);
        for (const f of failures) expect(f, f).toMatch(/RLIMIT_NOFILE soft 128, hard 128|could not be (written|read)/);
        const rep = await gw.call<{ runs: { state: string }[] }>("reconcile");
        expect(rep.runs.filter((r) => r.state !== "closed" && r.state !== "lost")).toEqual([]);
        const files = leaseFiles(stateDir);
        expect(files.filter((f) => f.corrupt)).toEqual([]);
        expect(files.filter((f) => f.lease!.state !== "closed" && f.lease!.state !== "lost")).toEqual([]);
        expect(cgroupsLeft(files)).toEqual([]);
        expect(await gw.lives()).toBe(true);
        await gw.call("shutdown");
      },
      240_000,
    );
  },
);
