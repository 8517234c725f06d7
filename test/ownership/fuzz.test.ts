/**
 * Fuzz: random and truncated lease JSON through the store
 * and the verifier. Nothing may throw to the caller and nothing may be
 * signalled: the only live process a fuzzed lease can name is an impostor.
 */
import fc from "fast-check";
import { mkdtemp, readdir, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  LEASE_SCHEMA_VERSION,
  explainLease,
  openLeaseStore,
  parseLeaseRecord,
  killLeaseVerification,
  killOwnedTree,
  verifyLeases,
  verifyLegacyRecord,
  type AcpxProcessLease,
  type LeaseStore,
} from "../../src/ownership/index.js";
import { RecordingSignaller, SimFacts } from "./sim.js";

const P = 4_100_000;
const base = {
  schemaVersion: LEASE_SCHEMA_VERSION,
  leaseId: "fuzz-1",
  gatewayInstanceId: "gw-A",
  sessionKey: "s",
  wrapperRoot: "/opt/gw/acpx",
  wrapperPath: "/opt/gw/acpx/wrapper.mjs",
  rootPid: P + 1,
  processGroupId: P + 2,
  commandHash: "00".repeat(32),
  startedAt: 1,
  state: "open",
  rootStartTime: "5000",
  bootId: "boot-aaaa",
  pidNamespace: "pid:[4026531836]",
  updatedAt: 2,
};

/**
 * a table where every pid a lease could plausibly name belongs to an impostor;
 * some carry the base lease's id under our uid but another gateway's instance
 * marker, so a fuzzed lease whose root is gone meets look-alike remnants
 */
function impostorTable(): SimFacts {
  const sim = new SimFacts();
  const my = process.getuid?.() ?? 1000;
  for (let i = 0; i < 20; i++) {
    const lookAlike = i % 3 === 1;
    sim.add({
      name: `imp${i}`,
      pid: P + i,
      ppid: 1,
      pgid: P + i,
      sid: P + i,
      uid: lookAlike ? my : 1000,
      state: i % 7 === 3 ? "Z" : "S",
      startTime: "7777777",
      argv: ["imp"],
      exePath: "/usr/bin/imp",
      envReadable: i % 2 === 0,
      env: lookAlike ? { OPENCLAW_ACPX_LEASE_ID: base.leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-other" } : {},
    });
  }
  return sim;
}

const anyJson = fc.jsonValue({ maxDepth: 3 });
const mutated = fc
  .record({
    drop: fc.subarray(Object.keys(base)),
    set: fc.dictionary(fc.constantFrom(...Object.keys(base), "extra"), anyJson, { maxKeys: 4 }),
    pid: fc.oneof(fc.integer({ min: -5, max: P + 25 }), fc.constantFrom(P + 1, P + 3, 0, 1, process.pid)),
  })
  .map(({ drop, set, pid }) => {
    const o: Record<string, unknown> = { ...base, rootPid: pid, ...set };
    for (const k of drop) delete o[k];
    return o;
  });
const text = fc.oneof(
  mutated.map((o) => JSON.stringify(o)),
  fc.tuple(mutated, fc.nat()).map(([o, n]) => {
    const s = JSON.stringify(o);
    return s.slice(0, n % (s.length + 1)); // truncated
  }),
  anyJson.map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 120 }).map((b) => Buffer.from(b).toString("latin1")),
);

let dir: string;
let store: LeaseStore;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "own-fuzz-"));
  store = await openLeaseStore(dir, { durable: false });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("fuzz", () => {
  it("random and truncated lease files: list never throws, verify+reap never signals", async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(text, fc.boolean(), async (content, asName) => {
        const id = `f${n++}`;
        let name = `${id}.json`;
        // sometimes the file is named after the lease inside, so a valid record is accepted as such
        if (asName) {
          try {
            const v = JSON.parse(content) as { leaseId?: unknown };
            if (typeof v?.leaseId === "string" && /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(v.leaseId))
              name = `${v.leaseId}.json`;
          } catch {
            // keep the generated name
          }
        }
        await writeFile(join(store.dir, name), content, { mode: 0o600 });
        const { leases, problems } = await store.list();
        for (const l of leases)
          expect(parseLeaseRecord({ ...l, schemaVersion: LEASE_SCHEMA_VERSION }, true).ok).toBe(true);
        expect(leases.length + problems.length).toBeGreaterThanOrEqual(1);
        const sim = impostorTable();
        const sig = new RecordingSignaller(sim);
        const vs = await verifyLeases(leases, sim, { gatewayInstanceId: "gw-A" });
        for (const v of vs) {
          expect(["owned", "gone", "mismatch", "unknown"]).toContain(v.verdict);
          await killLeaseVerification(v, { facts: sim, signaller: sig, graceMs: 10, pollMs: 1, confirmMs: 10 });
        }
        expect(sig.log).toEqual([]);
        // clean slate for the next run
        await unlink(join(store.dir, name)).catch(() => undefined);
        for (const sub of ["quarantine", "archive"]) {
          for (const f of await readdir(join(store.dir, sub))) await unlink(join(store.dir, sub, f));
        }
      }),
      { numRuns: 300 },
    );
  }, 60_000);

  it("arbitrary values straight into the verifiers never throw and never verify", async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutated, anyJson), async (value) => {
        const sim = impostorTable();
        const sig = new RecordingSignaller(sim);
        const v = await explainLease(value as unknown as AcpxProcessLease, sim);
        expect(v.tree).toBeNull();
        await killLeaseVerification(v, { facts: sim, signaller: sig, graceMs: 10, pollMs: 1, confirmMs: 10 });
        const legacy = await verifyLegacyRecord(value as never, sim, { wrapperRoot: "/opt/gw/acpx" });
        if (legacy.tree)
          await killOwnedTree(legacy.tree, { facts: sim, signaller: sig, graceMs: 10, pollMs: 1, confirmMs: 10 });
        expect(sig.log).toEqual([]);
      }),
      { numRuns: 400 },
    );
  });
});
