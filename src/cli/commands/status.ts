/**
 * `proclease status [--state-dir D] [--json] [--watch] [--backend NAME]`: a
 * live view for an operator who wants to look rather than read JSON. For
 * every lease in the state dir: the lease (id, session key, state, age,
 * instance id), its live tree (wrapper → adapter → grandchildren with pid,
 * comm, age and whether each carries BOTH markers), and the verdict with the
 * evidence that decided it.
 *
 * Where a lease has its own cgroup (docs/containment.md): its memory.current
 * and memory.peak, or, once per report, why they cannot be read. Below the
 * leases: the orphan cgroups in this state dir's instance folders (no
 * lease's own; `proclease reap --orphan-cgroups` removes them).
 *
 * Read-only: the store is opened read-only, verification is ownership's
 * (verifyLeases: one snapshot for the whole batch), the marker answer is
 * ownership's one rule (markerVerdict), cgroups are only listed and read.
 * Nothing is signalled or written.
 */
import { existsSync } from "node:fs";
import type { MemoryReading } from "../../containment/index.js";
import { join } from "node:path";
import type { ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import {
  markerVerdict,
  MARKER_ENV_KEYS,
  openLeaseStore,
  settledLine,
  verifyLeases,
  type ProcessLease,
  type LeaseVerification,
  type MarkerVerdict,
  type OwnershipEvidence,
} from "../../ownership/index.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import {
  flag,
  formatAge,
  jsonLine,
  painter,
  plural,
  printableDeep,
  type Paint,
  resolveStateDir,
  resultHue,
  table,
  type CliIo,
  type ParsedArgs,
  factsHead,
} from "../shared/io.js";
import { labelProcesses } from "../shared/labels.js";
import { endedCell, endedLegend, leaseMemory, memoryFigures, memoryWhyLines } from "../shared/lease-view.js";
import { scanOrphanCgroups, type OrphanScan } from "../../ownership/host/orphan-cgroups.js";
import { sameProcess } from "../../facts/identity.js";
import { isZombieState } from "../../facts/liveness.js";
import { waitingOf, type WaitingSession } from "../../acpx/durable/waiting.js";

export const WATCH_INTERVAL_MS = 1000;
/** settled leases with nothing alive get one line each; only the most recent this many in text */
const SETTLED_LINES = 20;

export type ProcessRole = "wrapper" | "adapter" | "run" | "remnant" | "descendant";

export interface StatusProcess {
  pid: number;
  ppid: number;
  pgid: number;
  state: string;
  /** raw, in the backend's unit */
  startTime: string;
  /** epoch ms, null when the backend's unit cannot be converted */
  startedAt: number | null;
  comm: string | null;
  role: ProcessRole;
  /** both markers (lease id AND gateway instance id) in its environment: ownership's markerVerdict */
  markers: MarkerVerdict;
  /** 0 for a process whose parent is not in this list */
  depth: number;
}

export interface StatusLease {
  lease: ProcessLease;
  ageMs: number;
  verdict: LeaseVerification["verdict"];
  evidence: readonly OwnershipEvidence[];
  /** where `processes` comes from: the verified tree, the remnants of a gone root, or nothing verified alive */
  live: "tree" | "remnants" | "none";
  /** parents before children (display order) */
  processes: StatusProcess[];
  /** memory.current / memory.peak of the lease's own cgroup; absent when the lease records none */
  memory?: MemoryReading;
  /** a durable session waiting for a gateway to re-adopt it: since when, until when, why */
  waiting?: WaitingSession;
}

export interface StatusView {
  backend: ProcessFacts["backend"];
  identityStrength: ProcessFacts["identityStrength"];
  stateDir: string;
  takenAt: number;
  leases: StatusLease[];
  problems: { file: string; detail: string }[];
  /** cgroups in this state dir's instance folders that are no lease's own */
  orphanCgroups?: OrphanScan;
  /** set when the state dir holds no lease store */
  note?: string;
}

/** Argument plumbing; the view is collected by collectStatus and drawn by renderStatus. */
export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const stateDir = resolveStateDir(parsed);
  const facts = factsFromFlag(parsed);
  const json = flag(parsed, "json");
  const draw = async (watching: boolean) => {
    const view = await collectStatus(stateDir, facts);
    if (json) return jsonLine(view);
    return (watching && io.tty === true ? "\x1b[H\x1b[2J" : "") + renderStatus(view, io, watching);
  };
  if (!flag(parsed, "watch")) {
    io.out(await draw(false));
    return 0;
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    let first = true;
    while (!stop.signal.aborted && io.closed?.() !== true) {
      const frame = await draw(true);
      if (stop.signal.aborted) break;
      // piped text frames are told apart by a blank line; a terminal is redrawn in place
      io.out(!first && !json && io.tty !== true ? `\n${frame}` : frame);
      first = false;
      await sleep(WATCH_INTERVAL_MS, stop.signal);
    }
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  }
  return 0;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

