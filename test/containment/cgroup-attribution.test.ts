/**
 * The drain's attribution rule (is a member of a lease cgroup the lease's
 * own?) as a table, over a made-up process table: the rows of its header
 * plus the forgeries it must not fall for (markers alone never spare a
 * process). The real-process cases are test/adversarial/cgroup-foreign-members.test.ts
 * and cgroup-boundary.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ownProcessGroupId } from "../../src/facts/guards.js";
import {
  attributeMember,
  type AttributionInput,
  type AttributionOwner,
  type LinkFacts,
} from "../../src/ownership/terminate/cgroup-attribution.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY, type ProcessLease } from "../../src/ownership/leases/types.js";

const GW = process.pid;
const INSTANCE = "inst-a";
// pids far above anything live here (below the 2^22 the guards allow)
const P = (n: number) => 4_000_000 + n;
const GROUP = ownProcessGroupId() ?? -1;

const owner: AttributionOwner = {
  leaseId: "hostile",
  gatewayInstanceId: INSTANCE,
  rootPid: P(1),
  rootStartTime: "1000",
  startedAt: 0,
};

const other: ProcessLease = {
  leaseId: "innocent",
  kind: "acpx",
  gatewayInstanceId: INSTANCE,
  sessionKey: "k",
  wrapperRoot: "/w",
  wrapperPath: "/w/x",
  rootPid: P(50),
  rootStartTime: "2000",
  commandHash: "h",
  startedAt: 0,
  state: "open",
  cgroup: { path: "/sys/fs/cgroup/x/proclease/inst-a/innocent", id: "77" },
};

/** pid -> [ppid, start, pgid?]; anything else is gone */
const table: Record<number, [number, string, number?]> = {
  [P(1)]: [GW, "1000", GROUP], // the hostile lease's root: a child of the gateway, in its group
  [P(2)]: [P(1), "1100"], // the hostile adapter
  [P(3)]: [1, "1200"], // an orphan escapee, started after the lease
  [P(4)]: [1, "500"], // an orphan started before the lease (a stranger)
  [P(5)]: [1, "2100"], // an orphan carrying the innocent lease's markers, started after its root
  [P(6)]: [1, "1500"], // an orphan carrying them too, but started before the innocent root: a forger
  [P(7)]: [1, "2200"], // an orphan naming a settled lease
  [P(8)]: [1, "2300"], // an orphan naming another instance's lease
  [P(50)]: [GW, "2000", GROUP], // the innocent lease's root
  [P(51)]: [P(50), "2050"], // the innocent adapter
  [P(60)]: [GW, "1300", GROUP], // a child of the gateway that is no lease's root (the keeper), forging markers
  [P(61)]: [P(60), "1310"],
  [P(70)]: [1, "1400"], // a live process outside the cgroup (not a member)
  [P(71)]: [P(70), "1450"], // its child, moved in
  [P(80)]: [1, "1600", GROUP], // in the gateway's process group
};
const markers: Record<number, Record<string, string | null>> = {
  [P(5)]: { [LEASE_ENV_KEY]: "innocent", [INSTANCE_ENV_KEY]: INSTANCE },
  [P(6)]: { [LEASE_ENV_KEY]: "innocent", [INSTANCE_ENV_KEY]: INSTANCE },
  [P(7)]: { [LEASE_ENV_KEY]: "settled", [INSTANCE_ENV_KEY]: INSTANCE },
  [P(8)]: { [LEASE_ENV_KEY]: "theirs", [INSTANCE_ENV_KEY]: "inst-b" },
  [P(50)]: { [LEASE_ENV_KEY]: "innocent", [INSTANCE_ENV_KEY]: INSTANCE },
  [P(60)]: { [LEASE_ENV_KEY]: "innocent", [INSTANCE_ENV_KEY]: INSTANCE },
};
const leases: Record<string, ProcessLease> = {
  innocent: other,
  settled: { ...other, leaseId: "settled", state: "closed", rootPid: P(90), rootStartTime: "1" },
};

function input(members: number[], withOwner = true): AttributionInput {
  return {
    owner: withOwner ? owner : null,
    members: new Set(members),
    ancestors: new Set(),
    readers: {
      stat: (pid): LinkFacts | null => {
        const r = table[pid];
        return r ? { ppid: r[0], startTime: r[1], pgid: r[2] ?? pid } : null;
      },
      markers: async (pid) => markers[pid] ?? { [LEASE_ENV_KEY]: null, [INSTANCE_ENV_KEY]: null },
      lease: async (id) => leases[id] ?? null,
      startedBeforeLease: (start) => Number(start) < Number(owner.rootStartTime),
    },
  };
}

// every pid but P(70), the live process outside the cgroup
const all = Object.keys(table)
  .map(Number)
  .filter((p) => p !== P(70));
async function judge(pid: number, members = all, withOwner = true) {
  const a = await attributeMember({ pid, startTime: table[pid]![1] }, input(members, withOwner));
  return a.own ? { own: true } : { own: false, code: a.code, to: a.to.kind };
}

describe("which members of a lease cgroup are the lease's own", () => {
  it.each([
    ["the lease's root", P(1), { own: true }],
    ["its adapter (parent links to the root)", P(2), { own: true }],
    ["an orphan started after the lease (a setsid escapee whose wrapper died)", P(3), { own: true }],
    ["an orphan started before the lease", P(4), { own: false, code: "started-before-lease", to: "foreign" }],
    [
      "an orphan with another live lease's markers, started after that root: it goes to that lease's cgroup",
      P(5),
      { own: false, code: "another-lease-markers", to: "lease" },
    ],
    ["forged markers of a lease younger than the process spare nothing", P(6), { own: true }],
    ["markers of a settled lease spare nothing", P(7), { own: true }],
    ["markers of another gateway instance spare nothing", P(8), { own: true }],
    ["another lease's root (pid and start time), moved in", P(50), { own: false, code: "another-lease", to: "lease" }],
    ["that root's adapter", P(51), { own: false, code: "another-lease", to: "lease" }],
    [
      "a child of the gateway that is no lease's root, whatever its markers say",
      P(60),
      { own: false, code: "gateway-side", to: "home" },
    ],
    ["and its child", P(61), { own: false, code: "gateway-side", to: "home" }],
    [
      "a process whose parent line passes a live process outside the cgroup",
      P(71),
      { own: false, code: "born-outside", to: "foreign" },
    ],
    ["a member of the gateway's process group", P(80), { own: false, code: "gateway-side", to: "home" }],
  ])("%s", async (_what, pid, want) => {
    expect(await judge(pid)).toEqual(want);
  });

  it("this process itself goes home, never signalled", async () => {
    const a = await attributeMember({ pid: process.pid, startTime: "1" }, input([process.pid]));
    expect(a).toMatchObject({ own: false, code: "this-process", to: { kind: "home" } });
  });

  it("a moved-in adapter whose own root stayed outside is still that lease's", async () => {
    expect(
      await judge(
        P(51),
        all.filter((p) => p !== P(50)),
      ),
    ).toEqual({
      own: false,
      code: "another-lease",
      to: "lease",
    });
  });

  it("without a lease (a run of its own) a child of the gateway may be the run's root, and no start is compared", async () => {
    expect(await judge(P(61), all, false)).toEqual({ own: true });
    expect(await judge(P(4), all, false)).toEqual({ own: true });
    expect(await judge(P(71), all, false)).toEqual({ own: false, code: "born-outside", to: "foreign" });
  });
});
