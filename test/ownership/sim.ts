/**
 * The process-lifecycle simulator: a scripted process table behind the
 * ProcessFacts interface, plus a ProcessSignaller that records every signal
 * it delivers and applies each process's scripted reaction (exit, ignore,
 * turn zombie). The table can be changed between calls.
 */
import { buildSnapshot } from "../../src/facts/snapshot.js";
import { inspectEach } from "../../src/facts/inspect-many.js";
import { computeCommandHash } from "../../src/ownership/leases/command-hash.js";
import type { AcpxProcessLease } from "../../src/ownership/leases/types.js";
import type {
  FactsBackend,
  IdentityStrength,
  InspectOptions,
  ProcessDetails,
  ProcessFacts,
  ProcessInfo,
  ProcessSignaller,
  ProcessSnapshot,
  SignalOutcome,
} from "../../src/facts/types.js";

export interface SimProc extends ProcessInfo {
  name: string;
  exePath?: string | null;
  argv?: string[] | null;
  env?: Record<string, string>;
  /** default true */
  envReadable?: boolean;
  onTerm?: "exit" | "ignore" | "zombie";
  onKill?: "exit" | "ignore";
  deny?: boolean;
  /** appears in the table when this process receives SIGTERM (forked on its way out) */
  onTermSpawn?: SimProc;
}

export const BOOT = "boot-aaaa";
export const NS = "pid:[4026531836]";
/** this test process's uid: the simulated family runs under it, so the remnant path (our uid only) is live in every row */
export const MY = process.getuid?.() ?? 1000;

export class SimFacts implements ProcessFacts {
  readonly table = new Map<number, SimProc>();
  snapshotFails = false;
  bootId = BOOT;
  /**
   * The OBSERVER's pid namespace, as every backend reports it
   * (/proc/self/ns/pid): the same for every inspected process.
   */
  pidNamespace = NS;
  snapshots = 0;
  inspects = 0;
  /** every pid inspect() was asked about, in order */
  readonly inspected: number[] = [];
  constructor(
    readonly backend: FactsBackend = "procfs",
    readonly identityStrength: IdentityStrength = "exact",
  ) {
    // this process is in the table, as on a real host
    this.add({
      name: "self",
      pid: process.pid,
      ppid: process.ppid,
      pgid: process.pid,
      sid: process.pid,
      uid: MY,
      state: "S",
      startTime: "10",
      argv: ["node"],
      exePath: "/usr/bin/node",
    });
  }
  add(p: SimProc): this {
    this.table.set(p.pid, { ...p });
    return this;
  }
  async snapshot(): Promise<ProcessSnapshot> {
    this.snapshots++;
    if (this.snapshotFails) throw new Error("EACCES: /proc unreadable (simulated)");
    return buildSnapshot(Date.now(), [...this.table.values()].map(strip));
  }
  inspectMany(pids: readonly number[], opts?: InspectOptions): Promise<Array<ProcessDetails | null>> {
    return inspectEach((pid, o) => this.inspect(pid, o), pids, opts, 1);
  }
  async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
    this.inspects++;
    this.inspected.push(pid);
    if (this.snapshotFails) throw new Error("EACCES (simulated)");
    const p = this.table.get(pid);
    if (!p) return null;
    const readable = p.envReadable ?? true;
    const env: Record<string, string | null> = {};
    for (const k of opts?.envKeys ?? []) env[k] = readable ? (p.env?.[k] ?? null) : null;
    const d: ProcessDetails = {
      ...strip(p),
      exePath: this.backend === "ps" ? null : (p.exePath ?? null),
      argv: this.backend === "ps" ? null : (p.argv ?? null),
      env,
      envReadable: this.backend === "ps" ? false : readable,
    };
    if (this.backend !== "ps") {
      d.bootId = this.bootId;
      d.pidNamespace = this.pidNamespace;
    }
    return d;
  }
  /** the process exits: removed, its children re-parented to init */
  exit(pid: number, zombie = false): void {
    const p = this.table.get(pid);
    if (!p) return;
    if (zombie) p.state = "Z";
    else this.table.delete(pid);
    for (const c of this.table.values()) if (c.ppid === pid) c.ppid = 1;
  }
}

function strip(p: SimProc): ProcessInfo {
  const info: ProcessInfo = {
    pid: p.pid,
    ppid: p.ppid,
    pgid: p.pgid,
    sid: p.sid,
    uid: p.uid,
    state: p.state,
    startTime: p.startTime,
  };
  // the liveness flags only where a row sets them (most backends' records carry them, the rows need not)
  if (p.kernelThread !== undefined) info.kernelThread = p.kernelThread;
  if (p.exiting !== undefined) info.exiting = p.exiting;
  if (p.zombieLeader !== undefined) info.zombieLeader = p.zombieLeader;
  return info;
}