export async function collectStatus(stateDir: string, facts: ProcessFacts): Promise<StatusView> {
  const base = factsHead(facts, stateDir);
  // no store folder: nothing to show, and nothing is created to show it
  if (!existsSync(join(stateDir, "acpx", "leases"))) {
    return { ...base, takenAt: Date.now(), leases: [], problems: [], note: `no lease store under ${stateDir}` };
  }
  const store = await openLeaseStore(stateDir, { readOnly: true });
  const { leases, problems } = await store.list();
  // one snapshot for the verification and the trees drawn from it; when the
  // process list cannot be read, verification answers "unknown" by itself
  const snapshot = await facts.snapshot().catch((): ProcessSnapshot | null => null);
  const takenAt = snapshot?.takenAt ?? Date.now();
  const verifications =
    leases.length === 0 ? [] : await verifyLeases(leases, facts, snapshot !== null ? { snapshot } : {});
  const members = verifications.flatMap((v) => (v.tree ?? v.remnants)?.members ?? []);
  const labels = await labelProcesses(facts, members);
  const leaseById = async (id: string) => leases.find((l) => l.leaseId === id);
  const out: StatusLease[] = [];
  for (const v of verifications) {
    const target = v.tree ?? v.remnants;
    const live = v.tree !== null ? "tree" : v.remnants !== null ? "remnants" : "none";
    const procs = target === null ? [] : orderTree(target.members, v.lease.rootPid);
    const markers = await Promise.all(procs.map(({ p }) => markersOf(facts, p, v.lease)));
    const memory = await leaseMemory(v.lease);
    const waiting = v.verdict === "owned" ? await waitingOf(stateDir, v.lease, leaseById, takenAt) : null;
    out.push({
      lease: v.lease,
      ageMs: Math.max(0, takenAt - v.lease.startedAt),
      verdict: v.verdict,
      evidence: v.evidence,
      live,
      processes: procs.map(({ p, depth }, i) => ({
        pid: p.pid,
        ppid: p.ppid,
        pgid: p.pgid,
        state: p.state,
        startTime: p.startTime,
        startedAt: labels.startedAt(p),
        comm: labels.comm(p.pid),
        role: roleOf(p, v.lease, live),
        markers: markers[i]!,
        depth,
      })),
      ...(memory !== undefined ? { memory } : {}),
      ...(waiting !== null ? { waiting } : {}),
    });
  }
  const orphanCgroups = await scanOrphanCgroups(
    stateDir,
    leases,
    problems.map((p) => p.file),
  );
  return {
    ...base,
    takenAt,
    leases: out,
    problems: problems.map((p) => ({ file: p.file, detail: p.detail })),
    orphanCgroups,
  };
}

/** Ownership's marker rule, asked of the very process in the snapshot (a pid reused since answers "unknown"). */
async function markersOf(facts: ProcessFacts, p: ProcessInfo, lease: ProcessLease): Promise<MarkerVerdict> {
  const d = await facts.inspect(p.pid, { envKeys: MARKER_ENV_KEYS }).catch(() => null);
  if (d === null || !sameProcess(d, p)) return "unknown";
  return markerVerdict(d, lease);
}

function roleOf(p: ProcessInfo, lease: ProcessLease, live: StatusLease["live"]): ProcessRole {
  if (live === "remnants") return "remnant";
  if (p.pid === lease.rootPid) return lease.kind === "supervisor" ? "run" : "wrapper";
  // the wrapper puts the adapter in a group of its own, recorded in the lease
  if (lease.kind === "acpx" && lease.processGroupId !== undefined && p.pid === lease.processGroupId) return "adapter";
  return "descendant";
}

