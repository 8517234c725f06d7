/**
 * What a batch reconcile shares between its kills (src/ownership/verify/batch-facts.ts):
 * the sliced runner for signal sends and the facts whose walks and exit
 * polls they share; then real batches: every lease marked closing before
 * the first signal, a settlement that throws stopping none of the others,
 * and trees that fork children mid-teardown, which only a walk taken after
 * their own TERM can see.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { createSignaller } from "../../src/facts/signal.js";
import type { ProcessFacts, ProcessSnapshot } from "../../src/facts/types.js";
import { coalescingFacts, slicedRunner } from "../../src/ownership/verify/batch-facts.js";
import type { LeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  computeCommandHash,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  reconcileLeases,
  settleLease,
} from "../../src/ownership/index.js";
import {
  alive,
  disposeAfterEach,
  tempStateDir,
  testMarkerEnv,
  trackChild,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

disposeAfterEach();
const FACTS = getProcessFacts();
// a coarse start time with no readable environment verifies nothing as owned: the batch rightly signals nothing
const COARSE =
  FACTS.identityStrength === "exact"
    ? null
    : ` (skipped: the ${FACTS.backend} backend's identity is ${FACTS.identityStrength}, so no lease verifies as owned and nothing is signalled)`;

/** The host's facts with some calls replaced. */
function factsWith(over: Partial<Pick<ProcessFacts, "snapshot" | "inspectMany">>): ProcessFacts {
  return {
    backend: FACTS.backend,
    identityStrength: FACTS.identityStrength,
    snapshot: over.snapshot ?? (() => FACTS.snapshot()),
    inspect: (pid, o) => FACTS.inspect(pid, o),
    inspectMany: over.inspectMany ?? ((pids, o) => FACTS.inspectMany(pids, o)),
  };
}

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe("slicedRunner", () => {
  it("runs the queued calls in call order, a slice per turn: a timer set before 100 calls of 0.2 ms fires before the last one runs", async () => {
    const { run, idle } = slicedRunner(1);
    const order: number[] = [];
    let timerAt = -1;
    setTimeout(() => (timerAt = order.length), 0);
    const all = Array.from({ length: 100 }, (_, i) =>
      run(async () => {
        busy(0.2);
        order.push(i);
        return i * 2;
      }),
    );
    expect(await Promise.all(all)).toEqual(Array.from({ length: 100 }, (_, i) => i * 2));
    await idle();
    expect(order).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(timerAt).toBeGreaterThanOrEqual(0);
    expect(timerAt).toBeLessThan(100);
  });

  it("a call that throws, synchronously or not, rejects only its own caller; idle() resolves once nothing is queued", async () => {
    const { run, idle } = slicedRunner(1);
    const a = run(() => {
      throw new Error("sync");
    });
    const b = run(async () => {
      throw new Error("async");
    });
    const c = run(async () => "fine");
    await expect(a).rejects.toThrow("sync");
    await expect(b).rejects.toThrow("async");
    await expect(c).resolves.toBe("fine");
    await expect(idle()).resolves.toBeUndefined();
  });
});

describe("coalescingFacts", () => {
  it("a snapshot asked while a walk runs gets the next walk, never the one that began before it asked; callers that ask meanwhile share that next walk", async () => {
    const started: Array<(s: ProcessSnapshot) => void> = [];
    const facts = coalescingFacts(factsWith({ snapshot: () => new Promise((r) => started.push(r)) }));
    const first = facts.snapshot();
    await waitFor(() => started.length === 1, 2000, 1);
    const second = facts.snapshot();
    const third = facts.snapshot();
    // the second walk does not begin until the first is over
    await new Promise((r) => setTimeout(r, 20));
    expect(started.length).toBe(1);
    const snap = await FACTS.snapshot();
    started[0]!(snap);
    await expect(first).resolves.toBe(snap);
    await waitFor(() => started.length === 2, 2000, 1);
    const next = await FACTS.snapshot();
    started[1]!(next);
    await expect(second).resolves.toBe(next);
    await expect(third).resolves.toBe(next);
    expect(started.length).toBe(2);
  });

  it("inspectMany calls of one turn are one call, each caller gets its own pids' answers in order; a bad pid fails only its caller", async () => {
    let calls = 0;
    const counted = factsWith({ inspectMany: (p, o) => (calls++, FACTS.inspectMany(p, o)) });
    const facts = coalescingFacts(counted);
    const pids = [...(await FACTS.snapshot()).processes.keys()].slice(0, 30);
    const a = facts.inspectMany(pids.slice(0, 10));
    const b = facts.inspectMany([process.pid, 4_194_000, ...pids.slice(10, 30)]);
    const bad = facts.inspectMany([process.pid, -5]);
    await expect(bad).rejects.toThrow();
    const [ra, rb] = await Promise.all([a, b]);
    expect(calls).toBe(1);
    expect(ra.map((d) => d?.pid ?? null)).toEqual(
      (await FACTS.inspectMany(pids.slice(0, 10))).map((d) => d?.pid ?? null),
    );
    expect(rb[0]?.pid).toBe(process.pid);
    expect(rb[1]).toBeNull();
    expect(rb).toHaveLength(22);
  });
});

