/**
 * ensureSession({ limits }) (docs/containment.md): memory.max / pids.max in
 * the lease's own cgroup, written before the adapter exists; refused loudly,
 * with nothing spawned and the lease settled, wherever they cannot hold.
 * On this development host the memory and pids controllers live on the
 * cgroup v1 hierarchy: the refusal runs here for real, the enforcement test
 * skips with the reason in its name.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { detectContainment, readCgroupOf, type ContainmentSupport } from "../../src/containment/index.js";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxEnsureError } from "../../src/acpx/report/errors.js";
import type { AcpRuntimeEnsureInput, SessionLimits } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleControllerOptions } from "../../src/acpx/sessions/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { probeCgroup2, v2ControllersFor } from "../helpers/cgroup-probe.mjs";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

// What a controller asking for both controllers gets here (this may move this
// worker into proclease/_gateway on a host that allows it: what the feature does).
const support = await detectContainment({ controllers: ["memory", "pids"] });
const missing = support.available ? support.missingControllers : [];
// Which tests run is decided by the kernel's own files (test/helpers/cgroup-probe.mjs),
// never by what detectContainment() reports: a detection regression fails them.
const probe = await probeCgroup2();
const kernel = await v2ControllersFor(["memory", "pids"]);
const enforceable = kernel.usable.length === 2;
const enforceSkip = enforceable
  ? ""
  : ` [skipped: ${
      probe.writable
        ? `not usable on cgroup v2 here: ${["memory", "pids"]
            .filter((c) => !kernel.usable.includes(c))
            .map((c) => `${c}${kernel.onV1.includes(c) ? " (bound to a v1 hierarchy)" : ""}`)
            .join(", ")}`
        : `no writable cgroup v2 (independent probe): ${probe.why}`
    }]`;
if (!enforceable) console.log(`[limits.test] the enforcement test is skipped:${enforceSkip}`);
const memoryMissing = missing.find((m) => m.controller === "memory");
const refusable = probe.writable && kernel.onV1.includes("memory");
const refuseSkip = refusable
  ? ""
  : ` [skipped: ${probe.writable ? "the memory controller is not bound to cgroup v1 here" : `no writable cgroup v2 (independent probe): ${probe.why}`}]`;
if (!refusable) console.log(`[limits.test] the refusal-on-this-host tests are skipped:${refuseSkip}`);

const MiB = 1024 * 1024;

async function controller(
  stateDir: string,
  extra: Partial<AcpxLifecycleControllerOptions> = {},
): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0, ...extra });
  controllers.push(ctl);
  return ctl;
}

function containmentOf(ctl: AcpxLifecycleController): ContainmentSupport {
  return (ctl as unknown as { containment: ContainmentSupport }).containment;
}

function input(key: string, limits: unknown, command = agentArgv({})): AcpRuntimeEnsureInput {
  return { sessionKey: key, agentId: "main", command, limits: limits as SessionLimits };
}

/** live processes whose argv names the state dir (the wrapper is installed under it) */
function processesUnder(stateDir: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").includes(stateDir) && alive(Number(d))) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected a rejection");
}

describe("malformed limits", () => {
  it("are a TypeError before any lease is written or anything spawned", async () => {
    const stateDir = tempStateDir("limits-bad");
    const ctl = await controller(stateDir);
    const bad: unknown[] = [
      { memoryMax: 0 },
      { pidsMax: -1 },
      { memoryMax: Number.NaN },
      { pidsMax: 1.5 },
      { memoryMax: Number.POSITIVE_INFINITY },
      { memoryMax: "1G" },
      { pidsMax: "unlimited" },
      { memoryLimit: 64 * MiB },
      null,
      "max",
      [64],
    ];
    for (const limits of bad) {
      const e = await rejection(ctl.ensureSession(input("agent:main:acp:bad", limits)));
      expect(e, JSON.stringify(limits)).toBeInstanceOf(TypeError);
      expect((e as Error).message).toMatch(/input\.limits/);
    }
    expect(await ctl.listLeases()).toEqual([]);
    expect(processesUnder(stateDir)).toEqual([]);
  });

  it("and a malformed containment option are a TypeError at create", async () => {
    const stateDir = tempStateDir("limits-badopt");
    for (const containment of [
      { controllers: ["cpu"] },
      { controllers: "memory" },
      { allowGatewayMove: "yes" },
      { control: ["memory"] },
      "on",
    ]) {
      const e = await rejection(
        controller(stateDir, { containment: containment as AcpxLifecycleControllerOptions["containment"] }),
      );
      expect(e, JSON.stringify(containment)).toBeInstanceOf(TypeError);
      expect((e as Error).message).toMatch(/opts\.containment/);
    }
  });
});

