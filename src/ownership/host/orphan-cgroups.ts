/**
 * The cgroups a state dir's instance folders hold that no lease owns: what
 * `proclease status` and `doctor` (and the plugin's doctor) list, and what
 * `reap --orphan-cgroups` ends and removes. Read-only here.
 */
import { basename, dirname } from "node:path";
import { listLeaseCgroups, type ListedCgroup, type PopulatedState } from "../../containment/index.js";
import { checkInstanceFolder, readContainmentRecord } from "./containment-record.js";
import { readGatewayInstanceId } from "../leases/instance-id.js";
import type { ProcessLease } from "../leases/types.js";

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
export type OrphanCode =
  | "left-by-settled-lease"
  | "identity-differs"
  | "no-lease-file"
  | "lease-file-unreadable"
  | "recorded-elsewhere"
  | "no-cgroup-recorded";

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
 * gateway recorded (ownership/host/containment-record.ts), and the folder of every
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

function classify(
  c: ListedCgroup,
  leases: readonly ProcessLease[],
  unreadable: ReadonlySet<string>,
  stateDir: string,
): OrphanCgroup | null {
  const base = { name: c.name, path: c.path, id: c.id, populated: c.populated };
  const recorders = leases.filter((l) => l.cgroup?.path === c.path);
  const own = recorders.find((l) => l.cgroup!.id === c.id);
  if (own !== undefined) {
    if (LIVE.has(own.state)) return null;
    // a settled lease's cgroup should have been removed; nothing drains it any more
    return {
      ...base,
      code: "left-by-settled-lease",
      why: `left over from lease ${own.leaseId}, already ${own.state}: nothing will drain or remove it`,
    };
  }
  if (recorders.length > 0) {
    const r = recorders[0]!;
    return {
      ...base,
      code: "identity-differs",
      why: `not lease ${r.leaseId}'s: its identity (cgroup.id ${c.id}) differs from the one the lease recorded (${r.cgroup!.id}), so it was created again under that name`,
    };
  }
  if (unreadable.has(c.name)) {
    const why = `the lease file named ${c.name} cannot be read, so whether this is its cgroup is unknown`;
    return { ...base, code: "lease-file-unreadable", why, caution: `${why}; left alone` };
  }
  const byName = leases.find((l) => l.leaseId === c.name);
  if (byName === undefined)
    return { ...base, code: "no-lease-file", why: `no lease file named ${c.name} in ${stateDir}` };
  if (byName.cgroup)
    return {
      ...base,
      code: "recorded-elsewhere",
      why: `lease ${c.name} records its cgroup at ${byName.cgroup.path}, not here`,
    };
  const why = `lease ${c.name} (${byName.state}) records no cgroup`;
  if (!LIVE.has(byName.state)) return { ...base, code: "no-cgroup-recorded", why };
  // the gateway writes the lease, then makes its cgroup, then records it: beside a live gateway this is a lease in the making
  return {
    ...base,
    code: "no-cgroup-recorded",
    why,
    caution: `${why} yet: a live gateway may be creating it; left alone`,
    cautionOnlyIfLive: true,
  };
}