/** Members (leaves first, as ownership returns them) as a tree: parents before children, the lease's root first. */
function orderTree(members: readonly ProcessInfo[], rootPid: number): Array<{ p: ProcessInfo; depth: number }> {
  const byPid = new Map(members.map((m) => [m.pid, m]));
  const kids = new Map<number, ProcessInfo[]>();
  for (const m of members) {
    if (m.ppid === m.pid || !byPid.has(m.ppid)) continue;
    const list = kids.get(m.ppid) ?? [];
    list.push(m);
    kids.set(m.ppid, list);
  }
  const tops = members
    .filter((m) => m.ppid === m.pid || !byPid.has(m.ppid))
    .sort((a, b) => (a.pid === rootPid ? -1 : b.pid === rootPid ? 1 : a.pid - b.pid));
  const out: Array<{ p: ProcessInfo; depth: number }> = [];
  const seen = new Set<number>();
  const visit = (p: ProcessInfo, depth: number) => {
    if (seen.has(p.pid)) return;
    seen.add(p.pid);
    out.push({ p, depth });
    for (const k of (kids.get(p.pid) ?? []).sort((a, b) => a.pid - b.pid)) visit(k, depth + 1);
  };
  for (const t of tops) visit(t, 0);
  // a parent cycle (pid reuse mid-walk) still shows every member
  for (const m of members) visit(m, 0);
  return out;
}

const MARKER_TEXT: Record<MarkerVerdict, string> = { match: "both", mismatch: "no", unknown: "unknown" };

export function renderStatus(collected: StatusView, io: CliIo, watching: boolean): string {
  // keys, comms, paths and reasons come from processes and records: escaped before anything is drawn
  const view = printableDeep(collected);
  const paint = painter(io);
  const clock = new Date(view.takenAt).toISOString().slice(11, 19);
  let out = backendLine(view);
  if (view.note !== undefined) {
    return out + `${view.note}${watching ? ` · ${clock} · every ${WATCH_INTERVAL_MS / 1000} s, Ctrl-C to stop` : ""}\n`;
  }
  const isLive = (l: StatusLease) => l.lease.state === "open" || l.lease.state === "closing";
  const full = view.leases.filter((l) => isLive(l) || l.processes.length > 0);
  const settled = view.leases.filter((l) => !full.includes(l)).sort((a, b) => b.lease.startedAt - a.lease.startedAt);
  out +=
    `state dir ${view.stateDir} · ${plural(view.leases.length, "lease")}, ${view.leases.filter(isLive).length} open/closing · ${clock}` +
    `${watching ? ` · every ${WATCH_INTERVAL_MS / 1000} s, Ctrl-C to stop` : ""}\n`;
  for (const l of full) out += "\n" + leaseBlock(l, paint, view.takenAt);
  if (settled.length > 0) {
    out += `\nsettled, nothing alive (${settled.length}${settled.length > SETTLED_LINES ? `, newest ${SETTLED_LINES} shown` : ""}):\n`;
    const rows = settled
      .slice(0, SETTLED_LINES)
      .map((l) => [
        `  ${l.lease.leaseId}`,
        paint(resultHue(l.lease.state), l.lease.state),
        `age ${formatAge(l.ageMs)}`,
        `verdict ${l.verdict}`,
        l.lease.sessionKey,
        `ended ${endedCell(l.lease)}`,
      ]);
    out += table(rows);
    for (const line of endedLegend(settled.slice(0, SETTLED_LINES).map((l) => l.lease))) out += `  ${line}\n`;
  }
  for (const line of memoryWhyLines(view.leases)) out += paint("dim", line) + "\n";
  if (view.orphanCgroups !== undefined) out += orphanLines(view.orphanCgroups, paint);
  for (const p of view.problems) out += paint("red", `problem: ${p.file}: ${p.detail}`) + "\n";
  return out;
}

/** The orphan cgroups (with the one command that removes them) and any instance folder that was refused; nothing when all is clean. */
export function orphanLines(scan: OrphanScan, paint: Paint): string {
  let out = "";
  if (scan.orphans.length > 0) {
    out += `\n${paint("yellow", `orphan cgroups (${scan.orphans.length})`)}: no lease's own; \`proclease reap --orphan-cgroups\` ends and removes them\n`;
    const rows = [["  CGROUP", "POPULATED", "WHY"]];
    for (const o of scan.orphans)
      rows.push([`  ${o.path}`, paint(o.populated === "populated" ? "red" : "dim", o.populated), o.caution ?? o.why]);
    out += table(rows);
  }
  for (const r of scan.folders)
    if (r.state === "refused" || r.state === "unknown")
      out += paint("red", `instance folder ${r.state}: ${r.why ?? r.folder}`) + "\n";
  for (const p of scan.problems) out += paint("red", `problem: ${p}`) + "\n";
  return out;
}

