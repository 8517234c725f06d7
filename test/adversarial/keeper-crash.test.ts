/**
 * The gateway's death ends everything it started, without waiting for a
 * restart (issue 39, finding 8): a real gateway process
 * (test/fixtures/adversarial/keeper-gateway.mjs) with a session whose adapter
 * ignores SIGTERM and has a setsid grandchild, an ACP terminal that left a
 * TERM-ignoring setsid child, and a leased supervisor background run whose
 * grandchild ignores SIGTERM, is SIGKILLed (alone, or with its whole process
 * group, its wrappers included). Its keeper must end every one of them
 * within the grace + 1 s, settle their leases and leave no cgroup behind,
 * with no other gateway ever started. Build first (`npm run build`).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { KEEPER_REPORT_FILE, type KeeperReport } from "../../src/ownership/keeper/keeper-reap.js";
import {
  alive,
  disposeAfterEach,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackChild,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const GATEWAY = join(ROOT, "test/fixtures/adversarial/keeper-gateway.mjs");
const GRACE_MS = 1000;

interface Started {
  gateway: number;
  keeper: number | null;
  handle: AcpRuntimeHandle;
  agent: { pid: number; grandchildPid: number | null };
  terminalChild: number;
  terminalLease: string | null;
  run: { root: number; grandchild: number; leaseId: string | null };
}

async function startGateway(stateDir: string): Promise<Started> {
  // detached: the gateway leads its own process group, so the group kill takes it and its wrapper, and nothing of the test
  const gw = trackChild(
    spawn(process.execPath, [GATEWAY, stateDir, String(GRACE_MS)], {
      stdio: ["ignore", "pipe", "inherit"],
      detached: true,
    }),
  );
  const exited = new Promise<never>((_, reject) =>
    gw.once("exit", (code) => reject(new Error(`the stand-in gateway exited early (code ${code})`))),
  );
  const first = (async () => {
    for await (const line of createInterface({ input: gw.stdout! })) return JSON.parse(line) as Started;
    throw new Error("the stand-in gateway printed nothing");
  })();
  const s = await Promise.race([first, exited]);
  for (const id of [s.handle.leaseId, s.terminalLease, s.run.leaseId]) if (id) trackLease(id);
  for (const pid of [s.keeper, s.agent.pid, s.agent.grandchildPid, s.terminalChild, s.run.root, s.run.grandchild])
    trackPid(pid);
  return s;
}

function cgroupsOf(stateDir: string, leaseIds: string[]): string[] {
  const paths: string[] = [];
  for (const id of leaseIds) {
    for (const dir of ["acpx/leases", "acpx/leases/archive"]) {
      const f = join(stateDir, dir, `${id}.json`);
      if (!existsSync(f)) continue;
      const p = (JSON.parse(readFileSync(f, "utf8")) as { cgroup?: { path?: string } }).cgroup?.path;
      if (p) paths.push(p);
    }
  }
  return paths;
}

describe("a gateway's keeper ends what the gateway started when it dies", () => {
  for (const how of ["gateway SIGKILL", "process-group SIGKILL"] as const) {
    it(`${how}: session tree (setsid grandchild), terminal and supervisor run gone within grace + 1 s, leases settled, no cgroup left`, async () => {
      const stateDir = tempStateDir(`keeper-${how.startsWith("gateway") ? "gw" : "group"}`);
      const s = await startGateway(stateDir);
      expect(s.keeper, "the gateway started a keeper with its first session").not.toBeNull();
      expect(s.terminalLease).not.toBeNull();
      expect(s.run.leaseId).not.toBeNull();
      const pids = [
        s.handle.rootPid,
        s.agent.pid,
        s.agent.grandchildPid!,
        s.terminalChild,
        s.run.root,
        s.run.grandchild,
      ];
      expect(pids.filter((p) => !alive(p))).toEqual([]);
      const leaseIds = [s.handle.leaseId, s.terminalLease!, s.run.leaseId!];
      const cgroups = cgroupsOf(stateDir, leaseIds);

      const t0 = Date.now();
      process.kill(how === "gateway SIGKILL" ? s.gateway : -s.gateway, "SIGKILL");
      const took = await waitFor(() => !pids.some(alive), GRACE_MS + 30_000, 10);
      const figure = took === -1 ? `more than ${Date.now() - t0}` : String(took);
      console.log(`[keeper] ${how} → every run, terminal and adapter tree gone in ${figure} ms (grace ${GRACE_MS} ms)`);
      expect(took, `still alive: ${JSON.stringify(pids.filter(alive))}`).not.toBe(-1);
      expect(took).toBeLessThanOrEqual(GRACE_MS + 1000);
      for (const id of leaseIds) expect(leaseCarriers(id), `carriers of ${id}`).toEqual([]);

      // the keeper settles the leases, writes its report and exits; nobody else ever ran
      expect(await waitFor(() => !alive(s.keeper!), 15_000)).not.toBe(-1);
      const report = JSON.parse(readFileSync(join(stateDir, "acpx", KEEPER_REPORT_FILE), "utf8")) as KeeperReport;
      expect(report).toMatchObject({ outcome: "reaped", gatewayPid: s.gateway, keeperPid: s.keeper });
      const store = await openLeaseStore(stateDir);
      for (const id of leaseIds) expect(["closed", "lost"], `lease ${id}`).toContain((await store.get(id))?.state);
      expect(
        cgroups.filter((p) => existsSync(p)),
        "lease cgroups left on the host",
      ).toEqual([]);
      const id = readFileSync(join(stateDir, "gateway-instance-id"), "utf8").trim();
      const roots = existsSync(join(stateDir, "acpx/containment.json"))
        ? (JSON.parse(readFileSync(join(stateDir, "acpx/containment.json"), "utf8")) as { roots: string[] }).roots
        : [];
      expect(
        roots.map((r) => `${r}/${id}`).filter((f) => existsSync(f)),
        "instance folder left on the host",
      ).toEqual([]);
      // the state dir's lock was given back: a gateway starts on it at once
      expect(readFileSync(join(stateDir, "gateway.lock"), "utf8")).toBe("");
    });
  }
});

describe("a gateway restarted while its predecessor's keeper works", () => {
  it("waits for the keeper's lock instead of being refused; between them every lease is settled once and everything is gone", async () => {
    const stateDir = tempStateDir("keeper-restart");
    const s = await startGateway(stateDir);
    const pids = [s.handle.rootPid, s.agent.pid, s.agent.grandchildPid!, s.terminalChild, s.run.root, s.run.grandchild];
    const leaseIds = [s.handle.leaseId, s.terminalLease!, s.run.leaseId!];
    process.kill(s.gateway, "SIGKILL");
    // at once, as a service manager restarting the gateway would: no StateDirLockedError while the keeper holds the state dir
    const next = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(next);
    const reap = await next.reapStartupOrphans();
    expect(
      await waitFor(() => !pids.some(alive), 15_000, 10),
      `still alive: ${JSON.stringify(pids.filter(alive))}`,
    ).not.toBe(-1);
    expect(await waitFor(() => !alive(s.keeper!), 15_000)).not.toBe(-1);
    const reportFile = join(stateDir, "acpx", KEEPER_REPORT_FILE);
    const byKeeper = existsSync(reportFile)
      ? (JSON.parse(readFileSync(reportFile, "utf8")) as KeeperReport).entries.map((e) => e.leaseId)
      : [];
    const byReap = reap.entries
      .filter((e) => e.stateAfter === "closed" || e.stateAfter === "lost")
      .map((e) => e.leaseId);
    // the ACPX session and the terminal: settled by exactly one of them (the keeper, or the new gateway when it won the lock)
    for (const id of [s.handle.leaseId, s.terminalLease!])
      expect([byKeeper.includes(id), byReap.includes(id)].filter(Boolean), `lease ${id}`).toHaveLength(1);
    // the gateway's own supervisor run: no startup reap takes it, the keeper does whoever has the state dir
    expect(byKeeper).toContain(s.run.leaseId);
    const store = await openLeaseStore(stateDir);
    for (const id of leaseIds) expect(["closed", "lost"], `lease ${id}`).toContain((await store.get(id))?.state);
  });
});

describe("a supervisor-only gateway's keeper", () => {
  it("gateway SIGKILL: its leased background run (TERM-ignoring grandchild) gone within grace + 1 s, lease settled, no state-dir lock made", async () => {
    const stateDir = tempStateDir("keeper-sup");
    const gw = trackChild(
      spawn(
        process.execPath,
        [join(ROOT, "test/fixtures/adversarial/keeper-supervisor-gateway.mjs"), stateDir, String(GRACE_MS)],
        { stdio: ["ignore", "pipe", "inherit"] },
      ),
    );
    let started:
      { gateway: number; keeper: number | null; root: number; grandchild: number; leaseId: string | null } | undefined;
    for await (const line of createInterface({ input: gw.stdout! })) {
      started = JSON.parse(line) as typeof started;
      break;
    }
    const s = started!;
    if (s.leaseId) trackLease(s.leaseId);
    for (const p of [s.keeper, s.root, s.grandchild]) trackPid(p);
    expect(s.keeper).not.toBeNull();
    expect(s.leaseId).not.toBeNull();
    const t0 = Date.now();
    process.kill(s.gateway, "SIGKILL");
    const took = await waitFor(() => !alive(s.root) && !alive(s.grandchild), GRACE_MS + 30_000, 10);
    console.log(
      `[keeper] supervisor-only gateway SIGKILL → run gone in ${took === -1 ? `more than ${Date.now() - t0}` : took} ms (grace ${GRACE_MS} ms)`,
    );
    expect(took).not.toBe(-1);
    expect(took).toBeLessThanOrEqual(GRACE_MS + 1000);
    expect(await waitFor(() => !alive(s.keeper!), 15_000)).not.toBe(-1);
    expect(["closed", "lost"]).toContain((await (await openLeaseStore(stateDir)).get(s.leaseId!))?.state);
    expect(
      existsSync(join(stateDir, "gateway.lock")),
      "no controller ever held it: the keeper makes no lock file",
    ).toBe(false);
    expect(leaseCarriers(s.leaseId!)).toEqual([]);
  });
});
