/**
 * A durable session waiting for a re-adoption, as an operator sees it
 * (`node dist/cli/main.js …`): status and explain show it waiting, its
 * deadline and why; `reap` ends it at once and settles its lease; after a
 * re-adoption status no longer says it waits.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  AGENT,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  tempStateDir,
  trackLease,
  waitFor,
} from "../acpx/controller-helpers.js";
import { nativeWrapperPath } from "../acpx/durable-helpers.js";

const controllers = disposeAfterEach();
const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const have = nativeWrapperPath() !== null && existsSync(nativeWrapperPath()!);
const d = have ? describe : describe.skip;
if (!have) console.log("durable CLI tests skipped: no native wrapper (Linux with the addon built)");

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [MAIN, ...args], { timeout: 25_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    ),
  );
}

const COMMAND = [process.execPath, AGENT];
const KEY = "agent:main:acp:cli-durable";

async function detached(stateDir: string, windowMs: number) {
  const opts = {
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    keeper: "off" as const,
    durable: { reattachWithinMs: windowMs },
  };
  const a = await createAcpxLifecycleController(opts);
  const h = await a.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
  trackLease(h.leaseId);
  await a.detach();
  return { h, opts };
}

d("a waiting durable session in the CLI", () => {
  it("status and explain show it waiting, with its deadline and why; after a re-adoption it no longer waits", async () => {
    const stateDir = tempStateDir("cli-durable");
    const t0 = Date.now();
    const { h, opts } = await detached(stateDir, 120_000);
    await waitFor(() => existsSync(`${stateDir}/acpx/attach/${h.leaseId}.waiting`), 5000);
    const status = await cli(["status", "--state-dir", stateDir, "--json"]);
    expect(status.code, status.stderr).toBe(0);
    const row = (
      JSON.parse(status.stdout) as {
        leases: { lease: { leaseId: string }; waiting?: { since: number; deadline: number; why: string } }[];
      }
    ).leases.find((l) => l.lease.leaseId === h.leaseId)!;
    expect(row.waiting).toBeDefined();
    expect(row.waiting!.since).toBeGreaterThanOrEqual(t0 - 1000);
    expect(row.waiting!.deadline - row.waiting!.since).toBeLessThanOrEqual(120_000);
    expect(row.waiting!.deadline - row.waiting!.since).toBeGreaterThan(110_000);
    expect(row.waiting!.why).toMatch(/re-adopt/);
    const text = await cli(["status", "--state-dir", stateDir]);
    expect(text.stdout).toMatch(/awaits re-adoption until \d\d:\d\d:\d\d/);
    const explain = await cli(["explain", h.leaseId, "--state-dir", stateDir, "--json"]);
    const ex = JSON.parse(explain.stdout) as { waiting?: unknown; conclusion: string };
    expect(ex.waiting).toBeDefined();
    expect(ex.conclusion).toMatch(/awaits re-adoption/);

    const b = await createAcpxLifecycleController(opts);
    controllers.push(b);
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.adopted).toBe(true);
    const after = await cli(["status", "--state-dir", stateDir, "--json"]);
    const row2 = (
      JSON.parse(after.stdout) as { leases: { lease: { leaseId: string }; waiting?: unknown }[] }
    ).leases.find((l) => l.lease.leaseId === h.leaseId)!;
    expect(row2.waiting).toBeUndefined();
  });

  it("reap ends a waiting session at once and settles its lease", async () => {
    const stateDir = tempStateDir("cli-durable-reap");
    const { h } = await detached(stateDir, 120_000);
    expect(alive(h.rootPid)).toBe(true);
    const r = await cli(["reap", "--state-dir", stateDir, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0 && !alive(h.rootPid), 10_000)).not.toBe(-1);
    const lease = await (await openLeaseStore(stateDir, { readOnly: true })).get(h.leaseId);
    expect(lease?.state).toBe("closed");
    expect(lease?.settledAs).toBe("killed");
  });
});
