/**
 * The keeper's own lifetime (ownership/keeper/keeper.ts): started by the first
 * session, stopped without acting by dispose() and shutdown(), one per
 * state dir, none left behind by many controllers; and the state-dir lock
 * it takes after its gateway died, which a new gateway waits for instead of
 * being refused. Build first (`npm run build`): the keeper runs from dist/.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { keeperPid } from "../../src/ownership/keeper/keeper.js";
import { KEEPER_REPORT_FILE } from "../../src/ownership/keeper/keeper-reap.js";
import { acquireStateDirLock, StateDirLockedError } from "../../src/ownership/host/state-lock.js";
import {
  agentArgv,
  alive,
  DIST_ACPX,
  disposeAfterEach,
  GRACE_MS,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();

async function controllerWithSession(label: string) {
  const stateDir = tempStateDir(label);
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  expect(keeperPid(stateDir), "no keeper before the first session").toBeUndefined();
  const h = await ctl.ensureSession({ sessionKey: `agent:main:acp:${label}`, agentId: "main", command: agentArgv({}) });
  trackLease(h.leaseId);
  const keeper = keeperPid(stateDir);
  trackPid(keeper);
  expect(keeper).toBeDefined();
  expect(alive(keeper!)).toBe(true);
  return { stateDir, ctl, h, keeper: keeper! };
}

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN);
}

/** The keeper's resident set once it has loaded what it runs (three readings 200 ms apart within 1 %), for the report. */
async function settledRssKb(pid: number): Promise<number> {
  const seen: number[] = [];
  await waitFor(
    () => {
      seen.push(rssKb(pid));
      const last = seen.slice(-3);
      return last.length === 3 && last[0]! > 10_000 && Math.max(...last) - Math.min(...last) <= last[0]! / 100;
    },
    20_000,
    200,
  );
  return seen[seen.length - 1]!;
}

describe("the keeper's lifetime", () => {
  it("dispose() stops it without acting: the session's lease stays open for the next startup reap", async () => {
    const { stateDir, ctl, h, keeper } = await controllerWithSession("keeper-dispose");
    console.log(`[keeper] pid ${keeper}: VmRSS ${await settledRssKb(keeper)} kB once loaded and idle`);
    await ctl.dispose();
    expect(alive(keeper), "dispose() waits for the keeper's exit").toBe(false);
    expect(existsSync(join(stateDir, "acpx", KEEPER_REPORT_FILE)), "a stopped keeper writes no report").toBe(false);
    expect(alive(h.rootPid), "the session lives on after dispose (its documented behaviour)").toBe(true);
    const next = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(next);
    expect((await next.listLeases()).find((l) => l.leaseId === h.leaseId)?.state).toBe("open");
    await next.reapStartupOrphans();
    expect(await waitFor(() => !alive(h.rootPid), 10_000)).not.toBe(-1);
  });

  it("shutdown() closes the sessions and stops it without acting", async () => {
    const { stateDir, ctl, h, keeper } = await controllerWithSession("keeper-shutdown");
    const reports = await ctl.shutdown();
    expect(reports.map((r) => r.leaseId)).toEqual([h.leaseId]);
    expect(alive(keeper)).toBe(false);
    expect(existsSync(join(stateDir, "acpx", KEEPER_REPORT_FILE))).toBe(false);
    expect(keeperPid(stateDir)).toBeUndefined();
  });

  it("one keeper per state dir; many controllers leave none behind", async () => {
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await controllerWithSession(`keeper-many-${i}`));
    expect(new Set(made.map((m) => m.keeper)).size).toBe(3);
    // a second session of the same controller shares its keeper
    const second = await made[0]!.ctl.ensureSession({
      sessionKey: "agent:main:acp:second",
      agentId: "main",
      command: agentArgv({}),
    });
    trackLease(second.leaseId);
    expect(keeperPid(made[0]!.stateDir)).toBe(made[0]!.keeper);
    for (const m of made) await m.ctl.dispose();
    expect(made.map((m) => m.keeper).filter(alive)).toEqual([]);
    // the next controller on a state dir starts its own keeper with its first session
    const again = await createAcpxLifecycleController({
      stateDir: made[1]!.stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
    });
    controllers.push(again);
    await again.reapStartupOrphans();
    const h = await again.ensureSession({
      sessionKey: "agent:main:acp:again",
      agentId: "main",
      command: agentArgv({}),
    });
    trackLease(h.leaseId);
    const k = keeperPid(made[1]!.stateDir);
    trackPid(k);
    expect(k).toBeDefined();
    expect(k).not.toBe(made[1]!.keeper);
    await again.dispose();
    expect(alive(k!)).toBe(false);
  });

  it("dispose() in a process with nothing else to do returns (the keeper's exit is awaited, not abandoned)", () => {
    const stateDir = tempStateDir("keeper-lone");
    const code = `
      const { createAcpxLifecycleController } = await import(${JSON.stringify(DIST_ACPX)});
      const ctl = await createAcpxLifecycleController({ stateDir: ${JSON.stringify(stateDir)}, graceMs: ${GRACE_MS}, maintenanceIntervalMs: 0 });
      const h = await ctl.ensureSession({ sessionKey: "agent:main:acp:lone", agentId: "main", command: ${JSON.stringify(agentArgv({}))} });
      await ctl.closeSession({ handle: h });
      // until the closed session's last handles are gone: then the keeper is the only thing dispose() waits on
      await new Promise((r) => setTimeout(r, 500));
      await ctl.dispose();
      process.stdout.write("disposed\\n");
    `;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8", timeout: 60_000 });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("disposed\n");
    expect(r.status).toBe(0);
  });

  it('keeper: "off" starts none', async () => {
    const stateDir = tempStateDir("keeper-off");
    const ctl = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      keeper: "off",
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({ sessionKey: "agent:main:acp:off", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    expect(keeperPid(stateDir)).toBeUndefined();
    await expect(
      createAcpxLifecycleController({ stateDir: tempStateDir("keeper-bad"), keeper: "yes" as never }),
    ).rejects.toThrow(/opts\.keeper must be "on" or "off"/);
  });
});

describe("the state-dir lock a keeper holds", () => {
  it("a gateway waits for a keeper's lock (and is still refused at once by a gateway's)", async () => {
    const stateDir = tempStateDir("keeper-lock");
    const facts = getProcessFacts();
    const keeper = await acquireStateDirLock(stateDir, facts, { role: "keeper" });
    expect(JSON.parse(readFileSync(join(stateDir, "gateway.lock"), "utf8"))).toMatchObject({
      pid: process.pid,
      role: "keeper",
    });
    let released = false;
    const gateway = acquireStateDirLock(stateDir, facts);
    // long enough for the refusal a gateway got before keepers existed (its retries take about 100 ms)
    setTimeout(() => {
      released = true;
      void keeper.release();
    }, 400);
    const lock = await gateway;
    expect(released, "the gateway got the lock only once the keeper gave it back").toBe(true);
    // a keeper never waits: a gateway's lock refuses it at once, naming the gateway
    const refused = await acquireStateDirLock(stateDir, facts, { role: "keeper" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StateDirLockedError);
    expect(refused).toMatchObject({ holderPid: process.pid, holderRole: "gateway" });
    await lock.release();
  });
});
