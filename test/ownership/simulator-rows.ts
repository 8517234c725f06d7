/**
 * The simulator's table (simulator.test.ts runs it): one row per case, each
 * with the family it sets up, the verdict, and the exact signals that must
 * be delivered, an empty list included.
 */
import {
  computeCommandHash,
  tokenizeShellCommand,
  type LeaseVerdict,
  type TreeKillOutcome,
} from "../../src/ownership/index.js";
import { ownProcessGroupId } from "../../src/facts/guards.js";
import {
  A,
  adapter,
  E,
  ENV,
  family,
  G,
  grandchild,
  lease,
  MY,
  ROOT,
  SimFacts,
  unrelated,
  type SimRowBase,
  W,
  wrapper,
} from "./sim.js";

export interface Row extends SimRowBase {
  /** mutate the table after verification, before reaping */
  between?: (sim: SimFacts) => void;
  verdict: LeaseVerdict;
  /** names of the remnant members reaped (leaves first); undefined = no remnants */
  remnants?: string[];
  outcomes?: Record<string, TreeKillOutcome>;
  evidence?: string; // a check that must appear as mismatch/unknown
}

// Rows on `new SimFacts("procfs", "coarse")`: argv and exe readable, but a start time of 1 s
// resolution (as on macOS): a different command then still refuses the pid.
export const rows: Row[] = [
  {
    name: "baseline: verified wrapper, adapter and grandchild are reaped leaves first",
    setup: family,
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
    outcomes: { G: "exited-after-term", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "pid reused by an unrelated process",
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, startTime: "7000" })),
    verdict: "mismatch",
    signals: [],
    evidence: "start-time",
  },
  {
    // fail closed: the impostor carries this lease's markers and the old adapter and grandchild
    // are still alive with them, but a reused root pid is a mismatch: nothing is searched or signalled
    name: "pid reused by a process carrying our markers, the old adapter and grandchild still alive: nothing signalled",
    setup: (sim) =>
      sim
        .add(wrapper({ name: "W'", startTime: "7000", ppid: 1 }))
        .add(adapter({ ppid: 1 }))
        .add(grandchild()),
    verdict: "mismatch",
    signals: [],
    evidence: "start-time",
  },
  {
    name: "pid reused by another gateway's wrapper root (even with an equal start time)",
    setup: (sim) =>
      sim.add(
        wrapper({
          name: "W-other",
          env: { OPENCLAW_ACPX_LEASE_ID: "lease-of-B", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" },
        }),
      ),
    verdict: "mismatch",
    signals: [],
    evidence: "lease-env",
  },
  {
    // under exact identity an equal start time on the same boot and namespace IS our process (see the exec'd rows)
    name: "pid reused by another gateway's wrapper root under a different wrapperRoot (coarse identity)",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) =>
      sim.add(
        wrapper({
          name: "W-other",
          startTime: "5000",
          argv: ["/usr/bin/node", "/opt/gw-b/acpx/wrapper.mjs"],
          env: {},
          envReadable: false,
        }),
      ),
    verdict: "mismatch",
    signals: [],
    evidence: "wrapper-path",
  },
  {
    name: "stored wrapper command is shell-quoted, live argv is not: same argv verifies",
    setup: (sim) =>
      sim.add(wrapper({ argv: ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a b"] })),
    lease: lease({
      processGroupId: undefined,
      wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs",
      commandHash: computeCommandHash(
        tokenizeShellCommand(`/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`)!,
      ),
    }),
    verdict: "owned",
    signals: ["SIGTERM W"],
  },
  {
    name: "stored wrapper command is shell-quoted, live argv differs (split differently), coarse identity: refused",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) =>
      sim.add(wrapper({ argv: ["/usr/bin/node", "/opt/gw-a/acpx/wrapper v2.mjs", "--session", "agent:a", "b"] })),
    lease: lease({
      processGroupId: undefined,
      wrapperPath: "/opt/gw-a/acpx/wrapper v2.mjs",
      commandHash: computeCommandHash(
        tokenizeShellCommand(`/usr/bin/node '/opt/gw-a/acpx/wrapper v2.mjs' --session "agent:a b"`)!,
      ),
    }),
    verdict: "mismatch",
    signals: [],
    evidence: "command-hash",
  },
  {
    name: "adapter child exited, grandchild stays in the process group (re-parented to init, found via group + marker)",
    setup: (sim) =>
      sim
        .add(wrapper())
        .add(grandchild({ ppid: 1 }))
        .add(unrelated()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
  },
  {
    name: "adapter child exited, grandchild in the group without a readable marker, wrapper is its subreaper",
    setup: (sim) => sim.add(wrapper()).add(grandchild({ ppid: W, envReadable: false })),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
  },
  {
    name: "parent-death SIGTERM escalates to SIGKILL for a stubborn grandchild",
    setup: (sim) =>
      sim
        .add(wrapper({ ppid: 1 }))
        .add(adapter())
        .add(grandchild({ onTerm: "ignore" })),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W", "SIGKILL G"],
    outcomes: { G: "killed", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "process list unavailable",
    setup: (sim) => {
      family(sim);
      sim.snapshotFails = true;
    },
    verdict: "unknown",
    signals: [],
    evidence: "process-list",
  },
  {
    name: "stale lease whose process is missing",
    setup: (sim) => sim.add(unrelated()),
    verdict: "gone",
    signals: [],
    evidence: "root-alive",
  },
  {
    name: "startup orphan: wrapper (re-parented to init), adapter child and grandchild",
    setup: (sim) =>
      sim
        .add(wrapper({ ppid: 1 }))
        .add(adapter())
        .add(grandchild())
        .add(unrelated()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    // a zombie root has exited (same boot): "gone", so what still carries BOTH markers of this lease
    // under our uid, started after the root, is a remnant and reaped; the zombie itself is never signalled
    name: "zombie root, adapter and grandchild carry both markers: reaped as remnants, the zombie is not signalled",
    setup: (sim) =>
      sim
        .add(wrapper({ state: "Z" }))
        .add(adapter({ ppid: 1 }))
        .add(grandchild())
        .add(unrelated()),
    verdict: "gone",
    remnants: ["G", "A"],
    signals: ["SIGTERM G", "SIGTERM A"],
    evidence: "root-alive",
  },
  {
    name: "zombie root, its adapter carries the lease id but not this gateway's instance id: untouched",
    setup: (sim) =>
      sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1, env: { OPENCLAW_ACPX_LEASE_ID: "lease-1" } })),
    verdict: "gone",
    signals: [],
    evidence: "remnant-env",
  },
  {
    name: "zombie root, its adapter carries both markers but started before the root: untouched",
    setup: (sim) => sim.add(wrapper({ state: "Z" })).add(adapter({ ppid: 1, startTime: "4999" })),
    verdict: "gone",
    signals: [],
    evidence: "remnant-env",
  },
  {
    name: "different boot id (host rebooted)",
    setup: (sim) => {
      family(sim);
      sim.bootId = "boot-bbbb";
    },
    verdict: "gone",
    signals: [],
    evidence: "boot-id",
  },
  {
    // backends report the observer's namespace: this gateway now runs in another one (a container
    // sharing the state dir), so the lease's pid numbers name other processes here
    name: "this gateway now sees another pid namespace than at spawn: mismatch before any pid is looked up",
    setup: (sim) => {
      family(sim);
      sim.pidNamespace = "pid:[4026532999]";
    },
    verdict: "mismatch",
    signals: [],
    evidence: "pid-namespace",
  },
  {
    name: "unreadable environment, exact identity: start time + argv still prove it",
    setup: (sim) => sim.add(wrapper({ envReadable: false })).add(adapter({ envReadable: false })),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
  },
  {
    name: "unreadable environment, coarse identity, nothing else readable, no group recorded",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ envReadable: false })),
    lease: lease({ processGroupId: undefined, bootId: undefined, pidNamespace: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    name: "deleted exe of the interpreter, argv[1] is still the leased wrapper",
    setup: (sim) => sim.add(wrapper({ exePath: "/usr/bin/node (deleted)" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "owned",
    signals: ["SIGTERM W"],
  },
  {
    name: "deleted exe of a binary wrapper under wrapperRoot, coarse identity: not proof, refused",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) => sim.add(wrapper({ exePath: `${ROOT}/wrapper (deleted)`, argv: [`${ROOT}/wrapper`] })),
    lease: lease({
      processGroupId: undefined,
      wrapperPath: `${ROOT}/wrapper`,
      commandHash: computeCommandHash([`${ROOT}/wrapper`]),
    }),
    verdict: "mismatch",
    signals: [],
    evidence: "wrapper-path",
  },
  {
    // F1: `sh -c "exec sleep 30"`, `bash -c "sleep 30"`: same process (same start time, boot, namespace), another program
    name: "exec'd root (same start time, different argv and executable), exact identity: owned, reaped",
    setup: (sim) => sim.add(wrapper({ argv: ["/bin/sleep", "30"], exePath: "/bin/sleep" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "owned",
    signals: ["SIGTERM W"],
    evidence: "command-hash",
  },
  {
    name: "exec'd root (same start time, different argv), coarse identity: the start time alone proves nothing, refused",
    facts: () => new SimFacts("procfs", "coarse"),
    setup: (sim) => sim.add(wrapper({ argv: ["/bin/sleep", "30"], exePath: "/bin/sleep" })),
    lease: lease({ processGroupId: undefined }),
    verdict: "mismatch",
    signals: [],
    evidence: "command-hash",
  },
  {
    name: "lease whose pgid is our own process group",
    setup: family,
    lease: lease({ processGroupId: ownProcessGroupId() ?? 1 }),
    verdict: "mismatch",
    signals: [],
    evidence: "process-group",
  },
  {
    name: "root pid 1",
    setup: family,
    lease: lease({ rootPid: 1 }),
    verdict: "mismatch",
    signals: [],
    evidence: "root-pid",
  },
  {
    name: "root pid is our own pid",
    setup: family,
    lease: lease({ rootPid: process.pid, rootStartTime: "10" }),
    verdict: "mismatch",
    signals: [],
    evidence: "root-pid",
  },
  {
    name: "same-second pid reuse under the ps backend: start time equal, group differs",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, pgid: W + 100, startTime: "1700000000" })),
    lease: lease({ processGroupId: W, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "mismatch",
    signals: [],
    evidence: "process-group",
  },
  {
    name: "same-second pid reuse under the ps backend: start time equal and nothing else known",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(unrelated({ name: "W'", pid: W, startTime: "1700000000" })),
    lease: lease({
      processGroupId: undefined,
      rootStartTime: "1700000000",
      bootId: undefined,
      pidNamespace: undefined,
    }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    // any same-second impostor leading its own group looks exactly like this: pgid == rootPid is implied by the pid
    name: "ps backend, start time plus a recorded group that is the root's own pid: not enough, left alone",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ startTime: "1700000000" })),
    lease: lease({ processGroupId: W, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "unknown",
    signals: [],
    evidence: "sufficiency",
  },
  {
    name: "ps backend, start time plus the adapter group led by a child of the root: verified",
    facts: () => new SimFacts("ps", "coarse"),
    setup: (sim) => sim.add(wrapper({ startTime: "1700000000" })).add(adapter({ startTime: "1700000001" })),
    lease: lease({ processGroupId: A, rootStartTime: "1700000000", bootId: undefined, pidNamespace: undefined }),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
  },
  {
    name: "lease from another gateway instance",
    setup: family,
    lease: lease({ gatewayInstanceId: "gw-B" }),
    gatewayInstanceId: "gw-A",
    verdict: "mismatch",
    signals: [],
    evidence: "instance",
  },
  {
    name: "setsid escapee found by its env marker",
    setup: (sim) =>
      family(sim).add({
        name: "E",
        pid: E,
        ppid: 1,
        pgid: E,
        sid: E,
        uid: MY,
        state: "S",
        startTime: "5003",
        argv: ["daemon"],
        env: ENV,
      }),
    verdict: "owned",
    signals: ["SIGTERM E", "SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "a setsid process carrying the lease id but another gateway's instance id is not collected",
    setup: (sim) =>
      family(sim).add({
        name: "E",
        pid: E,
        ppid: 1,
        pgid: E,
        sid: E,
        uid: MY,
        state: "S",
        startTime: "5003",
        argv: ["daemon"],
        env: { ...ENV, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-B" },
      }),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "a process of another uid carrying the lease id is not collected",
    setup: (sim) =>
      family(sim).add({
        name: "E",
        pid: E,
        ppid: 1,
        pgid: E,
        sid: E,
        uid: MY + 1,
        state: "S",
        startTime: "5003",
        argv: ["daemon"],
        env: ENV,
      }),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
  },
  {
    name: "EPERM on one member never stops the others",
    setup: (sim) =>
      sim
        .add(wrapper())
        .add(adapter({ deny: true }))
        .add(grandchild()),
    verdict: "owned",
    signals: ["SIGTERM G", "SIGTERM W"],
    outcomes: { G: "exited-after-term", A: "permission-denied", W: "exited-after-term" },
  },
  {
    name: "a member's pid is reused between verification and signal: skipped",
    setup: family,
    between: (sim) => {
      sim.exit(G);
      sim.add(unrelated({ name: "G'", pid: G, ppid: 1, startTime: "9000" }));
    },
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
    outcomes: { G: "identity-mismatch", A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "zombie member counts as exited",
    setup: (sim) => sim.add(wrapper()).add(adapter({ onTerm: "zombie" })),
    verdict: "owned",
    signals: ["SIGTERM A", "SIGTERM W"],
    outcomes: { A: "exited-after-term", W: "exited-after-term" },
  },
  {
    name: "coarse identity (ps) against a start time recorded in another unit (ticks): unknown, never a mismatch that would settle a live lease lost",
    facts: () => new SimFacts("ps", "coarse"),
    setup: family,
    lease: lease({ rootStartTime: "1700000000" }),
    verdict: "unknown",
    signals: [],
    evidence: "start-time",
  },
  {
    // its gateway died between the lease write and the wrapper's report (a live gateway's own
    // pending spawn is never verified: it is in flight, and one gateway holds the state dir)
    name: "no pid recorded: a gone root, the family found by its markers",
    setup: family,
    lease: lease({ rootPid: 0, rootStartTime: undefined }),
    verdict: "gone",
    remnants: ["G", "A", "W"],
    signals: ["SIGTERM G", "SIGTERM A", "SIGTERM W"],
    evidence: "root-pid",
  },
];
