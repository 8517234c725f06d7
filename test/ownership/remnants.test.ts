/**
 * Remnants (a lease whose root is gone or reused, with processes that still
 * carry its markers), the boot clock that dates them, killLeaseVerification,
 * and the reaper's pickup of new members of a verified process group.
 * Simulator rows: every row states the verdict, what is reaped, and the exact
 * signal list (an empty one included).
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { endianness } from "node:os";
import { describe, expect, it } from "vitest";
import {
  explainLease,
  killLeaseVerification,
  killOwnedTree,
  START_CLOCK_SLACK_MS,
  startTimeToEpochMs,
  verifyLeases,
  verifyOwnedTree,
} from "../../src/ownership/index.js";
import { judgeCarrier, type RemnantContext } from "../../src/ownership/verify/remnants.js";
import { parseAuxvClockTicks, parseBtimeMs, readStartClock } from "../../src/ownership/verify/start-clock.js";
import type { ProcessDetails } from "../../src/facts/types.js";
import {
  A,
  adapter,
  BOOT,
  ENV,
  G,
  grandchild,
  lease,
  nameOf,
  NS,
  P,
  RecordingSignaller,
  SimFacts,
  unrelated,
  W,
  wrapper,
  type SimProc,
} from "./sim.js";
import { CLOCK, MY, N, REAP, remnantFamily, rows } from "./remnants-rows.js";

describe("remnants of a vanished root (simulator)", () => {
  for (const row of rows) {
    it(row.name, async () => {
      const sim = row.facts ? row.facts() : new SimFacts();
      row.setup(sim);
      const sig = new RecordingSignaller(sim);
      const v = await explainLease(row.lease ?? lease(), sim, {
        ...(row.gatewayInstanceId ? { gatewayInstanceId: row.gatewayInstanceId } : {}),
        ...(row.startClock !== undefined ? { startClock: row.startClock } : {}),
      });
      const why = JSON.stringify(v.evidence);
      expect(v.verdict, why).toBe(row.verdict);
      expect(v.tree).toBeNull();
      expect(v.remnants?.members.map((m) => nameOf(m.pid)) ?? null, why).toEqual(row.remnants ?? null);
      if (v.remnants) expect(v.remnants.members.at(-1)).toBe(v.remnants.root);
      // the structured outcome agrees with what was found; "none-found" only when nothing was refused either
      if (v.remnants) expect(v.remnantSearch).toBe("found");
      else expect(["none-found", "inconclusive", "not-run"]).toContain(v.remnantSearch);
      if (v.verdict !== "gone") expect(v.remnantSearch).toBe("not-run");
      if (row.search) expect(v.remnantSearch, why).toBe(row.search);
      // none-found: a search that ran (not blocked) and left no candidate it could not judge
      if (v.remnantSearch === "none-found" && v.evidence.some((e) => e.check === "remnant-env")) {
        expect(v.evidence.find((e) => e.check === "remnant-env")?.code, why).toBe("none-proven");
        expect(v.remnantsUncleared, why).toBe(0);
      }
      if (row.evidence) {
        const [check, result, code, words] = row.evidence;
        const hit = v.evidence.find(
          (e) =>
            e.check === check &&
            e.result === result &&
            (!code || e.code === code) &&
            (!words || words.test(e.detail ?? "")),
        );
        expect(hit, why).toBeDefined();
      }
      if (row.refusals) expect(v.remnantRefusals, why).toEqual(row.refusals);
      const r = await killLeaseVerification(v, { facts: sim, signaller: sig, ...REAP });
      expect(r.killed).toBe(row.remnants !== undefined);
      expect(r.target).toBe(row.remnants !== undefined ? "remnants" : null);
      expect(r.report === null).toBe(row.remnants === undefined);
      expect(sig.log).toEqual(row.signals);
    });
  }

  it("verifyOwnedTree still answers null for a gone root that has remnants", async () => {
    const sim = new SimFacts();
    remnantFamily()(sim);
    expect(await verifyOwnedTree(lease(), sim)).toBeNull();
    expect((await explainLease(lease(), sim)).remnants).not.toBeNull();
  });

  it("an owned lease reports a tree and no remnants; killLeaseVerification reaps the tree", async () => {
    const sim = new SimFacts();
    sim
      .add(wrapper({ uid: MY }))
      .add(adapter({ uid: MY }))
      .add(grandchild({ uid: MY }));
    const v = await explainLease(lease(), sim);
    expect(v.verdict).toBe("owned");
    expect(v.remnants).toBeNull();
    expect(v.evidence.some((e) => e.check.startsWith("remnant"))).toBe(false);
    const sig = new RecordingSignaller(sim);
    const r = await killLeaseVerification(v, { facts: sim, signaller: sig, ...REAP });
    expect([r.killed, r.target]).toEqual([true, "tree"]);
    expect(sig.log).toEqual(["SIGTERM G", "SIGTERM A", "SIGTERM W"]);
  });

  it("verifyLeases keeps one snapshot and one env read per process for owned, remnant and empty leases together", async () => {
    const sim = new SimFacts();
    sim
      .add(wrapper({ uid: MY }))
      .add(adapter({ uid: MY }))
      .add(grandchild({ uid: MY }))
      .add(unrelated({ uid: MY }));
    const env2 = { OPENCLAW_ACPX_LEASE_ID: "lease-2", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-A" };
    sim.add({
      name: "A2",
      pid: P + 30,
      ppid: 1,
      pgid: P + 30,
      sid: P + 30,
      uid: MY,
      state: "S",
      startTime: "5101",
      env: env2,
    });
    sim.add({
      name: "G2",
      pid: P + 31,
      ppid: P + 30,
      pgid: P + 30,
      sid: P + 30,
      uid: MY,
      state: "S",
      startTime: "5102",
      env: env2,
    });
    const leases = [
      lease(),
      lease({ leaseId: "lease-2", rootPid: P + 29, rootStartTime: "5100", processGroupId: P + 30 }),
      lease({ leaseId: "lease-3", rootPid: P + 50, rootStartTime: "5200", processGroupId: undefined }),
    ];
    const vs = await verifyLeases(leases, sim);
    expect(vs.map((v) => v.verdict)).toEqual(["owned", "gone", "gone"]);
    expect(vs[1]!.remnants?.members.map((m) => m.pid)).toEqual([P + 31, P + 30]);
    expect(vs[2]!.remnants).toBeNull();
    expect(vs.map((v) => v.remnantSearch)).toEqual(["not-run", "found", "none-found"]);
    expect(vs[0]!.tree?.members.map((m) => m.pid)).toEqual([G, A, W]);
    expect(sim.snapshots).toBe(1);
    const seen = new Set(sim.inspected);
    expect(seen.size, `pids inspected more than once: ${sim.inspected.join(",")}`).toBe(sim.inspected.length);
  });
});

describe("judgeCarrier (each remnant check on its own, behind the env pass's pre-filter)", () => {
  const ctx: RemnantContext = {
    facts: { backend: "procfs", identityStrength: "exact" },
    myUid: MY,
    hostBootId: BOOT,
    hostPidNamespace: NS,
    ancestors: new Set([process.pid, P + 20]),
    clock: CLOCK,
  };
  const proc = { pid: A, ppid: 1, pgid: A, sid: W, uid: MY, state: "S", startTime: "5001" };
  const details = (over: Partial<ProcessDetails> = {}): ProcessDetails => ({
    ...proc,
    exePath: null,
    argv: null,
    env: { ...ENV },
    envReadable: true,
    bootId: BOOT,
    pidNamespace: NS,
    ...over,
  });
  const l = lease({ startedAt: 1_050_010 - 1000 });

  it("accepts a carrier that passes every check, dated both ways", () => {
    expect(judgeCarrier(l, proc, details(), ctx)).toEqual({ ok: true, start: "both" });
  });

  it("refuses each failed check with its reason", () => {
    const cases: [string, ReturnType<typeof judgeCarrier>][] = [
      ["instance", judgeCarrier(l, proc, details({ env: { ...ENV, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } }), ctx)],
      [
        "no instance",
        judgeCarrier(
          l,
          proc,
          details({ env: { OPENCLAW_ACPX_LEASE_ID: "lease-1", OPENCLAW_GATEWAY_INSTANCE_ID: null } }),
          ctx,
        ),
      ],
      ["unreadable", judgeCarrier(l, proc, details({ envReadable: false }), ctx)],
      ["boot", judgeCarrier(l, proc, details({ bootId: "boot-bbbb" }), ctx)],
      ["boot unknown", judgeCarrier(l, proc, details({ bootId: undefined }), ctx)],
      ["ns", judgeCarrier(l, proc, details({ pidNamespace: "pid:[1]" }), ctx)],
      ["host ns", judgeCarrier(l, proc, details(), { ...ctx, hostPidNamespace: "pid:[1]" })],
      ["uid", judgeCarrier(l, { ...proc, uid: MY + 1 }, details({ uid: MY + 1 }), ctx)],
      ["ancestor", judgeCarrier(l, { ...proc, pid: P + 20 }, details({ pid: P + 20 }), ctx)],
      ["pid 1", judgeCarrier(l, { ...proc, pid: 1 }, details({ pid: 1 }), ctx)],
      ["before root", judgeCarrier(l, { ...proc, startTime: "4999" }, details({ startTime: "4999" }), ctx)],
      ["before lease", judgeCarrier(lease({ startedAt: 1_050_010 + START_CLOCK_SLACK_MS + 1 }), proc, details(), ctx)],
      ["not comparable", judgeCarrier(lease({ rootStartTime: undefined }), proc, details(), { ...ctx, clock: null })],
    ];
    expect(cases.map(([n, j]) => [n, j.ok ? "ok" : j.why])).toEqual([
      ["instance", "markers"],
      ["no instance", "markers"],
      ["unreadable", "env-unreadable"],
      ["boot", "boot-id"],
      ["boot unknown", "boot-id"],
      ["ns", "pid-namespace"],
      ["host ns", "pid-namespace"],
      ["uid", "uid"],
      ["ancestor", "guard"],
      ["pid 1", "guard"],
      ["before root", "started-early"],
      ["before lease", "started-early"],
      ["not comparable", "start-unknown"],
    ]);
  });

  it("the boot clock's slack absorbs btime's whole-second rounding, no more", () => {
    const within = lease({ rootStartTime: undefined, startedAt: 1_050_010 + START_CLOCK_SLACK_MS });
    expect(judgeCarrier(within, proc, details(), ctx)).toEqual({ ok: true, start: "epoch" });
    const beyond = lease({ rootStartTime: undefined, startedAt: 1_050_010 + START_CLOCK_SLACK_MS + 1 });
    expect(judgeCarrier(beyond, proc, details(), ctx)).toEqual({ ok: false, why: "started-early" });
  });
});

describe("start clock", () => {
  it("parses btime from /proc/stat text", () => {
    expect(parseBtimeMs("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")).toBe(1_700_000_000_000);
    expect(parseBtimeMs("cpu 1\n")).toBeNull();
    expect(parseBtimeMs("btime -5\n")).toBeNull();
  });

  it("converts each backend's unit to epoch ms, and says null rather than guess", () => {
    expect(startTimeToEpochMs("5001", "procfs", CLOCK)).toBe(1_050_010);
    expect(startTimeToEpochMs("5001", "native", CLOCK, "linux")).toBe(1_050_010);
    expect(startTimeToEpochMs("5001", "procfs", null)).toBeNull();
    expect(startTimeToEpochMs("5001", "procfs", { bootTimeMs: 1, ticksPerSecond: 0 })).toBeNull();
    expect(startTimeToEpochMs("1700000000123456", "native", null, "darwin")).toBe(1_700_000_000_123.456);
    expect(startTimeToEpochMs("1700000000", "ps", null)).toBe(1_700_000_000_000);
    expect(startTimeToEpochMs("5001", "none", CLOCK)).toBeNull();
    for (const bad of ["", "-1", "1e3", "abc", " 5"]) expect(startTimeToEpochMs(bad, "procfs", CLOCK), bad).toBeNull();
  });

  it("reads CLK_TCK from an aux vector of either word size and byte order, and nothing else", () => {
    const vec = (bytes: 4 | 8, le: boolean, pairs: [number, number][]): Uint8Array => {
      const b = new DataView(new ArrayBuffer(pairs.length * 2 * bytes));
      pairs.forEach(([t, v], i) => {
        const at = i * 2 * bytes;
        if (bytes === 4) {
          b.setUint32(at, t, le);
          b.setUint32(at + 4, v, le);
        } else {
          b.setBigUint64(at, BigInt(t), le);
          b.setBigUint64(at + 8, BigInt(v), le);
        }
      });
      return new Uint8Array(b.buffer);
    };
    const typical: [number, number][] = [
      [33, 0x7ffd1234],
      [16, 0xbfebfbff],
      [6, 4096],
      [17, 100],
      [3, 0x400040],
      [0, 0],
    ];
    expect(parseAuxvClockTicks(vec(8, true, typical), 8, "LE")).toBe(100);
    expect(
      parseAuxvClockTicks(
        vec(4, false, [
          [6, 4096],
          [17, 250],
          [0, 0],
        ]),
        4,
        "BE",
      ),
    ).toBe(250);
    // absent, after AT_NULL, zero, truncated, unknown word size: null, never a guess
    expect(
      parseAuxvClockTicks(
        vec(8, true, [
          [6, 4096],
          [0, 0],
        ]),
        8,
        "LE",
      ),
    ).toBeNull();
    expect(
      parseAuxvClockTicks(
        vec(8, true, [
          [6, 4096],
          [0, 0],
          [17, 100],
        ]),
        8,
        "LE",
      ),
    ).toBeNull();
    expect(
      parseAuxvClockTicks(
        vec(8, true, [
          [17, 0],
          [0, 0],
        ]),
        8,
        "LE",
      ),
    ).toBeNull();
    expect(parseAuxvClockTicks(vec(8, true, [[17, 100]]).subarray(0, 12), 8, "LE")).toBeNull();
    expect(parseAuxvClockTicks(vec(8, true, typical), 2, "LE")).toBeNull();
  });

  const notLinux = process.platform !== "linux" ? "skipped: /proc start clock exists on Linux only" : null;
  if (notLinux) console.log(`[remnants.test] ${notLinux}`);
  it.skipIf(notLinux !== null)(
    `on this host, /proc/self/auxv's CLK_TCK is what getconf says${notLinux ? ` (${notLinux})` : ""}`,
    async () => {
      const word = process.arch === "x64" || process.arch === "arm64" ? 8 : 4;
      const fromAuxv = parseAuxvClockTicks(readFileSync("/proc/self/auxv"), word, endianness());
      const fromGetconf = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
      expect(fromAuxv).toBe(fromGetconf);
      expect((await readStartClock())?.ticksPerSecond).toBe(fromGetconf);
    },
  );
  it.skipIf(notLinux !== null)(
    `on this host, this process's own start converts to about now − uptime${notLinux ? ` (${notLinux})` : ""}`,
    async () => {
      const clock = await readStartClock();
      expect(clock).not.toBeNull();
      const { getProcessFacts } = await import("../../src/facts/index.js");
      const self = (await getProcessFacts({ backend: "procfs" }).inspect(process.pid))!;
      const epoch = startTimeToEpochMs(self.startTime, "procfs", clock)!;
      const expected = Date.now() - process.uptime() * 1000;
      expect(Math.abs(epoch - expected)).toBeLessThan(START_CLOCK_SLACK_MS);
    },
  );
});

describe("reaper: new members of a verified process group", () => {
  // G forks N on its way out of SIGTERM; N lands in the adapter group, re-parented to init (no parent link to any member)
  const newcomer = (over: Partial<SimProc> = {}): SimProc => ({
    name: "N",
    pid: N,
    ppid: 1,
    pgid: A,
    sid: W,
    uid: MY,
    state: "S",
    startTime: "5010",
    env: {},
    ...over,
  });
  const setup = (n: SimProc) => {
    const sim = new SimFacts();
    sim
      .add(wrapper({ uid: MY }))
      .add(adapter({ uid: MY }))
      .add(grandchild({ uid: MY, onTermSpawn: n }));
    return sim;
  };
  const name = (pid: number) => (pid === N ? "N" : nameOf(pid));

  it("verification marks the recorded group on the tree only when it matched", async () => {
    const sim = setup(newcomer());
    const v = await explainLease(lease(), sim);
    expect(v.tree?.group).toBe(A);
    const noGroup = await explainLease(lease({ processGroupId: undefined }), sim);
    expect(noGroup.verdict).toBe("owned");
    expect(noGroup.tree?.group).toBeUndefined();
  });

  it("a newcomer in the group's recorded session is reaped with its own start time", async () => {
    const sim = setup(newcomer());
    const v = await explainLease(lease(), sim);
    const sig = new RecordingSignaller(sim);
    const r = await killLeaseVerification(v, { facts: sim, signaller: sig, ...REAP });
    expect(sig.log).toEqual(["SIGTERM G", "SIGTERM A", "SIGTERM W", "SIGTERM N"]);
    expect(r.report!.results.map((x) => [name(x.pid), x.startTime, x.outcome])).toContainEqual([
      "N",
      "5010",
      "exited-after-term",
    ]);
    expect(sim.table.has(N)).toBe(false);
  });

  it("a stubborn newcomer is killed after the grace period", async () => {
    const sim = setup(newcomer({ onTerm: "ignore" }));
    const v = await explainLease(lease(), sim);
    const sig = new RecordingSignaller(sim);
    const r = await killOwnedTree(v.tree!, { facts: sim, signaller: sig, ...REAP });
    expect(sig.log).toEqual(["SIGTERM G", "SIGTERM A", "SIGTERM W", "SIGTERM N", "SIGKILL N"]);
    expect(r.results.find((x) => x.pid === N)?.outcome).toBe("killed");
  });

  it("a process with the group's number in another session (a recycled group id) is untouched", async () => {
    const sim = setup(newcomer({ sid: N }));
    const v = await explainLease(lease(), sim);
    const sig = new RecordingSignaller(sim);
    await killOwnedTree(v.tree!, { facts: sim, signaller: sig, ...REAP });
    expect(sig.log).toEqual(["SIGTERM G", "SIGTERM A", "SIGTERM W"]);
    expect(sim.table.has(N)).toBe(true);
  });

  it("without a verified group only parent links are followed", async () => {
    const sim = setup(newcomer());
    const v = await explainLease(lease(), sim);
    const sig = new RecordingSignaller(sim);
    await killOwnedTree({ root: v.tree!.root, members: v.tree!.members }, { facts: sim, signaller: sig, ...REAP });
    expect(sig.log).toEqual(["SIGTERM G", "SIGTERM A", "SIGTERM W"]);
    expect(sim.table.has(N)).toBe(true);
  });

  it("opts.group is validated and names itself; our own group is never watched", async () => {
    const sim = setup(newcomer());
    const v = await explainLease(lease(), sim);
    const sig = new RecordingSignaller(sim);
    await expect(killOwnedTree(v.tree!, { facts: sim, signaller: sig, ...REAP, group: 1 })).rejects.toThrow(
      /opts\.group/,
    );
    await expect(killOwnedTree(v.tree!, { facts: sim, signaller: sig, ...REAP, group: 2.5 })).rejects.toThrow(
      TypeError,
    );
    expect(sig.log).toEqual([]);
    const { ownProcessGroupId } = await import("../../src/facts/guards.js");
    const own = ownProcessGroupId()!;
    // a tree whose members claim our own group: the group is not watched, N (put in our group) is untouched
    const sim2 = new SimFacts();
    sim2.add(wrapper({ uid: MY, pgid: own, onTermSpawn: newcomer({ pgid: own, sid: W }) }));
    const sig2 = new RecordingSignaller(sim2);
    const root = [...(await sim2.snapshot()).processes.values()].find((p) => p.pid === W)!;
    await killOwnedTree({ root, members: [root], group: own }, { facts: sim2, signaller: sig2, ...REAP });
    expect(sig2.log).toEqual(["SIGTERM W"]);
  });
});
