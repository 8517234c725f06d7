/**
 * The remnant simulator's table (remnants.test.ts runs it) and the family it
 * starts from: an adapter and grandchild a SIGKILLed wrapper left behind,
 * each row with its verdict, the remnants found, the signals sent and what
 * the search refused.
 */
import {
  type EvidenceCheck,
  type EvidenceCode,
  type LeaseVerdict,
  type RemnantRefusal,
  type StartClock,
} from "../../src/ownership/index.js";
import {
  adapter,
  ENV,
  grandchild,
  lease,
  P,
  SimFacts,
  unrelated,
  type SimRowBase,
  W,
  wrapper,
  type SimProc,
} from "./sim.js";

export const MY = process.getuid?.() ?? 1000;
export const N = P + 5; // a process that appears during the teardown
export const CLOCK: StartClock = { bootTimeMs: 1_000_000, ticksPerSecond: 100 }; // tick 5001 → 1_050_010 ms
export const REAP = { graceMs: 150, pollMs: 5, confirmMs: 150 };

/** Adapter and grandchild left behind by a SIGKILLed wrapper: re-parented to init, our uid, markers inherited. */
const orphanA = (over: Partial<SimProc> = {}) => adapter({ ppid: 1, uid: MY, ...over });
const orphanG = (over: Partial<SimProc> = {}) => grandchild({ uid: MY, ...over });
export const remnantFamily =
  (a: Partial<SimProc> = {}, g: Partial<SimProc> = {}) =>
  (sim: SimFacts) =>
    sim
      .add(orphanA(a))
      .add(orphanG(g))
      .add(unrelated({ uid: MY }));

export interface Row extends SimRowBase {
  startClock?: StartClock | null;
  verdict: LeaseVerdict;
  /** names of the remnant members, leaves first; undefined = no remnants */
  remnants?: string[];
  /** a check that must appear with this result (and this code, and words matching the pattern where the words themselves are the point) */
  evidence?: [EvidenceCheck, "match" | "mismatch" | "unknown", EvidenceCode?, RegExp?];
  /** what the remnant search refused, counted by why */
  refusals?: Partial<Record<RemnantRefusal, number>>;
  /** how the search must end, when the row is about that */
  search?: "none-found" | "inconclusive";
}

// processes of our uid, started after the lease, whose environment cannot be read
const K = P + 20;
const unreadable = (over: Partial<SimProc>) =>
  unrelated({ name: "K", pid: K, ppid: 2, startTime: "6000", envReadable: false, env: {}, ...over });