/** Records delivered signals as "SIGTERM name"; identity-checked against the table like a pidfd would be. */
export class RecordingSignaller implements ProcessSignaller {
  readonly raceFree = true;
  readonly log: string[] = [];
  readonly attempts: { pid: number; sig: string; outcome: SignalOutcome }[] = [];
  constructor(private readonly sim: SimFacts) {}
  async signal(pid: number, expectedStartTime: string, sig: NodeJS.Signals): Promise<SignalOutcome> {
    const outcome = this.deliver(pid, expectedStartTime, sig);
    this.attempts.push({ pid, sig, outcome });
    return outcome;
  }
  private deliver(pid: number, start: string, sig: NodeJS.Signals): SignalOutcome {
    const p = this.sim.table.get(pid);
    if (!p) return "gone";
    if (p.startTime !== start) return "mismatch";
    if (p.deny) return "denied";
    this.log.push(`${sig} ${p.name}`);
    if (p.state === "Z") return "signalled";
    const react = sig === "SIGKILL" ? (p.onKill ?? "exit") : (p.onTerm ?? "exit");
    if (sig === "SIGTERM" && p.onTermSpawn) this.sim.add(p.onTermSpawn);
    if (react === "exit") this.sim.exit(pid);
    else if (react === "zombie") this.sim.exit(pid, true);
    return "signalled";
  }
}

/** What every simulator table row states; each table adds its own expectations. */
export interface SimRowBase {
  name: string;
  setup: (sim: SimFacts) => void;
  lease?: AcpxProcessLease;
  facts?: () => SimFacts;
  gatewayInstanceId?: string;
  /** the exact signals delivered, in order; an empty list included */
  signals: string[];
}

// ---- the simulated family every table shares: wrapper W → adapter A (group leader) → grandchild G

export const P = 4_100_000;
export const W = P + 1; // wrapper (lease root)
export const A = P + 2; // adapter child, leader of the adapter group
export const G = P + 3; // grandchild, in the adapter group
export const E = P + 4; // setsid escapee
export const X = P + 9; // unrelated process
export const ROOT = "/opt/gw-a/acpx";
export const WRAPPER = `${ROOT}/wrapper.mjs`;
export const ARGV = ["/usr/bin/node", WRAPPER, "--session", "agent:main:acp:1"];
export const ENV = { OPENCLAW_ACPX_LEASE_ID: "lease-1", OPENCLAW_GATEWAY_INSTANCE_ID: "gw-A" };

export function lease(over: Partial<AcpxProcessLease> = {}): AcpxProcessLease {
  return {
    leaseId: "lease-1",
    kind: "acpx",
    gatewayInstanceId: "gw-A",
    sessionKey: "agent:main:acp:1",
    wrapperRoot: ROOT,
    wrapperPath: WRAPPER,
    rootPid: W,
    processGroupId: A,
    commandHash: computeCommandHash(ARGV),
    startedAt: 1,
    state: "open",
    rootStartTime: "5000",
    bootId: BOOT,
    pidNamespace: NS,
    ...over,
  };
}

export const wrapper = (over: Partial<SimProc> = {}): SimProc => ({
  name: "W",
  pid: W,
  ppid: process.pid,
  pgid: W,
  sid: W,
  uid: MY,
  state: "S",
  startTime: "5000",
  exePath: "/usr/bin/node",
  argv: ARGV,
  env: ENV,
  ...over,
});
export const adapter = (over: Partial<SimProc> = {}): SimProc => ({
  name: "A",
  pid: A,
  ppid: W,
  pgid: A,
  sid: W,
  uid: MY,
  state: "S",
  startTime: "5001",
  exePath: "/usr/bin/python3",
  argv: ["python3", "-m", "adapter"],
  env: ENV,
  ...over,
});
export const grandchild = (over: Partial<SimProc> = {}): SimProc => ({
  name: "G",
  pid: G,
  ppid: A,
  pgid: A,
  sid: W,
  uid: MY,
  state: "S",
  startTime: "5002",
  exePath: "/usr/bin/sleep",
  argv: ["sleep", "1000"],
  env: ENV,
  ...over,
});
export const unrelated = (over: Partial<SimProc> = {}): SimProc => ({
  name: "X",
  pid: X,
  ppid: 1,
  pgid: X,
  sid: X,
  uid: MY,
  state: "S",
  startTime: "6000",
  exePath: "/usr/bin/vim",
  argv: ["vim"],
  env: {},
  ...over,
});

export const family = (sim: SimFacts) => sim.add(wrapper()).add(adapter()).add(grandchild()).add(unrelated());

export function nameOf(pid: number): string {
  return ({ [W]: "W", [A]: "A", [G]: "G", [E]: "E", [X]: "X" } as Record<number, string>)[pid] ?? String(pid);
}
