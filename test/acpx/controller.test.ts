/**
 * The lifecycle controller over real processes and real ACP: close reaps the
 * wrapper, a stubborn adapter and every grandchild variant; cancel signals
 * nothing and the session stays usable; a close racing a prompt rejects it;
 * every ensureSession failure path settles its lease and leaves no process.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxEnsureError, AcpxSessionClosedError } from "../../src/acpx/report/errors.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessFacts, ProcessSignaller } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  GRANDCHILD_KINDS,
  leaseCarriers,
  readPidfile,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "./controller-helpers.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

const controllers = disposeAfterEach();
async function newController(
  label: string,
  extra?: { handshakeTimeoutMs?: number; facts?: ProcessFacts; signaller?: ProcessSignaller },
) {
  const stateDir = tempStateDir(label);
  // a test that hands in failing facts or a signaller drives the uncontained rules: with containment the
  // lease's cgroup (kernel evidence those fakes cannot touch) would settle it instead (containment.test.ts)
  const off = extra?.facts !== undefined || extra?.signaller !== undefined ? { containment: "off" as const } : {};
  const ctl = await createAcpxLifecycleController({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    ...off,
    ...extra,
  });
  controllers.push(ctl);
  return { ctl, stateDir };
}

describe("closeSession reaps the verified tree", () => {
  for (const kind of GRANDCHILD_KINDS) {
    it(`wrapper, SIGTERM-ignoring adapter and a ${kind} grandchild are all gone, lease closed`, async () => {
      const { ctl, stateDir } = await newController(`close-${kind}`);
      const pidfile = join(stateDir, "agent.json");
      const h = await ctl.ensureSession({
        sessionKey: `agent:main:acp:${kind}`,
        agentId: "main",
        command: agentArgv({ kind, stubborn: true, surviveStdinClose: true, pidfile }),
      });
      trackLease(h.leaseId);
      trackPid(h.rootPid);
      const pids = await readPidfile(pidfile);
      expect(pids.grandchildPid).toBeGreaterThan(1);
      const all = [h.rootPid, pids.pid, pids.grandchildPid!];
      expect(all.every(alive)).toBe(true);
      expect(leaseCarriers(h.leaseId).sort()).toEqual(expect.arrayContaining(all));

      const report = await ctl.closeSession({ handle: h, reason: "test close" });
      expect(report.outcome).toBe("closed");
      expect(report.leaseState).toBe("closed");
      expect(report.verdict).toBe("owned");
      const reapedPids = report.kill!.members.map((m) => m.pid);
      expect(reapedPids).toEqual(expect.arrayContaining(all));
      // leaves first, the wrapper (root) last
      expect(reapedPids[reapedPids.length - 1]).toBe(h.rootPid);
      expect(all.filter(alive)).toEqual([]);
      expect(leaseCarriers(h.leaseId)).toEqual([]);
      const lease = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!;
      expect(lease.state).toBe("closed");
      expect(lease.rootPid).toBe(h.rootPid);
      expect(lease.processGroupId).toBe(pids.pgid);
    });
  }

  it("is idempotent: a second close and an unknown key are no-ops", async () => {
    const { ctl } = await newController("idem");
    const h = await ctl.ensureSession({ sessionKey: "k-idem", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
    const again = await ctl.closeSession({ handle: { sessionKey: "k-idem" } });
    expect(again.outcome).toBe("noop");
    expect(again.leaseState).toBe("closed");
    const unknown = await ctl.closeSession({ handle: { sessionKey: "never-seen" } });
    expect(unknown).toMatchObject({ outcome: "noop", path: "none" });
  });
});

describe("cancelTurn", () => {
  it("cancels the running turn without signalling; processes stay and the next prompt works", async () => {
    const { ctl, stateDir } = await newController("cancel");
    const pidfile = join(stateDir, "agent.json");
    const h = await ctl.ensureSession({
      sessionKey: "k-cancel",
      agentId: "main",
      command: agentArgv({ kind: "plain", turn: "until-cancel", pidfile }),
    });
    trackLease(h.leaseId);
    const pids = await readPidfile(pidfile);
    const all = [h.rootPid, pids.pid, pids.grandchildPid!];

    // no pause anywhere: prompt() holds the session before its first await, and the
    // session/cancel notification follows the prompt request down the same stream
    const turn = ctl.prompt(h, "run until cancelled");
    await expect(ctl.prompt(h, "second at once")).rejects.toThrow(/already has a prompt running/);
    await ctl.cancelTurn(h);
    await expect(turn).resolves.toEqual({ stopReason: "cancelled" });
    expect(all.every(alive)).toBe(true);

    // "no signal was sent" is judged after events, not after a pause: a whole
    // further turn through the adapter (prompt, cancel, answer) has happened
    const next = ctl.prompt(h, "next turn");
    await ctl.cancelTurn(h);
    await expect(next).resolves.toEqual({ stopReason: "cancelled" });
    expect(all.every(alive)).toBe(true);
    const lease = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!;
    expect(lease.state).toBe("open");
    await ctl.closeSession({ handle: h });
  });

  it("a close racing a running prompt makes that prompt reject with a clear error", async () => {
    const { ctl } = await newController("race");
    const h = await ctl.ensureSession({
      sessionKey: "k-race",
      agentId: "main",
      command: agentArgv({ turn: "until-cancel" }),
    });
    trackLease(h.leaseId);
    const turn = ctl.prompt(h, "long");
    const settled = turn.then(
      () => null,
      (e: unknown) => e,
    );
    // the prompt holds the session from the call on (before its first await): the close races a running turn
    const report = await ctl.closeSession({ handle: h, reason: "operator closed it" });
    const err = await settled;
    expect(err).toBeInstanceOf(AcpxSessionClosedError);
    expect((err as Error).message).toMatch(/was closed while a prompt was running \(operator closed it\)/);
    expect(report.interruptedPrompt).toBe(true);
    expect(report.outcome).toBe("closed");
    await expect(ctl.prompt(h, "after close")).rejects.toThrow(/no live ACP session/);
  });

  it("serializes calls for one session key: concurrent ensures share one session", async () => {
    const { ctl } = await newController("serial");
    const input = { sessionKey: "k-serial", agentId: "main", command: agentArgv({}) };
    const [a, b] = await Promise.all([ctl.ensureSession(input), ctl.ensureSession(input)]);
    trackLease(a.leaseId);
    expect(b.leaseId).toBe(a.leaseId);
    expect((await ctl.listLeases()).filter((l) => l.sessionKey === "k-serial")).toHaveLength(1);
    expect(await ctl.prompt(a, "hi")).toEqual({ stopReason: "end_turn" });
    await ctl.closeSession({ handle: a });
  });
});

describe("ensureSession failure paths settle the lease and leave nothing running", () => {
  async function expectSettled(ctl: AcpxLifecycleController, err: unknown, failure: string, message: RegExp) {
    expect(err).toBeInstanceOf(AcpxEnsureError);
    const e = err as AcpxEnsureError;
    expect(e.failure).toBe(failure);
    expect(e.message).toMatch(message);
    trackLease(e.leaseId!);
    const lease = (await ctl.listLeases()).find((l) => l.leaseId === e.leaseId)!;
    expect(["closed", "lost"]).toContain(lease.state);
    expect(lease.state).toBe(e.leaseState);
    expect(leaseCarriers(e.leaseId!)).toEqual([]);
    expect((await ctl.listLeases()).filter((l) => l.state === "open" || l.state === "closing")).toEqual([]);
  }
  const fail = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => e,
    );

  it("empty command: TypeError before any lease is written", async () => {
    const { ctl } = await newController("empty");
    await expect(ctl.ensureSession({ sessionKey: "k", agentId: "main", command: [] })).rejects.toThrow(TypeError);
    await expect(ctl.ensureSession({ sessionKey: "k", agentId: "main", command: [""] })).rejects.toThrow(
      /command\[0\]/,
    );
    expect(await ctl.listLeases()).toEqual([]);
  });

  it("missing executable: the wrapper's spawn-error names it", async () => {
    const { ctl } = await newController("missing");
    const err = await fail(
      ctl.ensureSession({ sessionKey: "k", agentId: "main", command: ["/nonexistent/acp-adapter", "--x"] }),
    );
    await expectSettled(ctl, err, "spawn-error", /\/nonexistent\/acp-adapter.*could not be started: ENOENT/);
  });

  for (const method of ["initialize", "session/new"] as const) {
    it(`adapter crashing on ${method}: named, reaped, settled`, async () => {
      const { ctl } = await newController("crash");
      const err = await fail(
        ctl.ensureSession({
          sessionKey: "k",
          agentId: "main",
          command: agentArgv({ kind: "setsid", extra: [`--crash-on=${method}`] }),
        }),
      );
      await expectSettled(
        ctl,
        err,
        "adapter-exited",
        new RegExp(`adapter exited during ACP ${method} \\(exit code 3\\)`),
      );
    });
  }

  it("adapter that never answers: handshake timeout, stubborn tree reaped", async () => {
    const { ctl } = await newController("never", { handshakeTimeoutMs: 1500 });
    const err = await fail(
      ctl.ensureSession({
        sessionKey: "k",
        agentId: "main",
        command: agentArgv({ kind: "double-fork", stubborn: true, surviveStdinClose: true, extra: ["--never-answer"] }),
      }),
    );
    await expectSettled(
      ctl,
      err,
      "handshake-timeout",
      /never answered ACP initialize within the handshake timeout \(1500 ms for the whole handshake\)/,
    );
    expect((err as AcpxEnsureError).leaseState).toBe("closed");
  });
});

describe("dispose", () => {
  it("leaves sessions running and refuses every call after it; the next controller on the state dir settles them", async () => {
    const { ctl, stateDir } = await newController("dispose");
    const h = await ctl.ensureSession({ sessionKey: "k-dispose", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    await ctl.dispose();
    // the disposed controller no longer speaks for the session (controller-dispose.test.ts covers every method)
    await expect(ctl.prompt(h, "still there")).rejects.toMatchObject({ name: "AcpxControllerDisposedError" });
    await expect(ctl.closeSession({ handle: h })).rejects.toMatchObject({ name: "AcpxControllerDisposedError" });
    expect(alive(h.rootPid)).toBe(true);
    const next = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(next);
    const reaped = await next.reapStartupOrphans();
    expect(reaped.entries.find((e) => e.leaseId === h.leaseId)?.stateAfter).toBe("closed");
    expect(alive(h.rootPid)).toBe(false);
  });
});

/**
 * Real facts that can be switched off: while `down` (or for the next
 * `failSnapshots` calls) snapshot() and inspect() throw, as a process list
 * that cannot be read would.
 */