export const rows: Row[] = [
  {
    name: "root gone, adapter and grandchild carry the markers: reaped leaves first, the oldest carrier last",
    setup: remnantFamily(),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
    evidence: ["remnant-env", "match", "carriers-found"],
  },
  {
    name: "root gone, a grandchild without markers is still reaped as a descendant of a proven remnant",
    setup: remnantFamily({}, { env: {} }),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
  },
  {
    name: "root gone, the grandchild ignores SIGTERM: TERM → KILL",
    setup: remnantFamily({}, { onTerm: "ignore" }),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A", "SIGKILL G"],
  },
  {
    name: "zombie root, its adapter carries the markers: reaped",
    setup: (sim) => sim.add(wrapper({ state: "Z", uid: MY })).add(orphanA()),
    verdict: "gone",
    remnants: ["A"],
    signals: ["SIGTERM A"],
  },
  {
    // fail closed: a reused root pid is a mismatch, and a mismatch never leads to a signal; the
    // remnants are left until a later verification finds the root pid free (verdict "gone")
    name: "root pid reused by an unrelated process: mismatch, no remnant search, nothing signalled",
    setup: (sim) => remnantFamily()(sim).add(unrelated({ name: "W'", pid: W, startTime: "7000", uid: MY })),
    verdict: "mismatch",
    signals: [],
    evidence: ["start-time", "mismatch"],
  },
  {
    name: "root pid reused by an impostor carrying this lease's markers: the impostor and the remnants are untouched",
    setup: (sim) => remnantFamily()(sim).add(wrapper({ name: "W'", startTime: "7000", ppid: 1, uid: MY })),
    verdict: "mismatch",
    signals: [],
    evidence: ["start-time", "mismatch"],
  },
  {
    name: "remnant whose gateway instance marker differs: untouched",
    setup: remnantFamily(
      { env: { ...ENV, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } },
      { env: { ...ENV, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } },
    ),
    verdict: "gone",
    signals: [],
    // a readable environment with another instance id proves it is not ours: the search ends, nothing left of ours
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { markers: 2 },
    search: "none-found",
  },
  {
    name: "remnant without the instance marker: untouched",
    setup: remnantFamily({ env: { OPENCLAW_ACPX_LEASE_ID: "lease-1" } }, { env: {} }),
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { markers: 1 },
  },
  {
    name: "remnant with an unreadable environment: untouched",
    setup: remnantFamily({ envReadable: false }, { envReadable: false }),
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown"],
  },
  {
    name: "remnant started before the lease's root (same boot clock): untouched",
    setup: remnantFamily({ startTime: "4000" }, { startTime: "4001" }),
    verdict: "gone",
    signals: [],
    // filtered out before any env read: they are never even inspected
    evidence: ["remnant-env", "unknown", "none-proven"],
  },
  {
    name: "remnant started before the lease was written (epoch via the boot clock): untouched",
    setup: remnantFamily(),
    lease: lease({ rootStartTime: undefined, startedAt: 1_050_010 + 60_000 }),
    startClock: CLOCK,
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { "started-early": 2 },
  },
  {
    name: "remnant started after the lease was written (epoch only, root start never recorded): reaped",
    setup: remnantFamily(),
    lease: lease({ rootStartTime: undefined, startedAt: 1_050_010 - 5_000 }),
    startClock: CLOCK,
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
    evidence: ["remnant-start", "match", "started-after-lease", /epoch via btime/],
  },
  {
    // markers and a matching boot id alone never date a process: it cannot be compared with the lease
    name: "boot clock not computable and no root start recorded, recorded boot id matched: refused, untouched",
    setup: remnantFamily(),
    lease: lease({ rootStartTime: undefined, startedAt: 9e15 }),
    startClock: null,
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { "start-unknown": 2 },
  },
  {
    name: "boot clock not computable and no boot id recorded: untouched",
    setup: remnantFamily(),
    lease: lease({ rootStartTime: undefined, bootId: undefined }),
    startClock: null,
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { "start-unknown": 2 },
  },
  {
    name: "ps backend: environments cannot be read, remnants never found",
    facts: () => new SimFacts("ps", "coarse"),
    setup: remnantFamily(),
    lease: lease({ bootId: undefined, pidNamespace: undefined }),
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "search-blocked"],
  },
  {
    name: "host rebooted since the lease (boot id differs): no search, untouched",
    setup: (sim) => {
      remnantFamily()(sim);
      sim.bootId = "boot-bbbb";
    },
    verdict: "gone",
    signals: [],
    evidence: ["boot-id", "mismatch"],
  },
  {
    // the backends report the observer's namespace: another one means the lease's pids mean nothing here
    name: "this gateway now sees another pid namespace than at spawn: mismatch, no remnant search, untouched",
    setup: (sim) => {
      remnantFamily()(sim);
      sim.pidNamespace = "pid:[4026532999]";
    },
    verdict: "mismatch",
    signals: [],
    evidence: ["pid-namespace", "mismatch", "other-namespace"],
  },
  {
    name: "remnant under another uid: untouched",
    setup: remnantFamily({ uid: MY + 1 }, { uid: MY + 1 }),
    verdict: "gone",
    signals: [],
  },
  {
    name: "a marker carrier that is an ancestor of this process: untouched",
    setup: (sim) =>
      sim
        .add({
          name: "parent",
          pid: process.ppid,
          ppid: P + 20,
          pgid: P + 20,
          sid: P + 20,
          uid: MY,
          state: "S",
          startTime: "5002",
          env: ENV,
        })
        .add({
          name: "grandparent",
          pid: P + 20,
          ppid: 1,
          pgid: P + 20,
          sid: P + 20,
          uid: MY,
          state: "S",
          startTime: "5001",
          env: ENV,
        }),
    verdict: "gone",
    signals: [],
    evidence: ["remnant-env", "unknown", "none-proven"],
  },
  {
    name: "root alive but another gateway's (lease id differs): mismatch for another reason, carriers untouched",
    setup: (sim) =>
      remnantFamily()(sim).add(
        wrapper({ uid: MY, env: { OPENCLAW_ACPX_LEASE_ID: "lease-of-B", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" } }),
      ),
    verdict: "mismatch",
    signals: [],
    evidence: ["lease-env", "mismatch"],
  },
  {
    name: "lease of another gateway instance, root gone: mismatch, carriers untouched",
    setup: remnantFamily(),
    gatewayInstanceId: "gw-B",
    verdict: "mismatch",
    signals: [],
    evidence: ["instance", "mismatch"],
  },
  {
    name: "no pid recorded (its gateway died before the wrapper reported): a gone root, its carriers found by markers and reaped",
    setup: remnantFamily(),
    lease: lease({ rootPid: 0, rootStartTime: undefined }),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
    evidence: ["root-pid", "mismatch", "no-pid-recorded"],
  },
];

// Only a process that could carry our markers can keep a search open: never a kernel thread, a
// zombie or dead record, a process inside exit(2), one older than the lease or of another uid.
rows.push(
  {
    name: "a kernel thread (PF_KTHREAD, our uid when the gateway is root, environment unreadable) never keeps the search open",
    setup: (sim) => sim.add(unreadable({ kernelThread: true })),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
  {
    name: "where a backend cannot read flags, kthreadd's children (ppid 2) count as kernel threads",
    setup: (sim) => sim.add(unreadable({})),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
  {
    name: "…but with flags read, a user-space child of pid 2 is judged like any other process (pid 2 is ordinary inside a pid namespace)",
    setup: (sim) => sim.add(unreadable({ kernelThread: false })),
    verdict: "gone",
    signals: [],
    search: "inconclusive",
    evidence: ["remnant-env", "unknown", "none-proven"],
    refusals: { "env-unreadable": 1 },
  },
  {
    name: "a same-uid process inside exit(2) (PF_EXITING: its environment already unreadable) is gone, not a candidate",
    setup: (sim) => sim.add(unreadable({ ppid: 1, kernelThread: false, exiting: true })),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
  {
    name: "a leader whose main thread exited while its threads run (exiting, zombieLeader) is alive: it keeps the search open",
    setup: (sim) =>
      sim.add(unreadable({ ppid: 1, kernelThread: false, state: "Z", exiting: true, zombieLeader: true })),
    verdict: "gone",
    signals: [],
    search: "inconclusive",
  },
  {
    name: "a same-uid process with neither argv nor environment readable has no address space: it carries nobody's markers",
    setup: (sim) => sim.add(unreadable({ ppid: 1, kernelThread: false, argv: null })),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
  {
    name: "a zombie and a dead record with unreadable environments are gone",
    setup: (sim) =>
      sim
        .add(unreadable({ ppid: 1, kernelThread: false, state: "Z" }))
        .add(unreadable({ name: "K2", pid: K + 1, ppid: 1, kernelThread: false, state: "X" })),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
  {
    name: "a live same-uid process older than the lease, or of another uid, never keeps the search open",
    setup: (sim) =>
      sim
        .add(unreadable({ ppid: 1, kernelThread: false, startTime: "10" }))
        .add(unreadable({ name: "K2", pid: K + 1, ppid: 1, kernelThread: false, uid: MY + 1 })),
    verdict: "gone",
    signals: [],
    search: "none-found",
  },
);
