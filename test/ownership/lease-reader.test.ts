/**
 * openLeaseReader, the package root's only view of leases: it reads what the
 * store wrote, creates nothing in a state dir, and hands out no way to move
 * a lease (the lifecycle is the only mover).
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openLeaseReader } from "../../src/ownership/leases/lease-reader.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const stateDir = async () => {
  const d = await mkdtemp(join(tmpdir(), "proclease-lease-reader-"));
  dirs.push(d);
  return d;
};

describe("openLeaseReader", () => {
  it("reads the leases the store wrote, one by id and all by filter", async () => {
    const dir = await stateDir();
    const store = await openLeaseStore(dir);
    const a = await store.create({
      kind: "acpx",
      gatewayInstanceId: "gw-1",
      sessionKey: "agent:main:a",
      wrapperRoot: "/w",
      wrapperPath: "/w/x",
      commandHash: "0".repeat(64),
    });
    await store.create({
      kind: "acpx",
      gatewayInstanceId: "gw-2",
      sessionKey: "agent:main:b",
      wrapperRoot: "/w",
      wrapperPath: "/w/x",
      commandHash: "0".repeat(64),
    });
    const reader = await openLeaseReader(dir);
    expect((await reader.get(a.leaseId))?.sessionKey).toBe("agent:main:a");
    expect((await reader.list({ gatewayInstanceId: "gw-1" })).leases.map((l) => l.leaseId)).toEqual([a.leaseId]);
    expect((await reader.list()).leases).toHaveLength(2);
  });

  it("creates nothing in a state dir without leases, and lists none", async () => {
    const dir = await stateDir();
    const reader = await openLeaseReader(dir);
    expect(await reader.list()).toEqual({ leases: [], problems: [] });
    expect(existsSync(join(dir, "acpx"))).toBe(false);
  });

  it("hands out reads only: no create, update, transition, advance or expire, and the view is frozen", async () => {
    const reader = await openLeaseReader(await stateDir());
    expect(Object.keys(reader).sort()).toEqual(["dir", "get", "list"]);
    expect(Object.isFrozen(reader)).toBe(true);
  });

  it("refuses an empty state dir path with a TypeError", async () => {
    await expect(openLeaseReader("")).rejects.toThrow(TypeError);
  });
});