describe("a batch reconcile of real trees", () => {
  it.skipIf(COARSE !== null)(
    `every lease is marked closing before the first signal; a settlement that throws stops none of the others, and the reconcile then rejects with its error${COARSE ?? ""}`,
    async () => {
      const { store, gid, roots, leaseIds } = await leasedRoots(
        "batch-order",
        "sleeper.sh",
        "sleep 1000\n",
        12,
        async (pid) => (await FACTS.inspect(pid))?.argv?.[0] === "/bin/sh",
      );
      const events: string[] = [];
      const broken = leaseIds[5]!;
      // one lease's record fails with an error that is not a refused write: its settlement throws before its move to closing
      const recording: LeaseStore = {
        ...store,
        advance: async (id, step) => {
          if (id === broken) throw new Error("the record's disk failed");
          const l = await store.advance(id, step);
          if (l?.state === "closing") events.push("closing");
          return l;
        },
      };
      const signaller = createSignaller(FACTS);
      const counting = {
        ...signaller,
        signal: (pid: number, start: string, sig: NodeJS.Signals) => (
          events.push("signal"),
          signaller.signal(pid, start, sig)
        ),
      };
      await expect(
        reconcileLeases({ store: recording, facts: FACTS, signaller: counting, graceMs: 1000, gatewayInstanceId: gid }),
      ).rejects.toThrow("the record's disk failed");
      expect(events.filter((e) => e === "closing")).toHaveLength(11);
      expect(events.indexOf("signal")).toBe(11);
      // the broken lease was never marked closing, so nothing of it was signalled: its root lives on
      expect(roots.filter(alive)).toEqual([roots[5]]);
      for (const [i, id] of leaseIds.entries())
        expect((await store.get(id))?.state, `lease ${i}`).toBe(i === 5 ? "open" : "closed");
    },
    60_000,
  );

  it.skipIf(COARSE !== null)(
    `20 leases killed together: each root forks a child on SIGTERM, without the lease's markers, and the batch's shared walks still find and end every one${COARSE ?? ""}`,
    async () => {
      // on TERM: a child that does not carry the lease's markers (only the tree walk can tell it is ours); the root lives on
      const body =
        'trap \'env -u OPENCLAW_ACPX_LEASE_ID -u OPENCLAW_GATEWAY_INSTANCE_ID sleep 1000 & echo $! > "$0.$$"\' TERM\necho up > "$0.$$.up"\nwhile :; do sleep 0.05; done\n';
      const { store, gid, script, roots, leaseIds } = await leasedRoots(
        "batch",
        "forks-on-term.sh",
        body,
        20,
        (pid, script) => readable(`${script}.${pid}.up`),
      );
      let snapshots = 0;
      const facts = factsWith({ snapshot: () => (snapshots++, FACTS.snapshot()) });
      const report = await reconcileLeases({
        store,
        facts,
        signaller: createSignaller(FACTS),
        graceMs: 1500,
        gatewayInstanceId: gid,
      });
      const forked = roots.map((pid) => Number(readFileSync(`${script}.${pid}`, "utf8")));
      forked.forEach(trackPid);
      expect(report.entries.map((e) => [e.action, e.stateAfter])).toEqual(leaseIds.map(() => ["killed", "closed"]));
      for (const [i, e] of report.entries.entries()) {
        // the child forked on TERM is in its lease's own kill report, ended by it
        expect(e.kill?.results.find((r) => r.pid === forked[i])?.outcome, `lease ${i}`).toMatch(
          /^(killed|exited-after-term)$/,
        );
      }
      expect([...roots, ...forked].filter(alive)).toEqual([]);
      // 20 trees, two walks each and a re-verification apiece when killed alone; shared here
      console.log(`batch of 20: ${snapshots} snapshot() calls, ${report.elapsedMs} ms`);
      expect(snapshots).toBeLessThan(20);
    },
    60_000,
  );
});

