/**
 * How the CLI reaches a state dir's leases. Readers (leases, explain, status,
 * reap --dry-run) open it read-only: nothing is created, moved, chmod'ed or
 * quarantined, and they work beside a live gateway. The one writer (reap)
 * takes the state dir's lock like a gateway does. Both ask the same
 * lifecycle (ownership/lifecycle.ts reconcileLeases), so `explain` and
 * `reap --dry-run` say exactly what `reap` would do.
 */
import { basename, dirname } from "node:path";
import { listLeaseCgroups, readMemory, verifyCgroupIdentity, type ListedCgroup, type MemoryReading, type PopulatedState } from "../containment/index.js";
import { createSignaller } from "../facts/signal.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import {
  acquireStateDirLock,
  DEFAULT_GRACE_MS,
  openLeaseStore,
  readGatewayInstanceId,
  stateDirLockHolder,
  StateDirLockedError,
  type ProcessLease,
  type LifecycleDeps,
  type StateDirLock,
} from "../ownership/index.js";
import { checkInstanceFolder, readContainmentRecord } from "../ownership/containment-record.js";

/** A dry run never signals; this signaller makes sure of it. */
const NEVER: ProcessSignaller = {
  raceFree: true,
  signal: () => Promise.reject(new Error("a read-only view never signals")),
};

/** The state dir's leases, read-only; null when it has no gateway instance id (nothing was ever written there). */
export async function openReadOnly(stateDir: string, facts: ProcessFacts): Promise<LifecycleDeps | null> {
  const gatewayInstanceId = await readGatewayInstanceId(stateDir);
  if (gatewayInstanceId === null) return null;
  const store = await openLeaseStore(stateDir, { readOnly: true });
  return { store, facts, signaller: NEVER, graceMs: DEFAULT_GRACE_MS, gatewayInstanceId };
}

export type WriterOpen =
  | { kind: "none" }
  | { kind: "locked"; holderPid: number | null }
  | { kind: "ok"; deps: LifecycleDeps; lock: StateDirLock | null };

/**
 * The state dir for writing, under its lock. Held by a gateway: "locked",
 * unless `force` (then no lock, and the caller must leave alone whatever a
 * live gateway may be using).
 */
export async function openWriter(stateDir: string, facts: ProcessFacts, graceMs: number, force: boolean): Promise<WriterOpen> {
  const gatewayInstanceId = await readGatewayInstanceId(stateDir);
  // an operator command must not mint state: no instance id, no leases of any instance
  if (gatewayInstanceId === null) return { kind: "none" };
  let lock: StateDirLock | null = null;
  try {
    lock = await acquireStateDirLock(stateDir, facts);
  } catch (e) {
    if (!(e instanceof StateDirLockedError)) throw e;
    if (!force) return { kind: "locked", holderPid: e.holderPid };
  }
  try {
    const store = await openLeaseStore(stateDir);
    return { kind: "ok", deps: { store, facts, signaller: createSignaller(facts), graceMs, gatewayInstanceId }, lock };
  } catch (e) {
    await lock?.release();
    throw e;
  }
}

/**
 * Which leases a reap from the CLI treats as possibly attached to a running
 * gateway (reconcileLeases' skipAttached): all of them while a gateway holds
 * the state dir (`--force`), and always the process supervisor's runs, whose
 * gateway takes no state-dir lock (their root's parent IS that gateway).
 */
export function attachedGuard(gatewayHoldsLock: boolean): (lease: ProcessLease) => boolean {
  return (lease) => gatewayHoldsLock || lease.kind === "supervisor";
}

/** Read-only: does a gateway hold the state dir now (and who)? */
export function gatewayHolder(stateDir: string, facts: ProcessFacts): Promise<{ held: boolean; holderPid: number | null }> {
  return stateDirLockHolder(stateDir, facts);
}

// ------------------------------------------------- lease cgroups (docs/containment.md)

/**
 * A lease's memory figures, read-only. Only the lease's own cgroup is read:
 * a directory re-created under the recorded path (another identity) is not
 * the lease's, and its figures would be someone else's.
 */
