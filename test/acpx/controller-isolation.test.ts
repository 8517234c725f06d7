/**
 * Ownership boundaries: two controllers with different state dirs never
 * touch each other's processes; an unowned look-alike of the adapter (same
 * argv) is never touched, even when a forged lease names its pid; legacy
 * records are reaped only when they verify; the process supervisor's runs in
 * the same store are never the controller's to reap.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openSessionStore } from "../../src/acpx/sessions/session-store.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { createSignaller } from "../../src/facts/signal.js";
import type { ProcessSignaller } from "../../src/facts/types.js";
import { explainLease } from "../../src/ownership/index.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  readPidfile,
  spawnSupervisorStyleRun,
  tempStateDir,
  testMarkerEnv,
  trackChild,
  trackLease,
  waitFor,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();
async function newController(stateDir: string) {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  return ctl;
}

/**
 * A process we start directly (no wrapper, no lease), with the given argv,
 * once it has exec'd that argv (read from /proc here): before the exec its
 * argv is Node's, and a command check would say "mismatch" for the wrong reason.
 */
function startUnowned(argv: string[]) {
  return trackChild(
    spawn(argv[0]!, argv.slice(1), {
      stdio: ["pipe", "ignore", "ignore"],
      env: { ...process.env, ...testMarkerEnv() },
    }),
  );
}
async function spawnUnowned(argv: string[]) {
  const c = startUnowned(argv);
  const want = argv.join("\0");
  const ran = await waitFor(() => {
    try {
      return readFileSync(`/proc/${c.pid}/cmdline`, "utf8").replace(/\0$/, "") === want;
    } catch {
      return false;
    }
  }, 10_000);
  if (ran === -1) throw new Error(`pid ${c.pid} never showed the argv ${JSON.stringify(argv)}`);
  return c;
}

describe("two installations on one host", () => {
  it("close and startup reaping of one never touch the other's processes or an unowned look-alike", async () => {
    const dirA = tempStateDir("iso-a");
    const dirB = tempStateDir("iso-b");
    const a = await newController(dirA);
    const b = await newController(dirB);
    expect(a.gatewayInstanceId).not.toBe(b.gatewayInstanceId);
    // identical adapter argv everywhere (no pidfile: it would differ)
    const argv = agentArgv({ kind: "setsid", stubborn: true, surviveStdinClose: true });
    const ha = await a.ensureSession({ sessionKey: "agent:main:acp:same", agentId: "main", command: argv });
    const hb = await b.ensureSession({ sessionKey: "agent:main:acp:same", agentId: "main", command: argv });
    trackLease(ha.leaseId);
    trackLease(hb.leaseId);
    const lookalike = await spawnUnowned(argv);
    expect(alive(lookalike.pid!)).toBe(true);

    const leaseB = (await b.listLeases())[0]!;
    const treeB = await b.verifyOwnedTree(leaseB);
    expect(treeB).not.toBeNull();
    const bPids = treeB!.members.map((m) => m.pid);
    expect(bPids).toContain(hb.rootPid);
    expect(bPids).not.toContain(lookalike.pid);
    // A cannot claim B's lease, whatever the live facts say
    expect(await a.verifyOwnedTree(leaseB)).toBeNull();

    // A forged lease in A's store naming the look-alike's pid and start time
    const facts = getProcessFacts();
    const d = (await facts.inspect(lookalike.pid!))!;
    const storeA = await openLeaseStore(dirA);
    const forged = await storeA.create({
      kind: "acpx",
      gatewayInstanceId: a.gatewayInstanceId,
      sessionKey: "forged",
      wrapperRoot: join(dirA, "acpx", "wrappers"),
      wrapperPath: ha.rootPid ? (await a.listLeases())[0]!.wrapperPath : "",
      commandHash: "0".repeat(64),
    });
    await storeA.update(forged.leaseId, { rootPid: lookalike.pid!, rootStartTime: String(d.startTime) });

    const startup = await a.reapStartupOrphans();
    const forgedEntry = startup.entries.find((e) => e.leaseId === forged.leaseId)!;
    expect(forgedEntry.verdict).toBe("mismatch");
    expect(forgedEntry.action).toBe("marked-lost");
    // A's live session is skipped, never reaped from under it
    expect(startup.entries.find((e) => e.leaseId === ha.leaseId)?.action).toBe("skipped-live");
    // B's leases are not even examined by A
    expect(startup.entries.some((e) => e.leaseId === hb.leaseId)).toBe(false);

    const closeA = await a.closeSession({ handle: ha });
    expect(closeA.outcome).toBe("closed");
    expect(alive(ha.rootPid)).toBe(false);
    expect(closeA.kill!.members.map((m) => m.pid).filter((p) => bPids.includes(p) || p === lookalike.pid)).toEqual([]);
    expect(bPids.every(alive)).toBe(true);
    expect(alive(lookalike.pid!)).toBe(true);

    const startupB = await b.reapStartupOrphans();
    expect(startupB.entries.every((e) => e.action === "skipped-live")).toBe(true);
    expect(bPids.every(alive)).toBe(true);
    expect(alive(lookalike.pid!)).toBe(true);
    expect((await b.closeSession({ handle: hb })).outcome).toBe("closed");
    expect(alive(lookalike.pid!)).toBe(true);
  });
});

