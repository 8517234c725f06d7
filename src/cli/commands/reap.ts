/**
 * `proclease reap [--state-dir D] [--dry-run] [--force] [--grace-ms MS] [--json] [--backend NAME]`:
 * the gateway's startup reap, run by an operator, through the same lifecycle
 * (ownership/lifecycle/lifecycle.ts reconcileLeases): this instance's open/closing
 * leases, ACPX sessions and supervisor runs alike, verified against one
 * snapshot, killed leaves first, settled, then retention.
 * A real run takes the state dir's lock like a gateway: while a gateway holds
 * it the command refuses, unless --force (then trees attached to a live
 * parent, leases with no pid yet and unknown evidence are left alone). A dry
 * run is read-only and shares explain's code path.
 *
 * `--orphan-cgroups` ends and removes cgroups instead of leases: those in the
 * state dir's instance folders that are no lease's own (lease-view.ts
 * scanOrphanCgroups, the list `status` and `doctor` show). Each one's identity
 * is checked again, then killCgroup (cgroup.kill, or the identity-checked
 * signal loop) and removeCgroup; each outcome is reported. The same lock rule
 * as for leases; a dry run signals nothing and removes nothing. It also
 * removes the EMPTY instance folders of state dirs that are gone, found
 * through the host's instance index (orphan-instances.ts), and never one
 * that holds a cgroup or a process.
 */
import {
  killCgroup,
  membersOf,
  removeCgroup,
  verifyCgroupIdentity,
  type KillOutcome,
  type RemoveOutcome,
} from "../../containment/index.js";
import type { ProcessFacts } from "../../facts/types.js";
import {
  DEFAULT_GRACE_MS,
  DEFAULT_RETENTION_MS,
  foreignInstanceOf,
  INSTANCE_ENV_KEY,
  reconcileLeases,
  type LeaseOutcome,
  type LeaseReconcileReport,
  type LifecycleDeps,
} from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import {
  EXIT,
  flag,
  graceMsOption,
  jsonLine,
  plural,
  printableDeep,
  resolveStateDir,
  table,
  type CliIo,
  type ParsedArgs,
  factsHead,
} from "../shared/io.js";
import { reapOrphanInstanceFolders, type InstanceFolderReport } from "../../ownership/host/orphan-instances.js";
import { scanOrphanCgroups, type InstanceFolder, type OrphanCgroup } from "../../ownership/host/orphan-cgroups.js";
import { attachedGuard, gatewayHolder, openReadOnly, openWriter } from "../shared/lease-view.js";

/** Argument plumbing only; the reaping itself is below. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  return reap(
    {
      stateDir: resolveStateDir(parsed),
      graceMs: graceMsOption(parsed),
      dryRun: flag(parsed, "dry-run"),
      force: flag(parsed, "force"),
      json: flag(parsed, "json"),
      facts: factsFromFlag(parsed),
      orphanCgroups: flag(parsed, "orphan-cgroups"),
    },
    io,
  );
}

interface ReapArgs {
  stateDir: string;
  graceMs: number | undefined;
  dryRun: boolean;
  force: boolean;
  json: boolean;
  facts: ProcessFacts;
  orphanCgroups: boolean;
}

async function reap(args: ReapArgs, io: CliIo): Promise<number> {
  const { stateDir, facts, json } = args;
  if (args.orphanCgroups) {
    // instance folders of deleted state dirs are no state dir's: swept whatever the given one holds (orphan-instances.ts)
    const instanceFolders = await reapOrphanInstanceFolders(args.dryRun);
    const foldersFailed = instanceFolders.entries.some((e) => e.action === "failed");
    const code = await underStateLock(args, io, {
      command: "reap --orphan-cgroups",
      lockedWhy:
        "it may be creating lease cgroups. Stop it first, or pass --force to leave alone any cgroup a live gateway may be making",
      nothingText: "no cgroup root is recorded there",
      nothingJson: { orphanCgroups: true, folders: [], entries: [], problems: [], instanceFolders },
      run: (deps, live, dryRun) => orphanPlan(stateDir, deps, live, dryRun),
      print: (r) => {
        if (json)
          io.out(
            jsonLine({
              ...factsHead(facts, stateDir),
              orphanCgroups: true,
              ...r,
              instanceFolders,
            }),
          );
        else io.out(formatOrphanReport(printableDeep(r)));
        return r.entries.some((e) => e.action === "failed") ? EXIT.failed : EXIT.ok;
      },
    });
    if (!json) io.out(formatInstanceFolders(printableDeep(instanceFolders)));
    return foldersFailed ? EXIT.failed : code;
  }
  return underStateLock(args, io, {
    command: "reap",
    lockedWhy: "it reaps its own leases. Stop it first, or pass --force to reap only what no live gateway can be using",
    nothingText: "nothing to reap",
    nothingJson: { examined: 0, entries: [] },
    run: (deps, live, dryRun) =>
      reconcileLeases(
        deps,
        dryRun
          ? { dryRun: true, skipAttached: attachedGuard(live) }
          : { skipAttached: attachedGuard(live), retentionMs: DEFAULT_RETENTION_MS },
      ),
    print: (r) => {
      if (json)
        io.out(
          jsonLine({
            ...factsHead(facts, stateDir),
            ...r,
            entries: r.entries.map(entryJson),
          }),
        );
      else io.out(formatReport(printableDeep(r)));
      return EXIT.ok;
    },
  });
}

/** What one kind of reap does; the state-dir lock, the dry run and the refusals around it are underStateLock's. */
interface ReapMode<R> {
  command: string;
  lockedWhy: string;
  nothingText: string;
  nothingJson: Record<string, unknown>;
  /** `live`: a gateway may be running (a dry run beside one, or --force) */
  run(deps: LifecycleDeps, live: boolean, dryRun: boolean): Promise<R>;
  print(r: R): number;
}

