/**
 * The lease cgroup's boundary: can an adapter's tree move a process across
 * it? A write to cgroup.procs moves a process between two cgroups; the
 * kernel (cgroup_procs_write_permission) allows it to whoever may write the
 * common ancestor's cgroup.procs, so a root agent can move anything
 * anywhere, and a same-uid agent under a delegated gateway anything within
 * the delegated subtree. Two things together close that:
 *
 * - the adapter runs in its own cgroup namespace whose root is its lease
 *   cgroup (the wrappers unshare it for the adapter, after it is inside and
 *   before its exec);
 * - cgroup2 is mounted with `nsdelegate`: the kernel then refuses (ENOENT)
 *   a move whose source or destination lies outside the writer's namespace
 *   root, to root as well. Without nsdelegate a namespace changes what
 *   /proc/self/cgroup shows and nothing else.
 *
 * Making the namespace needs CAP_SYS_ADMIN (a gateway running as root; not
 * a gateway under systemd's Delegate=yes running as its user). What stays
 * possible for a root agent either way (docs/containment.md): setns(2) back
 * into the host's cgroup namespace, or acting on any process directly.
 *
 * This module predicts what a session will get, for detection and the
 * doctor; the wrapper's "started" report says what each one got.
 */
import { readFile } from "node:fs/promises";
import { exists } from "./files.js";
import type { Cgroup2Mount, MountInfoEntry } from "./mountinfo.js";

export type BoundaryGap = "no-nsdelegate" | "no-cgroup-namespaces" | "not-privileged" | "unreadable";

export type Boundary = { holds: true; why: string } | { holds: false; code: BoundaryGap; why: string };

/** CAP_SYS_ADMIN's bit in /proc/PID/status CapEff */
const CAP_SYS_ADMIN = 21n;

/** What a session started now would get (see the header); never throws. */
export async function predictBoundary(entries: readonly MountInfoEntry[], mount: Cgroup2Mount): Promise<Boundary> {
  const mine = entries.find((e) => e.fsType === "cgroup2" && e.mountPoint === mount.mountPoint);
  if (!(await exists("/proc/self/ns/cgroup")))
    return {
      holds: false,
      code: "no-cgroup-namespaces",
      why: "this kernel has no cgroup namespaces (Linux < 4.6), so an agent running as root can move processes across its lease cgroup",
    };
  const caps = await capEff();
  if (caps === null)
    return {
      holds: false,
      code: "unreadable",
      why: "this process's capabilities cannot be read from /proc/self/status",
    };
  if (((caps >> CAP_SYS_ADMIN) & 1n) === 0n)
    return {
      holds: false,
      code: "not-privileged",
      why: `the wrapper cannot give an adapter its own cgroup namespace without CAP_SYS_ADMIN (this gateway is uid ${process.getuid?.() ?? "?"}), so an agent of this uid can move processes across its lease cgroup wherever it may write cgroup.procs (a delegated subtree)`,
    };
  if (mine === undefined || !mine.superOptions.includes("nsdelegate"))
    return {
      holds: false,
      code: "no-nsdelegate",
      why: `cgroup2 at ${mount.mountPoint} is not mounted with nsdelegate, so an adapter's cgroup namespace does not stop an agent running as root from moving processes across its lease cgroup (the host can turn it on: mount -o remount,nsdelegate cgroup2 ${mount.mountPoint}; systemd does on unified hosts)`,
    };
  return {
    holds: true,
    why: `each adapter gets a cgroup namespace rooted at its lease cgroup on a cgroup2 mounted with nsdelegate: the kernel refuses its tree any move across that cgroup, root included (unless it leaves the namespace with setns)`,
  };
}

async function capEff(): Promise<bigint | null> {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(await readFile("/proc/self/status", "utf8"));
    return m === null ? null : BigInt(`0x${m[1]}`);
  } catch {
    return null;
  }
}