export async function leaseMemory(lease: ProcessLease): Promise<MemoryReading | undefined> {
  const cg = lease.cgroup;
  if (!cg) return undefined;
  const id = await verifyCgroupIdentity(cg.path, cg.id);
  if (id === "gone") return { ok: false, code: "gone", why: `${cg.path} no longer exists (the lease's cgroup was removed)` };
  if (id === "mismatch") return { ok: false, code: "cgroup-replaced", why: `${cg.path} is no longer the lease's cgroup (another one was created under that name)` };
  if (id === "unknown") return { ok: false, code: "identity-unreadable", why: `the identity of ${cg.path} cannot be read` };
  return readMemory(cg.path);
}

/** "current 1.5 MiB  peak 2.0 MiB": one lease's figures as status and explain print them. */
export function memoryFigures(m: Extract<MemoryReading, { ok: true }>): string {
  return `current ${formatBytes(m.current)}  peak ${m.peak === null ? "- (kernel < 5.19)" : formatBytes(m.peak)}`;
}

/** 1536 → "1.5 KiB" */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * The reasons memory could not be read, each once with the leases it hit (a
 * v1 memory controller says the same for every lease: one line, not one per
 * lease). A removed cgroup of a settled lease is expected, so not a reason.
 */
export function memoryWhyLines(rows: ReadonlyArray<{ lease: ProcessLease; memory?: MemoryReading | undefined }>): string[] {
  const byWhy = new Map<string, string[]>();
  for (const r of rows) {
    const m = r.memory;
    if (m === undefined || m.ok) continue;
    if ((r.lease.state === "closed" || r.lease.state === "lost") && m.code === "gone") continue;
    const list = byWhy.get(m.why) ?? [];
    list.push(r.lease.leaseId);
    byWhy.set(m.why, list);
  }
  return [...byWhy].map(([why, ids]) => `memory per lease not shown (${ids.length === 1 ? `lease ${ids[0]}` : `${ids.length} leases`}): ${why}`);
}

/** An instance folder (`<proclease root>/<instance>`) whose lease cgroups are listed for orphans. */
export interface InstanceFolder {
  folder: string;
  /** where it was learnt: the gateway's containment record, or a lease's recorded cgroup path */
  source: "record" | "lease";
  /** listed; absent (nothing can be under it); refused (not an instance folder on cgroup2); unknown (unreadable) */
  state: "listed" | "absent" | "refused" | "unknown";
  why?: string;
}

/**
 * Why a lease cgroup is an orphan: its settled lease left it, another
 * directory took a lease's name, no lease file of its name, its lease file
 * unreadable, its lease records another cgroup, or records none.
 */
export type OrphanCode = "left-by-settled-lease" | "identity-differs" | "no-lease-file" | "lease-file-unreadable" | "recorded-elsewhere" | "no-cgroup-recorded";

export interface OrphanCgroup {
  name: string;
  path: string;
  /** the directory's identity (inode = cgroup.id) when it was listed */
  id: string;
  populated: PopulatedState;
  /** why it is nobody's (OrphanCode) */
  code: OrphanCode;
  /** the same, for an operator */
  why: string;
  /**
   * set when a reap must leave it alone whatever the lock says: a lease file
   * of its name cannot be read, or (only beside a live gateway) an open lease
   * of its name records no cgroup yet and may be getting this one
   */
  caution?: string;
  /** true when the caution applies only while a gateway may be running (reap --force) */
  cautionOnlyIfLive?: boolean;
}

export interface OrphanScan {
  folders: InstanceFolder[];
  orphans: OrphanCgroup[];
  /** cgroups in the folders that are their open/closing lease's own */
  owned: number;
  /** the containment record could not be used (the folders of the leases still are) */
  problems: string[];
}

const LIVE: ReadonlySet<string> = new Set(["open", "closing"]);

/**
 * The cgroups in this state dir's instance folders that are no lease's own:
 * read-only (listing and stat only; nothing is created, moved or probed).
 * Folders listed: this state dir's instance folder under each root the
 * gateway recorded (ownership/containment-record.ts), and the folder of every
 * lease's recorded cgroup; one that is not `<…/proclease>/<instance id>` on
 * cgroup2 is refused with the reason and never listed. A proclease root
 * itself is never listed: other gateways sharing the cgroup keep their
 * folders there. Our own `_` leaves (`_gateway`, probes) are never listed
 * (listLeaseCgroups). A cgroup is a lease's only when that lease recorded
 * this path AND this identity: a directory re-created under a lease's name is
 * an orphan, with that reason.
 */