/**
 * The one sequence both reaps follow: a dry run reads only (and says when a
 * gateway holds the state dir); a real one takes the state dir's lock, or
 * refuses while a gateway holds it unless --force.
 */
async function underStateLock<R>(
  { stateDir, graceMs, dryRun, force, json, facts }: ReapArgs,
  io: CliIo,
  mode: ReapMode<R>,
): Promise<number> {
  if (!json) io.out(backendLine(facts));
  const nothing = () => {
    if (json)
      io.out(
        jsonLine({
          ...factsHead(facts, stateDir),
          dryRun,
          ...mode.nothingJson,
          note: "no gateway instance id in this state dir",
        }),
      );
    else io.out(`no gateway instance id under ${stateDir}: ${mode.nothingText} (nothing was created)\n`);
    return EXIT.ok;
  };
  if (dryRun) {
    const deps = await openReadOnly(stateDir, facts);
    if (!deps) return nothing();
    const holder = await gatewayHolder(stateDir, facts);
    if (holder.held && !json) {
      io.out(
        `a gateway${holder.holderPid !== null ? ` (pid ${holder.holderPid})` : ""} holds this state dir: ${mode.command} would refuse without --force; with --force it would do this:\n`,
      );
    }
    return mode.print(await mode.run(deps, holder.held, true));
  }
  const w = await openWriter(stateDir, facts, graceMs ?? DEFAULT_GRACE_MS, force);
  if (w.kind === "none") return nothing();
  if (w.kind === "locked") {
    const who = w.holderPid !== null ? ` (pid ${w.holderPid})` : "";
    io.err(`proclease reap: a gateway${who} holds ${stateDir}; ${mode.lockedWhy}\n`);
    return EXIT.failed;
  }
  try {
    return mode.print(await mode.run(w.deps, w.lock === null, false));
  } finally {
    await w.lock?.release();
  }
}

/** The JSON row of one lease: the outcome without the full verification object (its evidence is already there). */
export function entryJson(o: LeaseOutcome): Omit<LeaseOutcome, "verification"> {
  const { verification: _v, ...rest } = o;
  return rest;
}

/** A dry run says what would happen, in one form; a real run says what happened and the state it left. */
const WOULD: Record<LeaseOutcome["action"], string> = {
  killed: "kill the verified tree",
  "killed-remnants": "kill the remnants",
  "marked-lost": "mark it lost (no signal)",
  settled: "settle it closed (no signal)",
  "left-alone": "leave it",
  "skipped-live": "skip it",
  "awaiting-readoption": "leave it awaiting re-adoption",
};

