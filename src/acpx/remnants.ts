/**
 * Remnants: what is left of a lease's tree when its root (the wrapper) is
 * gone. That happens when the gateway AND its wrapper were killed at once
 * (SIGKILL, OOM killer): the wrapper's parent-death cleanup never ran, and the
 * adapter and its descendants were re-parented away. Lease verification says
 * "gone" (root absent), which on its own would leave them running forever.
 *
 * A remnant is accepted only on positive, unforgeable-by-accident evidence,
 * all of it required (fail closed):
 * - the lease is this instance's and its root was recorded (rootStartTime,
 *   bootId) and the host has not rebooted since (same boot id);
 * - the facts backend has exact identity and readable environments;
 * - the process runs under our uid, is not a zombie and passes the guards;
 * - it started no earlier than the recorded root (same clock, same boot);
 * - its environment carries BOTH the lease id (a random id minted for this
 *   spawn only) and this gateway's instance id.
 * Descendants of an accepted remnant are collected by parent links from the
 * same snapshot (a child that scrubbed its environment is still ours). Every
 * member keeps its own start time, which the reaper re-checks before each
 * signal. Nothing is ever found by command line.
 */
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../facts/types.js";
import { collectTree } from "../ownership/collect.js";
import { checkSignalTarget } from "../ownership/guards.js";
import type { ReapTarget } from "../ownership/reap.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY, type AcpxProcessLease, type OwnershipEvidence } from "../ownership/types.js";

export interface RemnantTree extends ReapTarget {
  evidence: OwnershipEvidence[];
}

const CONCURRENCY = 16;

/** True when a "gone" verdict came from an absent/zombie root on this boot (not from a reboot). */
export function rootVanished(evidence: readonly OwnershipEvidence[]): boolean {
  const rebooted = evidence.some((e) => e.check === "boot-id" && e.result === "mismatch");
  const bootMatched = evidence.some((e) => e.check === "boot-id" && e.result === "match");
  return !rebooted && bootMatched && evidence.some((e) => e.check === "root-alive" && e.result === "mismatch");
}

/**
 * For each lease (already judged "gone" with rootVanished), the remnant tree
 * found in `snapshot`, or nothing. One environment pass shared by all leases.
 */
export async function findRemnants(
  leases: readonly AcpxProcessLease[],
  facts: ProcessFacts,
  snapshot: ProcessSnapshot,
  gatewayInstanceId: string,
): Promise<Map<string, RemnantTree>> {
  const out = new Map<string, RemnantTree>();
  if (facts.identityStrength !== "exact" || facts.backend === "ps" || facts.backend === "none") return out;
  const uid = typeof process.getuid === "function" ? process.getuid() : null;
  if (uid === null) return out;
  const byId = new Map<string, { lease: AcpxProcessLease; start: number }>();
  for (const l of leases) {
    const start = Number(l.rootStartTime);
    if (l.gatewayInstanceId !== gatewayInstanceId || l.rootStartTime === undefined || !Number.isFinite(start)) continue;
    byId.set(l.leaseId, { lease: l, start });
  }
  if (byId.size === 0) return out;
  const oldest = Math.min(...[...byId.values()].map((x) => x.start));

  const candidates: ProcessInfo[] = [];
  for (const p of snapshot.processes.values()) {
    if (p.uid !== uid || p.state === "Z" || !checkSignalTarget(p.pid).allowed) continue;
    const st = Number(p.startTime);
    if (!Number.isFinite(st) || st < oldest) continue;
    candidates.push(p);
  }
  const details = await mapLimit(candidates, CONCURRENCY, async (p): Promise<ProcessDetails | null> => {
    try {
      return await facts.inspect(p.pid, { envKeys: [LEASE_ENV_KEY, INSTANCE_ENV_KEY] });
    } catch {
      return null;
    }
  });
  const seeds = new Map<string, ProcessInfo[]>();
  candidates.forEach((p, i) => {
    const d = details[i];
    if (!d || d.envReadable === false || String(d.startTime) !== String(p.startTime)) return;
    const id = d.env[LEASE_ENV_KEY];
    if (typeof id !== "string" || d.env[INSTANCE_ENV_KEY] !== gatewayInstanceId) return;
    const hit = byId.get(id);
    if (!hit || Number(p.startTime) < hit.start) return;
    const list = seeds.get(id);
    if (list) list.push(p);
    else seeds.set(id, [p]);
  });

  for (const [id, found] of seeds) {
    const { lease } = byId.get(id)!;
    // the oldest remnant anchors the tree; the others join as marker seeds
    const sorted = [...found].sort((a, b) => Number(a.startTime) - Number(b.startTime));
    const anchor = sorted[0]!;
    const members = collectTree(snapshot, anchor, { markerPids: sorted.slice(1).map((p) => p.pid) });
    if (members.length === 0) continue;
    out.set(id, {
      root: anchor,
      members,
      evidence: [
        {
          check: "remnant-env",
          result: "match",
          detail: `${found.length} process(es) started after root ${lease.rootPid} carry this lease id and this gateway's instance id`,
        },
      ],
    });
  }
  return out;
}

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