export async function scanOrphanCgroups(
  stateDir: string,
  leases: readonly ProcessLease[],
  unreadableLeaseFiles: readonly string[] = [],
): Promise<OrphanScan> {
  const problems: string[] = [];
  const folders: InstanceFolder[] = [];
  const seen = new Set<string>();
  const add = (folder: string, source: InstanceFolder["source"]) => {
    if (seen.has(folder)) return;
    seen.add(folder);
    folders.push({ folder, source, state: "listed" });
  };
  const rec = await readContainmentRecord(stateDir);
  if (rec.kind === "refused") problems.push(rec.why);
  let instanceId: string | null = null;
  try {
    instanceId = await readGatewayInstanceId(stateDir);
  } catch (e) {
    problems.push((e as Error).message);
  }
  // this state dir's instance folder under each recorded proclease root (createLeaseCgroup: <root>/<instance id>/<lease id>)
  if (rec.kind === "ok" && instanceId !== null) for (const r of rec.record.roots) add(`${r}/${instanceId}`, "record");
  // and the folder of every lease's recorded cgroup (an earlier instance id of this state dir included)
  for (const l of leases) if (l.cgroup) add(dirname(l.cgroup.path), "lease");

  const unreadable = new Set(unreadableLeaseFiles.map((f) => basename(f).replace(/\.json$/, "")));
  const orphans: OrphanCgroup[] = [];
  let owned = 0;
  for (const r of folders) {
    const bad = await checkInstanceFolder(r.folder);
    if (bad === "absent") {
      r.state = "absent";
      continue;
    }
    if (bad !== null) {
      r.state = "refused";
      r.why = bad;
      continue;
    }
    const listed = await listLeaseCgroups(r.folder);
    if (listed.state !== "ok") {
      r.state = "unknown";
      r.why = listed.why;
      continue;
    }
    for (const c of listed.cgroups) {
      const o = classify(c, leases, unreadable, stateDir);
      if (o === null) owned++;
      else orphans.push(o);
    }
  }
  return { folders, orphans, owned, problems };
}

function classify(c: ListedCgroup, leases: readonly ProcessLease[], unreadable: ReadonlySet<string>, stateDir: string): OrphanCgroup | null {
  const base = { name: c.name, path: c.path, id: c.id, populated: c.populated };
  const recorders = leases.filter((l) => l.cgroup?.path === c.path);
  const own = recorders.find((l) => l.cgroup!.id === c.id);
  if (own !== undefined) {
    if (LIVE.has(own.state)) return null;
    // a settled lease's cgroup should have been removed; nothing drains it any more
    return { ...base, code: "left-by-settled-lease", why: `left over from lease ${own.leaseId}, already ${own.state}: nothing will drain or remove it` };
  }
  if (recorders.length > 0) {
    const r = recorders[0]!;
    return { ...base, code: "identity-differs", why: `not lease ${r.leaseId}'s: its identity (cgroup.id ${c.id}) differs from the one the lease recorded (${r.cgroup!.id}), so it was created again under that name` };
  }
  if (unreadable.has(c.name)) {
    const why = `the lease file named ${c.name} cannot be read, so whether this is its cgroup is unknown`;
    return { ...base, code: "lease-file-unreadable", why, caution: `${why}; left alone` };
  }
  const byName = leases.find((l) => l.leaseId === c.name);
  if (byName === undefined) return { ...base, code: "no-lease-file", why: `no lease file named ${c.name} in ${stateDir}` };
  if (byName.cgroup) return { ...base, code: "recorded-elsewhere", why: `lease ${c.name} records its cgroup at ${byName.cgroup.path}, not here` };
  const why = `lease ${c.name} (${byName.state}) records no cgroup`;
  if (!LIVE.has(byName.state)) return { ...base, code: "no-cgroup-recorded", why };
  // the gateway writes the lease, then makes its cgroup, then records it: beside a live gateway this is a lease in the making
  return { ...base, code: "no-cgroup-recorded", why, caution: `${why} yet: a live gateway may be creating it; left alone`, cautionOnlyIfLive: true };
}