describe("process supervisor runs sharing the store", () => {
  it("an open supervisor:x lease of a live process of this instance is left untouched by reapStartupOrphans", async () => {
    const dir = tempStateDir("supervisor");
    // every signal the controller asks for is recorded (and sent): "left untouched" is counted, not waited for
    const asked: number[] = [];
    const real = createSignaller(getProcessFacts());
    const signaller: ProcessSignaller = {
      raceFree: real.raceFree,
      signal: (p, st, sig) => (asked.push(p), real.signal(p, st, sig)),
    };
    const ctl = await createAcpxLifecycleController({
      stateDir: dir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      signaller,
    });
    controllers.push(ctl);
    const { lease, pid } = await spawnSupervisorStyleRun(dir, "x");
    expect(lease.sessionKey).toBe("supervisor:x");
    expect(lease.gatewayInstanceId).toBe(ctl.gatewayInstanceId);
    // the control: ownership alone would call it this instance's and reap it
    const v = await explainLease(lease, getProcessFacts(), { gatewayInstanceId: ctl.gatewayInstanceId });
    expect(v.verdict).toBe("owned");
    expect(v.tree!.members.map((m) => m.pid)).toContain(pid);

    const dry = await ctl.reapStartupOrphans({ dryRun: true });
    const rep = await ctl.reapStartupOrphans();
    for (const r of [dry, rep]) {
      expect(r.examined).toBe(0);
      expect(r.entries.some((e) => e.leaseId === lease.leaseId)).toBe(false);
    }
    expect(rep.snapshots).toBe(0);
    expect(asked).toEqual([]);
    expect(alive(pid)).toBe(true);
    const store = await openLeaseStore(dir);
    expect((await store.get(lease.leaseId))?.state).toBe("open");
  });
});

describe("legacy session records (no leaseId)", () => {
  it("verifiable (live root, command matches): reaped and the record retired", async () => {
    const dir = tempStateDir("legacy-ok");
    const ctl = await newController(dir);
    const pidfile = join(dir, "legacy.json");
    const argv = agentArgv({ kind: "plain", surviveStdinClose: true, pidfile });
    const legacy = await spawnUnowned(argv);
    const pids = await readPidfile(pidfile);
    const sessions = await openSessionStore(dir);
    await sessions.put({ sessionKey: "legacy:ok", pid: legacy.pid!, command: argv });
    const r = await ctl.closeSession({ handle: { sessionKey: "legacy:ok" } });
    expect(r).toMatchObject({ path: "legacy", outcome: "closed", verdict: "owned" });
    expect(r.evidence).toContainEqual({ check: "command", result: "match", code: "same-command" });
    expect(alive(legacy.pid!)).toBe(false);
    expect(alive(pids.grandchildPid!)).toBe(false);
    expect(await sessions.get("legacy:ok")).toBeNull();
  });

  it("shell-quoted legacy command string still verifies against the live argv", async () => {
    const dir = tempStateDir("legacy-quoted");
    const ctl = await newController(dir);
    const argv = agentArgv({ surviveStdinClose: true, extra: [] });
    const legacy = await spawnUnowned(argv);
    const sessions = await openSessionStore(dir);
    await sessions.put({ sessionKey: "legacy:quoted", pid: legacy.pid!, command: argv.map((a) => `'${a}'`).join(" ") });
    const r = await ctl.closeSession({ handle: { sessionKey: "legacy:quoted" } });
    expect(r.outcome).toBe("closed");
    expect(alive(legacy.pid!)).toBe(false);
  });

  it("unverifiable (command differs, or a wrapper outside wrapperRoot): left alone, record kept", async () => {
    const dir = tempStateDir("legacy-bad");
    const ctl = await newController(dir);
    const argv = agentArgv({ surviveStdinClose: true });
    const victim = await spawnUnowned(argv);
    const sessions = await openSessionStore(dir);
    await sessions.put({
      sessionKey: "legacy:cmd",
      pid: victim.pid!,
      command: [process.execPath, "/some/other/adapter.js"],
    });
    const r1 = await ctl.closeSession({ handle: { sessionKey: "legacy:cmd" } });
    expect(r1).toMatchObject({ path: "legacy", outcome: "left-alone", verdict: "mismatch" });
    expect(r1.kill).toBeUndefined();

    await sessions.put({
      sessionKey: "legacy:wrapper",
      pid: victim.pid!,
      command: argv,
      wrapperPath: "/elsewhere/wrapper.mjs",
    });
    const r2 = await ctl.closeSession({ handle: { sessionKey: "legacy:wrapper" } });
    expect(r2.outcome).toBe("left-alone");
    expect(alive(victim.pid!)).toBe(true);
    expect(await sessions.get("legacy:cmd")).not.toBeNull();
    expect(await sessions.get("legacy:wrapper")).not.toBeNull();
  });

  it("a legacy record whose pid is gone: nothing signalled, record retired", async () => {
    const dir = tempStateDir("legacy-gone");
    const ctl = await newController(dir);
    const c = startUnowned(["/bin/sh", "-c", "exit 0"]);
    await new Promise((r) => c.once("exit", r));
    const sessions = await openSessionStore(dir);
    await sessions.put({ sessionKey: "legacy:gone", pid: c.pid!, command: ["/bin/sh", "-c", "exit 0"] });
    const r = await ctl.closeSession({ handle: { sessionKey: "legacy:gone" } });
    expect(r).toMatchObject({ path: "legacy", outcome: "lost", verdict: "gone" });
  });
});