describe("limits that cannot hold are refused, nothing is spawned", () => {
  it('with containment "off": the refusal names containment off and no lease is written', async () => {
    const stateDir = tempStateDir("limits-off");
    const ctl = await controller(stateDir, { containment: "off" });
    const e = await rejection(ctl.ensureSession(input("agent:main:acp:off", { memoryMax: 64 * MiB })));
    expect(e).toBeInstanceOf(AcpxEnsureError);
    const err = e as AcpxEnsureError;
    expect(err.failure).toBe("limits-unavailable");
    expect(err.message).toMatch(/containment is off: turned off \(containment: "off"\)/);
    expect(err.message).toMatch(/memoryMax 67108864/);
    expect(err.limitsRefusal).toMatchObject({ controller: "memory" });
    expect(err.leaseId).toBeUndefined();
    expect(await ctl.listLeases()).toEqual([]);
    expect(processesUnder(stateDir)).toEqual([]);
  });

  it.runIf(refusable)(
    `on a host whose memory/pids controllers lease cgroups cannot use (here: ${memoryMissing?.why ?? "n/a"}): refused with that reason, lease settled, cgroup removed, no process${refuseSkip}`,
    async () => {
      const stateDir = tempStateDir("limits-v1");
      const ctl = await controller(stateDir);
      // the lazy path: this controller asked for no controller at create
      expect(containmentOf(ctl)).toMatchObject({
        available: true,
        controllers: expect.not.arrayContaining(["memory"]),
      });
      const e = await rejection(ctl.ensureSession(input("agent:main:acp:v1", { memoryMax: 64 * MiB, pidsMax: 64 })));
      expect(e).toBeInstanceOf(AcpxEnsureError);
      const err = e as AcpxEnsureError;
      expect(err.failure, err.message).toBe("limits-unavailable");
      expect(err.limitsRefusal?.controller).toBe("memory");
      // applyLimits's why, in the message, naming what detection names for this host
      expect(err.message).toContain(err.limitsRefusal!.why);
      expect(err.limitsRefusal!.why).toBe(memoryMissing!.why);
      if (memoryMissing!.code === "v1-hierarchy") expect(err.message).toMatch(/cgroup v1 hierarchy/);
      expect(err.message).toMatch(/nothing was started; its cgroup \S+ was removed/);
      trackLease(err.leaseId!);
      const lease = (await ctl.listLeases()).find((l) => l.leaseId === err.leaseId)!;
      expect(lease.state).toBe(err.leaseState);
      expect(lease.state).toBe("lost"); // NOTHING_STARTED: no process ever existed for it
      expect(lease.settledAs).toBe("never-started");
      expect(lease.rootPid).toBe(0);
      expect(lease.cgroup?.path).toMatch(new RegExp(`/proclease/${lease.gatewayInstanceId}/${err.leaseId}$`));
      expect(existsSync(lease.cgroup!.path)).toBe(false);
      expect(processesUnder(stateDir)).toEqual([]);
    },
  );

  it.runIf(refusable)(
    `pidsMax alone names the pids controller, and containment: { controllers } at create reports the same reason up front${refuseSkip}`,
    async () => {
      const stateDir = tempStateDir("limits-eager");
      const ctl = await controller(stateDir, { containment: { controllers: ["memory", "pids"] } });
      const sup = containmentOf(ctl);
      expect(sup.available).toBe(true);
      const pidsWhy = sup.available ? sup.missingControllers.find((m) => m.controller === "pids")?.why : undefined;
      expect(pidsWhy).toBeTypeOf("string");
      const e = (await rejection(ctl.ensureSession(input("agent:main:acp:pids", { pidsMax: 32 })))) as AcpxEnsureError;
      expect(e).toBeInstanceOf(AcpxEnsureError);
      expect(e.failure).toBe("limits-unavailable");
      expect(e.limitsRefusal).toEqual({ controller: "pids", why: pidsWhy });
      expect(e.message).toContain(pidsWhy!);
      trackLease(e.leaseId!);
      const lease = (await ctl.listLeases()).find((l) => l.leaseId === e.leaseId)!;
      expect(lease.state).toBe("lost");
      expect(existsSync(lease.cgroup!.path)).toBe(false);
      expect(processesUnder(stateDir)).toEqual([]);
    },
  );
});