function switchableFacts(): { facts: ProcessFacts; down: boolean; failSnapshots: number } {
  const real = getProcessFacts();
  const ctl = { down: false, failSnapshots: 0, facts: undefined as unknown as ProcessFacts };
  const broken = () => ctl.down || ctl.failSnapshots > 0;
  ctl.facts = {
    backend: real.backend,
    identityStrength: real.identityStrength,
    snapshot: () => {
      if (ctl.failSnapshots > 0) {
        ctl.failSnapshots--;
        return Promise.reject(new Error("process list unavailable (test)"));
      }
      return ctl.down ? Promise.reject(new Error("process list unavailable (test)")) : real.snapshot();
    },
    inspect: (pid, o) =>
      broken() ? Promise.reject(new Error("process list unavailable (test)")) : real.inspect(pid, o),
    inspectMany: (pids, o) => inspectEach(ctl.facts.inspect, pids, o, 8),
  };
  return ctl;
}

describe("the lease is settled by verification, never by the wrapper's exit alone", () => {
  it("close with the process list unavailable: nothing signalled, lease back to open; settled once facts answer", async () => {
    const sw = switchableFacts();
    const { ctl, stateDir } = await newController("unknown-close", { facts: sw.facts });
    const h = await ctl.ensureSession({
      sessionKey: "k-unknown",
      agentId: "main",
      command: agentArgv({ kind: "setsid" }),
    });
    trackLease(h.leaseId);
    sw.down = true;
    const r = await ctl.closeSession({ handle: h, reason: "facts down" });
    expect(r).toMatchObject({ outcome: "left-alone", leaseState: "open", verdict: "unknown" });
    expect(r.kill).toBeUndefined();
    // decided by the process list that could not be read
    expect(r.code).toBe("facts-unavailable");
    expect(r.evidence.at(-1)).toMatchObject({
      check: "process-list",
      result: "unknown",
      code: "process-list-unavailable",
    });
    // the words say the wrapper's exit was not taken for its tree's end
    expect(r.detail).toMatch(/proves nothing/);
    // the lifeline was ended (our pipe, not a signal): the wrapper cleaned its own tree and exited…
    expect(await waitFor(() => !alive(h.rootPid) && leaseCarriers(h.leaseId).length === 0, 10_000)).not.toBe(-1);
    // …and still the lease is not marked closed on that alone
    expect((await (await openLeaseStore(stateDir)).get(h.leaseId))?.state).toBe("open");

    sw.down = false;
    const again = await ctl.closeSession({ handle: { sessionKey: "k-unknown" } });
    expect(again).toMatchObject({ outcome: "lost", leaseState: "lost", verdict: "gone" });
    expect((await (await openLeaseStore(stateDir)).get(h.leaseId))?.state).toBe("lost");
  });

  it("close whose first verification fails: the facts are asked again after the lifeline and settle it", async () => {
    const sw = switchableFacts();
    const { ctl } = await newController("unknown-once", { facts: sw.facts });
    const h = await ctl.ensureSession({ sessionKey: "k-once", agentId: "main", command: agentArgv({}) });
    trackLease(h.leaseId);
    sw.failSnapshots = 1;
    const r = await ctl.closeSession({ handle: h });
    // the second look (after the wrapper exited) answered: gone, nothing to reap; the wrapper swept on the
    // lifeline's end and reported the adapter's exit, so it ended at our request: closed, not lost
    expect(r).toMatchObject({ outcome: "closed", leaseState: "closed", verdict: "gone", settledAs: "exit-observed" });
    expect(alive(h.rootPid)).toBe(false);
  });

  it("a failed ensure whose own reap was denied is not closed on the last look alone: the first reap's survivors keep it closing, a later reap settles it", async () => {
    // a signaller that never gets a signal through: every verified member "may still run" after the first pass
    const denying: ProcessSignaller = { raceFree: false, signal: () => Promise.resolve("denied") };
    const { ctl } = await newController("survivors", { handshakeTimeoutMs: 1000, signaller: denying });
    const err = await ctl
      .ensureSession({
        sessionKey: "k-surv",
        agentId: "main",
        command: agentArgv({ kind: "plain", extra: ["--never-answer"] }),
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(AcpxEnsureError);
    const e = err as AcpxEnsureError;
    trackLease(e.leaseId!);
    expect(e.failure).toBe("handshake-timeout");
    // the wrapper cleaned its own tree when the lifeline closed, and the second look found nothing
    // carrying the lease's markers; but the first reap left members that may still run (denied), and a
    // member tied only by parent links carries no marker to be found by: not proven gone → closing
    expect(leaseCarriers(e.leaseId!)).toEqual([]);
    expect(e.leaseState).toBe("closing");
    expect((await ctl.listLeases()).find((l) => l.leaseId === e.leaseId)?.state).toBe("closing");
    // the next reap (no reap of its own ran, nothing is left): settled without a signal
    const rep = await ctl.reapStartupOrphans();
    expect(rep.entries.find((x) => x.leaseId === e.leaseId)).toMatchObject({ verdict: "gone", stateAfter: "lost" });
  });
});