function leaseBlock(l: StatusLease, paint: Paint, now: number): string {
  const x = l.lease;
  let out =
    `${paint("bold", `lease ${x.leaseId}`)}  ${paint(resultHue(x.state), x.state)}  age ${formatAge(l.ageMs)}\n` +
    table([
      ["  session", x.sessionKey],
      ["  instance", x.gatewayInstanceId],
      [
        "  root",
        `pid ${x.rootPid || "- (not spawned yet)"}  pgid ${x.processGroupId ?? "-"}  start ${x.rootStartTime ?? "-"}`,
      ],
      ...(x.cgroup ? [["  cgroup", x.cgroup.path]] : []),
      // a reading that failed is said once below the leases, not in every block
      ...(l.memory?.ok === true ? [["  memory", memoryFigures(l.memory)]] : []),
    ]);
  const settled = settledLine(x);
  if (settled !== null) out += `  ${settled}\n`;
  if (l.waiting !== undefined)
    out += `  ${paint("yellow", `${l.lease.kind === "supervisor" ? "waits with its session until" : "awaits re-adoption until"} ${new Date(l.waiting.deadline).toISOString().slice(11, 19)} (in ${formatAge(l.waiting.deadline - now)})`)}: ${l.waiting.why}\n`;
  if (l.processes.length === 0) {
    out += `  live tree: ${paint("dim", "no process alive is verified as this lease's")}\n`;
  } else {
    out += `  live ${l.live === "tree" ? "tree (verified)" : "remnants (the wrapper is gone; these still carry both markers)"}:\n`;
    const rows = [["    PID", "AGE", "MARKERS", "ROLE", "COMM"]];
    const prefixes = treePrefixes(l.processes.map((p) => p.depth));
    for (const [i, p] of l.processes.entries()) {
      rows.push([
        `    ${p.pid}`,
        formatAge(p.startedAt === null ? null : now - p.startedAt),
        paint(p.markers === "match" ? "green" : p.markers === "mismatch" ? "red" : "yellow", MARKER_TEXT[p.markers]),
        p.role === "descendant" ? "" : p.role,
        `${prefixes[i]}${p.comm ?? "?"}${isZombieState(p) ? " (zombie)" : ""}`,
      ]);
    }
    out += table(rows);
  }
  out += `  verdict ${paint(resultHue(l.verdict), l.verdict)}: ${verdictWhy(l)}\n`;
  out += table(l.evidence.map((e) => [`    ${e.check}`, paint(resultHue(e.result), e.result), e.detail ?? ""]));
  return out;
}

/** `├─ ` / `└─ ` connectors (with `│  ` under an open branch) for rows listed parents-first with these depths. */
export function treePrefixes(depths: readonly number[]): string[] {
  // is the row at i the last of its siblings? (no later row at its depth before one shallower)
  const last = depths.map((d, i) => {
    for (let j = i + 1; j < depths.length; j++) {
      if (depths[j]! < d) return true;
      if (depths[j] === d) return false;
    }
    return true;
  });
  const open: boolean[] = []; // open[k]: the ancestor at depth k has siblings still to come
  return depths.map((d, i) => {
    if (d === 0) {
      open.length = 0;
      open[0] = !last[i];
      return "";
    }
    open.length = d;
    const lead = open
      .slice(1, d)
      .map((o) => (o ? "│  " : "   "))
      .join("");
    open[d] = !last[i];
    return `${lead}${last[i] ? "└─ " : "├─ "}`;
  });
}

/** One line on what decided the verdict; the evidence rows follow it. */
function verdictWhy(l: StatusLease): string {
  const count = (r: OwnershipEvidence["result"]) => l.evidence.filter((e) => e.result === r).map((e) => e.check);
  switch (l.verdict) {
    case "owned":
      return `the live root matches the lease (${plural(count("match").length, "matching check")}); ${plural(l.processes.length, "verified process")}`;
    case "mismatch":
      return `${count("mismatch").join(", ")} did not match: the process there is not this lease's, nothing would be signalled`;
    case "gone":
      return l.live === "remnants"
        ? `the root is gone; ${l.processes.length === 1 ? "1 remnant still carries" : `${l.processes.length} remnants still carry`} both markers`
        : "the root is not alive";
    default:
      return `ownership cannot be established (${count("unknown").join(", ") || "no evidence"} unknown): fail closed, nothing would be signalled`;
  }
}