describe("settlements started at once by separate callers", () => {
  it.skipIf(COARSE !== null)(
    `12 settleLease calls of one gateway at once (a close ending its terminals) share their verifications: fewer environment passes than leases, every tree ended and closed${COARSE ?? ""}`,
    async () => {
      const { store, gid, roots, leaseIds } = await leasedRoots(
        "settle-shared",
        "sleeper.sh",
        "sleep 1000\n",
        12,
        async (pid) => (await FACTS.inspect(pid))?.argv?.[0] === "/bin/sh",
      );
      // an environment pass reads the markers of many processes (a verification's roots, then its candidates)
      let envPasses = 0;
      const facts = factsWith({
        inspectMany: (pids, o) => ((o?.envKeys?.length ?? 0) > 0 && envPasses++, FACTS.inspectMany(pids, o)),
      });
      const deps = { store, facts, signaller: createSignaller(FACTS), graceMs: 1000, gatewayInstanceId: gid };
      const leases = await Promise.all(leaseIds.map(async (id) => (await store.get(id))!));
      const outcomes = await Promise.all(leases.map((l) => settleLease(deps, l)));
      expect(outcomes.map((o) => [o.action, o.stateAfter])).toEqual(leaseIds.map(() => ["killed", "closed"]));
      expect(roots.filter(alive)).toEqual([]);
      // each alone reads environments at least twice (its verification, the one after its kill)
      console.log(`12 settlements at once: ${envPasses} environment passes`);
      expect(envPasses).toBeLessThan(12);
    },
    60_000,
  );
});

/**
 * `count` leases of one gateway, each with a live root: `/bin/sh <script>`
 * (written under the wrapper root with `body`), detached and carrying its
 * lease's markers, recorded once `ready(pid, script)` says it runs.
 */
async function leasedRoots(
  label: string,
  name: string,
  body: string,
  count: number,
  ready: (pid: number, script: string) => boolean | Promise<boolean>,
) {
  const stateDir = tempStateDir(label);
  const gid = await loadOrCreateGatewayInstanceId(stateDir);
  const store = await openLeaseStore(stateDir, { durable: false });
  const wrapperRoot = join(stateDir, "acpx", "wrappers");
  const script = join(wrapperRoot, name);
  mkdirSync(wrapperRoot, { recursive: true, mode: 0o700 });
  writeFileSync(script, body);
  const argv = ["/bin/sh", script];
  const roots: number[] = [];
  const leaseIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const lease = await store.create({
      kind: "acpx",
      gatewayInstanceId: gid,
      sessionKey: `${label}:${i}`,
      wrapperRoot,
      wrapperPath: script,
      commandHash: computeCommandHash(argv),
    });
    const c = trackChild(
      spawn(argv[0]!, argv.slice(1), {
        stdio: "ignore",
        detached: true,
        env: {
          ...process.env,
          ...testMarkerEnv(),
          OPENCLAW_ACPX_LEASE_ID: lease.leaseId,
          OPENCLAW_GATEWAY_INSTANCE_ID: gid,
        },
      }),
    );
    c.unref();
    await waitFor(() => ready(c.pid!, script), 10_000);
    const d = (await FACTS.inspect(c.pid!))!;
    await store.update(lease.leaseId, {
      rootPid: c.pid!,
      processGroupId: c.pid!,
      rootStartTime: d.startTime,
      bootId: d.bootId,
      pidNamespace: d.pidNamespace,
    });
    roots.push(c.pid!);
    leaseIds.push(lease.leaseId);
  }
  return { store, gid, script, roots, leaseIds };
}

function readable(path: string): boolean {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}
