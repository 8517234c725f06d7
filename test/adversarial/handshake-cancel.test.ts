/**
 * Cancellation bounds the handshake (issue 46, finding 5): a hostile agent
 * (test/fixtures/adversarial/handshake-agent.mjs, raw JSON-RPC, ignores
 * SIGTERM) answers each handshake step late or never. The handshake timeout
 * bounds the whole handshake, not each step; dispose() and shutdown() abort
 * an ensure under way, end its processes and settle its lease, and the
 * ensure rejects with AcpxControllerDisposedError. Real processes; build
 * first (`npm run build`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  alive,
  disposeAfterEach,
  leaseCarriers,
  readPidfile,
  ROOT,
  tempStateDir,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const AGENT = join(ROOT, "test/fixtures/adversarial/handshake-agent.mjs");
const GRACE_MS = 300;

function agent(dir: string, ...flags: string[]): { argv: string[]; pidfile: string; seen: string } {
  const pidfile = join(dir, "agent.json");
  const seen = join(dir, "seen.txt");
  return { argv: [process.execPath, AGENT, `--pidfile=${pidfile}`, `--seen=${seen}`, ...flags], pidfile, seen };
}

function methodsSeen(file: string): string[] {
  try {
    return readFileSync(file, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function controller(stateDir: string, handshakeTimeoutMs: number): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    handshakeTimeoutMs,
    keeper: "off",
  });
  controllers.push(ctl);
  return ctl;
}

/** every lease of the state dir, by state */
async function leaseStates(stateDir: string): Promise<string[]> {
  return (await (await openLeaseStore(stateDir)).list()).leases.map((l) => l.state);
}

describe("the handshake timeout bounds the whole handshake", () => {
  it("each step answered within the timeout but the handshake as a whole not: the ensure fails handshake-timeout", async () => {
    const stateDir = tempStateDir("hs-whole");
    // each of initialize and session/new answered after 1.2 s: every step is within the 2 s timeout, the two together are not
    const a = agent(stateDir, "--delay-ms=1200");
    const ctl = await controller(stateDir, 2000);
    const ensure = ctl.ensureSession({ sessionKey: "k-slow", agentId: "main", command: a.argv });
    await expect(ensure).rejects.toMatchObject({ name: "AcpxEnsureError", failure: "handshake-timeout" });
    const { pid } = await readPidfile(a.pidfile);
    expect(alive(pid), "the adapter was ended with its lease").toBe(false);
    expect(await leaseStates(stateDir)).toEqual([expect.stringMatching(/^(closed|lost)$/)]);
  });
});

describe("dispose() and shutdown() abort a handshake under way", () => {
  for (const how of ["dispose", "shutdown"] as const) {
    it(`${how}(): the ensure rejects AcpxControllerDisposedError, its processes are ended and its lease settled by the time ${how} resolves`, async () => {
      const stateDir = tempStateDir(`hs-${how}`);
      // session/new answered only after 8 s (the timeout is 60 s): a handshake well under way when the controller ends
      const a = agent(stateDir, "--delay-ms=8000");
      const ctl = await controller(stateDir, 60_000);
      const ensure = ctl.ensureSession({ sessionKey: `k-${how}`, agentId: "main", command: a.argv });
      const settled = ensure.then(
        () => "resolved",
        (e: unknown) => e,
      );
      expect(await waitFor(() => methodsSeen(a.seen).includes("initialize"), 15_000)).not.toBe(-1);
      const { pid } = await readPidfile(a.pidfile);
      trackPid(pid);
      const lease = (await ctl.listLeases())[0]!;

      if (how === "dispose") await ctl.dispose();
      else await ctl.shutdown();

      expect(await settled).toMatchObject({
        name: "AcpxControllerDisposedError",
        how: how === "dispose" ? "disposed" : "shut down",
      });
      expect(alive(pid), "the adapter (it ignores SIGTERM) was ended").toBe(false);
      expect(leaseCarriers(lease.leaseId)).toEqual([]);
      expect(await leaseStates(stateDir)).toEqual([expect.stringMatching(/^(closed|lost)$/)]);
    });
  }

  it("an ensure queued behind the one under way rejects too, without writing a lease", async () => {
    const stateDir = tempStateDir("hs-queued");
    const a = agent(stateDir, "--delay-ms=8000");
    const ctl = await controller(stateDir, 60_000);
    const first = ctl.ensureSession({ sessionKey: "k-q", agentId: "main", command: a.argv });
    const second = ctl.ensureSession({ sessionKey: "k-q", agentId: "main", command: a.argv });
    first.catch(() => undefined);
    second.catch(() => undefined);
    expect(await waitFor(() => methodsSeen(a.seen).includes("initialize"), 15_000)).not.toBe(-1);
    trackPid((await readPidfile(a.pidfile)).pid);
    await ctl.dispose();
    await expect(first).rejects.toMatchObject({ name: "AcpxControllerDisposedError" });
    await expect(second).rejects.toMatchObject({ name: "AcpxControllerDisposedError" });
    expect(await leaseStates(stateDir)).toEqual([expect.stringMatching(/^(closed|lost)$/)]);
  });
});
