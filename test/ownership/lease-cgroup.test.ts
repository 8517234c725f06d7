/**
 * Binding a cgroup to a lease (ownership/lifecycle/lease-cgroup.ts), the one sequence
 * the controller and the supervisor run around a spawn, on real cgroups:
 * create + record (the lease records the plain reference), drop (unrecorded,
 * removed, and the instance folder with it when it was the last), a record
 * that cannot be written (the never-started sequence: nothing is left
 * behind), containment off (one wording), and the opening sequence around
 * them (openLeaseWithCgroup: one synced write when a cgroup is recorded).
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { detectContainment, type ContainmentSupport } from "../../src/containment/index.js";
import { getProcessFacts } from "../../src/facts/get.js";
import { createSignaller } from "../../src/facts/signal.js";
import { openLeaseStore, type LeasePatch, type LeaseStore } from "../../src/ownership/index.js";
import {
  bindLeaseCgroup,
  containmentOffWhy,
  dropLeaseCgroup,
  openLeaseWithCgroup,
} from "../../src/ownership/lifecycle/lease-cgroup.js";
import type { LifecycleDeps } from "../../src/ownership/lifecycle/lifecycle.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";

const probe = await probeCgroup2();
const SKIP = probe.writable ? null : probe.why;
const NOTE = containmentSkipNote(probe);
const support = await detectContainment();
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

let seq = 0;
async function setup(store?: (s: LeaseStore) => LeaseStore): Promise<{ deps: LifecycleDeps; store: LeaseStore }> {
  const dir = await mkdtemp(join(tmpdir(), "proclease-lease-cgroup-"));
  dirs.push(dir);
  const real = await openLeaseStore(dir, { durable: false });
  const facts = getProcessFacts();
  const deps: LifecycleDeps = {
    store: store ? store(real) : real,
    facts,
    signaller: createSignaller(facts),
    graceMs: 100,
    gatewayInstanceId: `test-bind-${process.pid}-${++seq}`,
  };
  return { deps, store: real };
}

const leaseInput = (deps: LifecycleDeps) => ({
  kind: "acpx" as const,
  gatewayInstanceId: deps.gatewayInstanceId,
  sessionKey: "agent:bind",
  wrapperRoot: "",
  wrapperPath: "",
  commandHash: "0".repeat(64),
});
const newLease = (deps: LifecycleDeps) => deps.store.create(leaseInput(deps));

describe("binding a cgroup to a lease", () => {
  it.skipIf(SKIP)(
    `create + record, then drop: the lease records {path, id} only; the drop unrecords it, removes it, and its emptied instance folder${NOTE}`,
    async () => {
      const { deps, store } = await setup();
      const lease = await newLease(deps);
      const bound = await bindLeaseCgroup(deps, support, lease);
      if (bound.cgroup === null) throw new Error(bound.why);
      expect((await store.get(lease.leaseId))?.cgroup).toEqual({ path: bound.cgroup.path, id: bound.cgroup.id });
      expect(bound.lease.cgroup).toEqual({ path: bound.cgroup.path, id: bound.cgroup.id });
      const after = await dropLeaseCgroup(store, lease.leaseId, bound.cgroup);
      expect(after.cgroup).toBeUndefined();
      expect(existsSync(bound.cgroup.path)).toBe(false);
      expect(existsSync(join(bound.cgroup.path, ".."))).toBe(false);
    },
  );

  it.skipIf(SKIP)(
    `a record that cannot take the cgroup: the never-started sequence removes it and settles the lease, then the write's error is thrown${NOTE}`,
    async () => {
      const refusing = (s: LeaseStore): LeaseStore =>
        Object.assign(Object.create(s) as LeaseStore, {
          update: () => Promise.reject(Object.assign(new Error("EIO (simulated)"), { code: "EIO" })),
        });
      const { deps, store } = await setup(refusing);
      const lease = await newLease(deps);
      await expect(bindLeaseCgroup(deps, support, lease)).rejects.toThrow(/EIO/);
      const settled = await store.get(lease.leaseId);
      expect(settled?.state).toBe("lost");
      if (!support.available) throw new Error(support.why);
      expect(existsSync(join(support.root, deps.gatewayInstanceId, lease.leaseId))).toBe(false);
    },
  );

  it.skipIf(SKIP)(
    `openLeaseWithCgroup: the lease is written, then its cgroup made and recorded by the write that syncs it${NOTE}`,
    async () => {
      const { deps, store } = await setup();
      const bound = await openLeaseWithCgroup(deps, support, leaseInput(deps));
      if (bound.cgroup === null) throw new Error(bound.why);
      expect((await store.get(bound.lease.leaseId))?.cgroup).toEqual({ path: bound.cgroup.path, id: bound.cgroup.id });
      await dropLeaseCgroup(store, bound.lease.leaseId, bound.cgroup);
    },
  );

  it("openLeaseWithCgroup where the cgroup cannot be made: uncontained, and the lease is synced by a write of its own", async () => {
    const updates: string[] = [];
    const spying = (s: LeaseStore): LeaseStore =>
      Object.assign(Object.create(s) as LeaseStore, {
        update: (id: string, p: LeasePatch) => (updates.push(id), s.update(id, p)),
      });
    const { deps, store } = await setup(spying);
    // a cgroup root that is no directory: the mkdir fails, the lease stays uncontained
    const nowhere: ContainmentSupport = support.available
      ? { ...support, root: join(tmpdir(), `no-such-cgroup-root-${process.pid}`, "proclease") }
      : support;
    if (!nowhere.available) return;
    const bound = await openLeaseWithCgroup(deps, nowhere, leaseInput(deps));
    expect(bound.cgroup).toBeNull();
    expect(updates).toEqual([bound.lease.leaseId]);
    expect(await store.get(bound.lease.leaseId)).toEqual(bound.lease);
  });

  it("openLeaseWithCgroup with containment off: uncontained, created synced, no second write", async () => {
    const updates: string[] = [];
    const spying = (s: LeaseStore): LeaseStore =>
      Object.assign(Object.create(s) as LeaseStore, {
        update: (id: string, p: LeasePatch) => (updates.push(id), s.update(id, p)),
      });
    const { deps } = await setup(spying);
    const off: ContainmentSupport = { available: false, code: "refused", why: "turned off" };
    const bound = await openLeaseWithCgroup(deps, off, leaseInput(deps));
    expect(bound).toMatchObject({ cgroup: null, why: "containment is off: turned off" });
    expect(updates).toEqual([]);
  });

  it("containment off: uncontained, with the one wording", async () => {
    const { deps } = await setup();
    const lease = await newLease(deps);
    const off: ContainmentSupport = { available: false, code: "refused", why: "turned off" };
    expect(await bindLeaseCgroup(deps, off, lease)).toEqual({
      lease,
      cgroup: null,
      why: "containment is off: turned off",
    });
    expect(containmentOffWhy(off)).toBe("containment is off: turned off");
  });
});
