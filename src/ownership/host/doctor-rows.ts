/**
 * The doctor's rows, for `proclease doctor` and the plugin's `/acp doctor`
 * alike: what this host allows (facts/host-capabilities.ts), what a gateway
 * started here would get for containment, and with a state dir, the cgroups
 * in its instance folders that are no lease's own and the instance folders
 * whose state dir is gone. Read-only: nothing is created, moved or removed.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { hostCapabilityRows, type DoctorRow } from "../../facts/host-capabilities.js";
import { loadNative } from "../../facts/native.js";
import type { ProcessFacts } from "../../facts/types.js";
import { plural } from "../../facts/words.js";
import { openLeaseStore } from "../leases/lease-store.js";
import { scanOrphanCgroups } from "./orphan-cgroups.js";
import { scanOrphanInstanceFolders } from "./orphan-instances.js";

/** What a gateway started here would get (docs/containment.md); asked without moving this process anywhere. */
async function containmentRow(): Promise<DoctorRow> {
  const cap = "containment";
  const { detectContainment } = await import("../../containment/index.js");
  const c = await detectContainment({ allowGatewayMove: false });
  if (!c.available) {
    return {
      capability: cap,
      ok: false,
      detail: `off: ${c.why}. Without it, a grandchild that clears its environment and calls setsid outlives a SIGKILL of gateway + wrapper (its lease settles lost); no per-session memory figures`,
    };
  }
  const missing = c.missingControllers.map((m) => `${m.controller}: ${m.why}`).join("; ");
  return {
    capability: cap,
    ok: true,
    detail: `contained: each lease in ${c.root}/<instance id>/<leaseId> (cgroup v2 at ${c.mount}; its own members ended on a frozen cgroup, what is not its own moved out)${missing ? `; not per session: ${missing}` : ""}; boundary ${c.boundary.holds ? "held" : "not held"}: ${c.boundary.why}`,
  };
}

/**
 * Cgroups in the state dir's instance folders that no lease owns, and
 * instance folders of any state dir that is gone (orphan-instances.ts).
 * Read-only; `reap --orphan-cgroups` removes them.
 */
export async function orphanCgroupsRow(stateDir: string): Promise<DoctorRow> {
  const own = await stateDirOrphansRow(stateDir);
  const scan = await scanOrphanInstanceFolders();
  if (scan.orphans.length === 0 && scan.problems.length === 0) return own;
  const folders = scan.orphans.map((o) => `${o.folder} (${o.state}: ${o.why}; its state dir ${o.stateDir} is gone)`);
  const more = [
    ...(folders.length > 0
      ? [
          `${plural(folders.length, "instance folder")} whose state dir is gone: ${folders.join(", ")}; \`proclease reap --orphan-cgroups\` removes the empty ones`,
        ]
      : []),
    ...scan.problems.map((p) => `instance index: ${p}`),
  ];
  return { capability: own.capability, ok: false, detail: [own.detail, ...more].join("; ") };
}

async function stateDirOrphansRow(stateDir: string): Promise<DoctorRow> {
  const cap = "orphan-cgroups";
  let leases: Parameters<typeof scanOrphanCgroups>[1] = [];
  let unreadable: string[] = [];
  try {
    if (existsSync(join(stateDir, "acpx", "leases"))) {
      const listed = await (await openLeaseStore(stateDir, { readOnly: true })).list();
      leases = listed.leases;
      unreadable = listed.problems.map((p) => p.file);
    }
  } catch (e) {
    return {
      capability: cap,
      ok: false,
      detail: `cannot read the leases of ${stateDir}: ${e instanceof Error ? e.message : String(e)}`,
    };
  }
  const scan = await scanOrphanCgroups(stateDir, leases, unreadable);
  const bad = [
    ...scan.folders
      .filter((r) => r.state === "refused" || r.state === "unknown")
      .map((r) => `instance folder ${r.state}: ${r.why ?? r.folder}`),
    ...scan.problems,
  ];
  if (scan.folders.length === 0) {
    return {
      capability: cap,
      ok: bad.length === 0,
      detail:
        bad.length > 0
          ? bad.join("; ")
          : `none: ${stateDir} records no proclease cgroup root and no lease records a cgroup`,
    };
  }
  const where = scan.folders.filter((r) => r.state === "listed").map((r) => r.folder);
  if (scan.orphans.length === 0) {
    return {
      capability: cap,
      ok: bad.length === 0,
      detail: [`none in ${where.join(", ") || "the recorded instance folders (none exists now)"}`, ...bad].join("; "),
    };
  }
  const list = scan.orphans.map((o) => `${o.path} (${o.populated}: ${o.caution ?? o.why})`).join(", ");
  return {
    capability: cap,
    ok: false,
    detail: [
      `${plural(scan.orphans.length, "orphan cgroup")}: ${list}; \`proclease reap --orphan-cgroups --state-dir ${stateDir}\` ends and removes them`,
      ...bad,
    ].join("; "),
  };
}

/** Every doctor row: the host's facts capabilities, containment, and with a state dir its orphan cgroups. */
export async function collectDoctorRows(
  facts: ProcessFacts,
  forced: string | undefined,
  stateDir?: string,
): Promise<DoctorRow[]> {
  return [
    ...(await hostCapabilityRows(facts, forced, loadNative())),
    await containmentRow(),
    ...(stateDir !== undefined ? [await orphanCgroupsRow(stateDir)] : []),
  ];
}
