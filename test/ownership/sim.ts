/**
 * The process-lifecycle simulator: a scripted process table behind the
 * ProcessFacts interface, plus a ProcessSignaller that records every signal
 * it delivers and applies each process's scripted reaction (exit, ignore,
 * turn zombie). The table can be changed between calls.
 */
import { buildSnapshot } from "../../src/facts/snapshot.js";
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
  pidNamespace?: string;
  onTerm?: "exit" | "ignore" | "zombie";
  onKill?: "exit" | "ignore";
  deny?: boolean;
}

export const BOOT = "boot-aaaa";
export const NS = "pid:[4026531836]";

export class SimFacts implements ProcessFacts {
  readonly table = new Map<number, SimProc>();
  snapshotFails = false;
  bootId = BOOT;
  snapshots = 0;
  inspects = 0;
  constructor(
    readonly backend: FactsBackend = "procfs",
    readonly identityStrength: IdentityStrength = "exact",
  ) {
    // this process is in the table, as on a real host
    this.add({ name: "self", pid: process.pid, ppid: process.ppid, pgid: process.pid, sid: process.pid, uid: 1000, state: "S", startTime: "10", argv: ["node"], exePath: "/usr/bin/node" });
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
  async inspect(pid: number, opts?: InspectOptions): Promise<ProcessDetails | null> {
    this.inspects++;
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
      d.pidNamespace = p.pidNamespace ?? NS;
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
  return { pid: p.pid, ppid: p.ppid, pgid: p.pgid, sid: p.sid, uid: p.uid, state: p.state, startTime: p.startTime };
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
    if (react === "exit") this.sim.exit(pid);
    else if (react === "zombie") this.sim.exit(pid, true);
    return "signalled";
  }
}