export function formatReport(r: LeaseReconcileReport): string {
  let out =
    `${r.dryRun ? "dry run: " : ""}examined ${plural(r.examined, "open/closing lease")} ` +
    `of instance ${r.gatewayInstanceId} in ${r.elapsedMs} ms (${plural(r.snapshots, "snapshot")})\n`;
  const rows = r.dryRun
    ? [["LEASE", "ROOT", "VERDICT", "WOULD", "STATE", "WHY"]]
    : [["LEASE", "ROOT", "VERDICT", "ACTION", "STATE", "KILLED"]];
  for (const e of r.entries) {
    const root = String(e.rootPid || "-");
    const state = e.stateBefore === e.stateAfter ? `${e.stateAfter} (unchanged)` : `${e.stateBefore}→${e.stateAfter}`;
    if (r.dryRun) {
      const what = e.wouldKill ? `${WOULD[e.action]}: ${e.wouldKill.join(" ")}` : WOULD[e.action];
      rows.push([e.leaseId, root, e.verdict, what, state, e.why]);
    } else {
      rows.push([
        e.leaseId,
        root,
        e.verdict,
        e.action,
        state,
        e.kill ? e.kill.results.map((m) => `${m.pid}:${m.outcome}`).join(" ") : "",
      ]);
    }
  }
  if (r.entries.length > 0) out += table(rows);
  if (r.expired.length > 0) out += `retention removed ${plural(r.expired.length, "settled lease")}\n`;
  for (const p of r.problems) out += `problem: ${p.file}: ${p.detail}\n`;
  return out;
}

// ------------------------------------------------------------ orphan cgroups

/** One orphan (what lease-view.ts listed: its name, path, identity, populated state, and why it is nobody's) and what was done to it. */
export interface OrphanReapEntry extends Pick<OrphanCgroup, "name" | "path" | "id" | "populated" | "code" | "why"> {
  /** would-remove: a dry run's plan; removed: killed (if anything was in it) and removed; gone: it vanished first */
  action: "would-remove" | "removed" | "gone" | "left-alone" | "failed";
  detail?: string;
  kill?: KillOutcome;
  remove?: RemoveOutcome;
}

export interface OrphanReapReport {
  dryRun: boolean;
  folders: InstanceFolder[];
  entries: OrphanReapEntry[];
  problems: string[];
}

/** The plan (dry run) or its execution, one orphan at a time. `live`: a gateway may be running (dry run beside one, or --force). */
async function orphanPlan(
  stateDir: string,
  deps: LifecycleDeps,
  live: boolean,
  dryRun: boolean,
): Promise<OrphanReapReport> {
  const { leases, problems } = await deps.store.list();
  const scan = await scanOrphanCgroups(
    stateDir,
    leases,
    problems.map((p) => p.file),
  );
  const entries: OrphanReapEntry[] = [];
  const named = new Set(leases.map((l) => l.leaseId));
  for (const o of scan.orphans) entries.push(await orphanEntry(o, deps, live, dryRun, named.has(o.name)));
  return {
    dryRun,
    folders: scan.folders,
    entries,
    problems: [...scan.problems, ...problems.map((p) => `${p.file}: ${p.detail}`)],
  };
}

async function orphanEntry(
  o: OrphanCgroup,
  deps: LifecycleDeps,
  live: boolean,
  dryRun: boolean,
  leaseNamed: boolean,
): Promise<OrphanReapEntry> {
  const base = { name: o.name, path: o.path, id: o.id, populated: o.populated, code: o.code, why: o.why };
  const leave = (detail: string): OrphanReapEntry => ({ ...base, action: "left-alone", detail });
  if (o.caution !== undefined && (o.cautionOnlyIfLive !== true || live)) return leave(o.caution);
  const foreign = await foreignMarkers(o.path, deps);
  if (foreign !== null) return leave(foreign);
  if (dryRun)
    return {
      ...base,
      action: "would-remove",
      detail: o.populated === "populated" ? "cgroup.kill, then remove it" : "remove it",
    };
  // what was listed must still be what is acted on: no lease of that name since, the same directory
  if (!leaseNamed && (await deps.store.get(o.name).catch(() => undefined)) !== null) {
    return leave(`a lease file named ${o.name} appeared (or could not be read) since the listing`);
  }
  const id = await verifyCgroupIdentity(o.path, o.id);
  if (id === "gone") return { ...base, action: "gone", detail: "removed by someone else before this reap" };
  if (id !== "match")
    return leave(
      `its identity is now ${id === "mismatch" ? "another one (re-created since the listing)" : "unreadable"}`,
    );
  const kill = await killCgroup(o.path, { signaller: deps.signaller });
  if (kill.outcome !== "empty" && kill.outcome !== "gone")
    return { ...base, action: "failed", kill, detail: describe(kill) };
  const remove = await removeCgroup(o.path);
  const ok = remove.outcome === "removed" || remove.outcome === "gone";
  return { ...base, action: ok ? "removed" : "failed", kill, remove, detail: `${describe(kill)}; ${describe(remove)}` };
}