describe('"max" asks for no limit', () => {
  it.each(["auto", "off"] as const)(
    'with containment %s, limits of only "max" start the session as without limits',
    async (containment) => {
      const stateDir = tempStateDir(`limits-max-${containment}`);
      const ctl = await controller(stateDir, { containment });
      const h = await ctl.ensureSession(input("agent:main:acp:max", { memoryMax: "max", pidsMax: "max" }));
      trackLease(h.leaseId);
      trackPid(h.rootPid);
      expect(alive(h.rootPid)).toBe(true);
      // the probe the refusal tests rely on sees a running session's wrapper
      expect(processesUnder(stateDir)).toContain(h.rootPid);
      const lease = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!;
      expect(lease.state).toBe("open");
      if (containment === "off") expect(lease.cgroup).toBeUndefined();
      expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
    },
  );
});

describe("a running session is returned only with the limits asked for", () => {
  it("asking the running key for a limit it does not run with is refused and leaves it running; asking without limits returns it", async () => {
    const stateDir = tempStateDir("limits-mismatch");
    const ctl = await controller(stateDir);
    const h = await ctl.ensureSession(input("agent:main:acp:mm", { memoryMax: "max" }));
    trackLease(h.leaseId);
    trackPid(h.rootPid);
    const e = (await rejection(ctl.ensureSession(input("agent:main:acp:mm", { pidsMax: 100 })))) as AcpxEnsureError;
    expect(e).toBeInstanceOf(AcpxEnsureError);
    expect(e.failure).toBe("limits-mismatch");
    expect(e.message).toContain(`already running (lease ${h.leaseId}) with no limits, not pidsMax 100`);
    expect(alive(h.rootPid)).toBe(true);
    expect((await ctl.listLeases()).map((l) => [l.leaseId, l.state])).toEqual([[h.leaseId, "open"]]);
    expect(await ctl.ensureSession(input("agent:main:acp:mm", undefined))).toEqual({ ...h, reused: true });
    expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
  });
});

describe("limits enforced by the kernel", () => {
  it.runIf(enforceable)(
    `memory.max and pids.max are in the lease cgroup before the adapter runs, and pidsMax stops a fork bomb${enforceSkip}`,
    async () => {
      const stateDir = tempStateDir("limits-v2");
      const trigger = join(stateDir, "go");
      const pidsMax = 64;
      // a bomb that waits for the session to be up, then tries 400 background sleeps
      const bomb = `( while [ ! -e ${trigger} ]; do sleep 0.05; done; i=0; while [ $i -lt 400 ]; do sleep 60 & i=$((i+1)); done; wait ) & exec "$0" "$@"`;
      const ctl = await controller(stateDir, { containment: { controllers: ["memory", "pids"] } });
      // the wrapper and the agent are two node processes in the same cgroup: the memory limit covers both
      const memoryMax = 512 * MiB;
      const h = await ctl.ensureSession(
        input("agent:main:acp:v2", { memoryMax, pidsMax }, ["/bin/sh", "-c", bomb, ...agentArgv({})]),
      );
      trackLease(h.leaseId);
      trackPid(h.rootPid);
      const cg = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!.cgroup!.path;
      expect(readFileSync(`${cg}/memory.max`, "utf8").trim()).toBe(String(memoryMax));
      expect(readFileSync(`${cg}/pids.max`, "utf8").trim()).toBe(String(pidsMax));
      // the wrapper was born into it, so the limits held from the adapter's first instruction
      expect(await readCgroupOf(h.rootPid)).toBe(cg);
      writeFileSync(trigger, "");
      const forksRefused = (): number =>
        Number(/^max (\d+)$/m.exec(readFileSync(`${cg}/pids.events`, "utf8"))?.[1] ?? "0");
      expect(await waitFor(() => forksRefused() > 0, 20_000, 50)).not.toBe(-1);
      const current = Number(readFileSync(`${cg}/pids.current`, "utf8").trim());
      console.log(
        `[limits.test] fork bomb: pids.current ${current} <= pids.max ${pidsMax}, forks refused ${forksRefused()}`,
      );
      expect(current).toBeLessThanOrEqual(pidsMax);
      const report = await ctl.closeSession({ handle: h });
      expect(report.outcome, report.detail).toBe("closed");
      expect(await waitFor(() => !existsSync(cg), 5000)).not.toBe(-1);
    },
  );
});
