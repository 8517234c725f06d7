/**
 * How a lease ended, on the record and in the CLI: a lease that settles
 * records why (`settledAs`), so a `lost` lease reads correctly. A session
 * whose adapter ended on its own (its wrapper then swept its tree and
 * exited) settles `lost` with settledAs "ended-on-its-own": nothing was
 * signalled, and `status`, `leases` and `explain` say so in words. A close
 * that killed a live tree settles `closed` with "killed". A record written
 * before the field is still read, and shown as not saying how.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  cleanupAll,
  GRACE_MS,
  readPidfile,
  tempStateDir,
  trackLease,
  waitFor,
} from "./controller-helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const WORDS = "its processes had ended on their own before the close; nothing was signalled";
const ENDED_ON_ITS_OWN = `ended-on-its-own: ${WORDS}`;

/** the listing's row for the lease names it, its state and how it ended; the line under it says so in words */
function expectListed(stdout: string, leaseId: string, state: string, settledAs: string, words: string): void {
  const row = stdout.split("\n").find((l) => l.includes(leaseId));
  expect(row).toBeDefined();
  expect(row).toMatch(new RegExp(`\\b${state}\\b`));
  expect(row).toContain(settledAs);
  expect(stdout).toContain(words);
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { timeout: 30_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

afterAll(() => cleanupAll());

describe("a settled lease says how it ended", () => {
  it("a session whose adapter ended on its own: lost, settledAs ended-on-its-own, and the CLI says so in words", async () => {
    const stateDir = tempStateDir("settled-as");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    try {
      const pidfile = join(stateDir, "agent.json");
      const h = await ctl.ensureSession({
        sessionKey: "agent:main:acp:ended",
        agentId: "main",
        command: agentArgv({ pidfile }),
      });
      trackLease(h.leaseId);
      const { pid: adapterPid } = await readPidfile(pidfile);
      // the adapter ends (not through proclease): the wrapper sweeps its tree and exits on its own
      process.kill(adapterPid, "SIGKILL");
      expect(await waitFor(() => !alive(h.rootPid), 10_000)).not.toBe(-1);

      const r = await ctl.closeSession({ handle: h });
      expect(r).toMatchObject({ outcome: "lost", leaseState: "lost" });
      expect(r.kill).toBeUndefined();
      const store = await openLeaseStore(stateDir, { readOnly: true });
      expect(await store.get(h.leaseId)).toMatchObject({ state: "lost", settledAs: "ended-on-its-own" });

      const status = await cli(["status", "--state-dir", stateDir]);
      expectListed(status.stdout, h.leaseId, "lost", "ended-on-its-own", ENDED_ON_ITS_OWN);
      const leases = await cli(["leases", "--state-dir", stateDir]);
      expectListed(leases.stdout, h.leaseId, "lost", "ended-on-its-own", ENDED_ON_ITS_OWN);
      const explained = await cli(["explain", h.leaseId, "--state-dir", stateDir]);
      expect(explained.stdout).toContain(`lost: ${WORDS}`);
      const json = JSON.parse((await cli(["leases", "--state-dir", stateDir, "--json"])).stdout) as {
        leases: { leaseId: string; settledAs?: string }[];
      };
      expect(json.leases.find((l) => l.leaseId === h.leaseId)?.settledAs).toBe("ended-on-its-own");

      // a close that ends a live tree: closed, killed
      const h2 = await ctl.ensureSession({
        sessionKey: "agent:main:acp:killed",
        agentId: "main",
        command: agentArgv({}),
      });
      trackLease(h2.leaseId);
      expect(await ctl.closeSession({ handle: h2 })).toMatchObject({ outcome: "closed", leaseState: "closed" });
      expect((await store.get(h2.leaseId))?.settledAs).toBe("killed");
    } finally {
      await ctl.dispose();
    }
  });

  it("a record settled before settledAs existed is still read, and shown as not saying how", async () => {
    const stateDir = tempStateDir("settled-as-old");
    const archive = join(stateDir, "acpx", "leases", "archive");
    for (const d of [archive, join(stateDir, "acpx", "leases", "quarantine")])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    writeFileSync(join(stateDir, "gateway-instance-id"), "gw-old\n", { mode: 0o600 });
    const old = {
      schemaVersion: 1,
      leaseId: "old-lease",
      gatewayInstanceId: "gw-old",
      sessionKey: "agent:main:acp:old",
      wrapperRoot: "/nonexistent",
      wrapperPath: "/nonexistent/w",
      rootPid: 0,
      commandHash: "",
      startedAt: 1,
      state: "lost",
      updatedAt: Date.now(),
    };
    writeFileSync(join(archive, "old-lease.json"), JSON.stringify(old) + "\n", { mode: 0o600 });
    const store = await openLeaseStore(stateDir, { readOnly: true });
    const l = await store.get("old-lease");
    expect(l).toMatchObject({ state: "lost", kind: "acpx" });
    expect(l?.settledAs).toBeUndefined();
    const leases = await cli(["leases", "--state-dir", stateDir]);
    expectListed(leases.stdout, "old-lease", "lost", "unrecorded", "unrecorded: settled before leases recorded how");
  });
});