/**
 * A member carrying another gateway instance's marker belongs to another
 * state dir whose gateway shares this cgroup (two gateways in one unit share
 * `<cgroup>/proclease`): that cgroup is that gateway's lease, not an orphan.
 */
async function foreignMarkers(path: string, deps: LifecycleDeps): Promise<string | null> {
  const m = await membersOf(path);
  if (m.state !== "ok") return null;
  for (const pid of m.pids) {
    const marker = foreignInstanceOf(
      await deps.facts.inspect(pid, { envKeys: [INSTANCE_ENV_KEY] }).catch(() => null),
      deps.gatewayInstanceId,
    );
    if (marker !== null) {
      return `pid ${pid} in it carries gateway instance ${marker}'s marker (not ${deps.gatewayInstanceId}): another state dir's lease under a shared cgroup root; left alone`;
    }
  }
  return null;
}

function describe(r: KillOutcome | RemoveOutcome): string {
  if ("why" in r) return `${r.outcome}: ${r.why}`;
  if (r.outcome === "empty") return r.via === "already-empty" ? "nothing in it" : `emptied by ${r.via}`;
  if (r.outcome === "survivors")
    return `survivors (${r.pids?.join(" ") ?? "unknown pids"}) after ${r.via}${r.detail ? `: ${r.detail}` : ""}`;
  if (r.outcome === "busy") return `busy (${r.populated}): ${r.detail}`;
  return r.outcome;
}

export function formatOrphanReport(r: OrphanReapReport): string {
  let out = `${r.dryRun ? "dry run: " : ""}${r.entries.length === 0 ? "no orphan cgroups" : plural(r.entries.length, "orphan cgroup")} in ${plural(r.folders.filter((x) => x.state === "listed").length, "instance folder")}\n`;
  if (r.entries.length > 0) {
    const rows = [["CGROUP", "POPULATED", r.dryRun ? "WOULD" : "ACTION", "DETAIL", "WHY"]];
    for (const e of r.entries)
      rows.push([e.path, e.populated, e.action === "would-remove" ? "remove" : e.action, e.detail ?? "", e.why]);
    out += table(rows);
  }
  for (const x of r.folders)
    if (x.state === "refused" || x.state === "unknown") out += `instance folder ${x.state}: ${x.why ?? x.folder}\n`;
  for (const p of r.problems) out += `problem: ${p}\n`;
  return out;
}

export function formatInstanceFolders(r: InstanceFolderReport): string {
  if (r.index === null)
    return "instance folders of deleted state dirs: not looked for (this host has no instance index)\n";
  let out = `${r.dryRun ? "dry run: " : ""}${r.entries.length === 0 ? "no instance folders" : plural(r.entries.length, "instance folder")} whose state dir is gone (index ${r.index})\n`;
  if (r.entries.length > 0) {
    const rows = [["FOLDER", "STATE", r.dryRun ? "WOULD" : "ACTION", "DETAIL", "STATE DIR (GONE)"]];
    for (const e of r.entries)
      rows.push([e.folder, e.state, e.action === "would-remove" ? "remove" : e.action, e.detail, e.stateDir]);
    out += table(rows);
  }
  if (r.forgotten.length > 0)
    out += `${r.dryRun ? "would forget" : "forgot"} ${plural(r.forgotten.length, "index record")}: ${r.forgotten.join(" ")}\n`;
  for (const p of r.problems) out += `problem: ${p}\n`;
  return out;
}
