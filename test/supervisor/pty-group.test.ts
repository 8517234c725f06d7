/**
 * The group a PTY run's lease records is the run's own: node-pty's child makes
 * itself a session (and group) leader with setsid after the fork, and the
 * spawn returns before that has necessarily happened, so a group read from the
 * live root at spawn time can be the gateway's. Such a lease never verifies,
 * and after a gateway crash the run would never be reaped.
 *
 * The oracle is independent of the library: the lease files are parsed as JSON
 * from the state dir, and groups are read from /proc/PID/stat here.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { explainLease } from "../../src/ownership/verify/verify.js";
import { loadNodePty } from "../../src/supervisor/adapters/pty.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import type { ManagedRun } from "../../src/supervisor/shared/types.js";
import { readStat } from "../helpers/liveness.js";
import { gatewayProcessHarness } from "./helpers.js";

const PTY = await loadNodePty().then(
  () => true,
  () => false,
);
const PTY_NOTE = PTY ? "" : " [skipped: node-pty cannot be loaded here]";
if (!PTY) console.log(`pty-group.test:${PTY_NOTE}`);

const { pids, stateDir } = gatewayProcessHarness("proclease-pty-group-");

const RUNS = 100;
const CONCURRENT = 10;

/** every lease file in a state dir, parsed by hand (not through the lease store) */
function leaseFiles(dir: string): Map<string, { rootPid?: number; processGroupId?: number }> {
  const folder = join(dir, "acpx", "leases");
  const out = new Map<string, { rootPid?: number; processGroupId?: number }>();
  for (const f of readdirSync(folder)) {
    if (!f.endsWith(".json")) continue;
    const v = JSON.parse(readFileSync(join(folder, f), "utf8")) as {
      leaseId: string;
      rootPid?: number;
      processGroupId?: number;
    };
    out.set(v.leaseId, v);
  }
  return out;
}

describe("PTY runs' recorded process group", () => {
  it.skipIf(!PTY)(
    `${RUNS} leased PTY runs each record the run's own group, never the gateway's${PTY_NOTE}`,
    { timeout: 120_000 },
    async () => {
      const dir = await stateDir();
      const sup = createProcessSupervisor({ stateDir: dir, graceMs: 200 });
      const store = await openLeaseStore(dir);
      const facts = getProcessFacts();
      const gatewayGroup = readStat(process.pid)!.pgrp;
      const runs: ManagedRun[] = [];
      try {
        for (let i = 0; i < RUNS; i += CONCURRENT) {
          const batch = await Promise.all(
            Array.from({ length: Math.min(CONCURRENT, RUNS - i) }, () =>
              sup.spawn({
                sessionId: "s",
                backendId: "t",
                background: true,
                mode: "pty",
                ptyCommand: "exec sleep 1000",
              }),
            ),
          );
          for (const r of batch) {
            pids.add(r.pid!);
            runs.push(r);
          }
        }
        // read as spawn() returned them: the lease is attached before spawn() resolves
        const leases = leaseFiles(dir);
        const rows = runs.map((r) => {
          const lease = leases.get(sup.getRecord(r.runId)!.leaseId!);
          return {
            pid: r.pid!,
            recordedGroup: lease?.processGroupId,
            recordedRoot: lease?.rootPid,
            liveGroup: readStat(r.pid!)?.pgrp,
          };
        });
        const wrong = rows.filter((r) => r.recordedGroup !== r.pid || r.recordedRoot !== r.pid);
        const evidence = `gateway pid ${process.pid}, gateway group ${gatewayGroup}; ${wrong.length} of ${RUNS} leases wrong: ${JSON.stringify(wrong.slice(0, 20))}`;
        expect(wrong.length, evidence).toBe(0);
        expect(rows.filter((r) => r.recordedGroup === gatewayGroup).length, evidence).toBe(0);
        // the library's verification of each lease as spawn() returned it: owned, the recorded group matching
        const verdicts = new Map<string, number>();
        for (const r of runs) {
          const lease = (await store.get(sup.getRecord(r.runId)!.leaseId!))!;
          const v = await explainLease(lease, facts, { gatewayInstanceId: lease.gatewayInstanceId });
          const key = `${v.verdict}/${v.evidence.find((e) => e.check === "process-group")?.result ?? "no group check"}`;
          verdicts.set(key, (verdicts.get(key) ?? 0) + 1);
        }
        expect(Object.fromEntries(verdicts)).toEqual({ "owned/match": RUNS });
        // and the live roots are in their own groups (the premise: node-pty made each a session leader)
        expect(rows.filter((r) => r.liveGroup !== r.pid).length, evidence).toBe(0);
      } finally {
        for (const r of runs) r.cancel();
        await Promise.all(runs.map((r) => r.wait()));
        await sup.shutdown();
      }
    },
  );
});
