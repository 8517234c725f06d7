/**
 * Orphan cgroups and per-lease memory in the operator CLI, on real cgroups
 * and real processes (`node dist/cli/main.js`, as an operator runs it).
 *
 * Each test gets its own proclease root `<cgroup2 mount>/pl-orphan-<pid>-<n>/proclease`,
 * recorded in its own state dir the way the controller records it
 * (containment-record.ts), and removed again in afterEach. A stubborn process
 * (it ignores SIGTERM) sits in a cgroup under that root that no lease file
 * names: status and doctor list it, `reap --orphan-cgroups --dry-run` signals
 * and removes nothing, `reap --orphan-cgroups` ends it and removes the cgroup.
 * A lease's own cgroup is never listed, a cgroup re-created under a lease's
 * name (another identity) is, and our `_gateway` leaf never is.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { onInterrupt } from "../helpers/interrupt-cleanup.js";
import { removeCgroupTrees } from "../helpers/cgroup-teardown.js";
import { killAndRemoveCgroupSync } from "../helpers/worker-cgroup.js";
import { enterCgroup, readMemory } from "../../src/containment/index.js";
import { findCgroup2Mount, parseMountInfo } from "../../src/containment/mountinfo.js";
import { getProcessFacts } from "../../src/facts/get.js";
import {
  acquireStateDirLock,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  type AcpxProcessLease,
} from "../../src/ownership/index.js";
import { CONTAINMENT_RECORD_FILE, recordContainmentRoot } from "../../src/ownership/host/containment-record.js";
import { isAlive, waitFor } from "../supervisor/helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
if (!existsSync(MAIN)) throw new Error("dist/cli/main.js is missing: run `npm run build` before these tests");

/** Where test roots go, or why there is none (then every test here is skipped, saying so). */
function probeCgroup2(): { mount: string } | { skip: string } {
  if (process.platform !== "linux") return { skip: `cgroups exist only on Linux (this is ${process.platform})` };
  const m = findCgroup2Mount(parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8")));
  if (m === null) return { skip: "no cgroup2 filesystem mounted" };
  if (m.readOnly) return { skip: `cgroup2 is mounted read-only at ${m.mountPoint}` };
  const mount = m.mountPoint.replace(/\/+$/, "") || "/";
  const probe = `${mount}/pl-orphan-probe-${process.pid}`;
  try {
    mkdirSync(probe);
    rmdirSync(probe);
  } catch (e) {
    return {
      skip: `cannot create a cgroup under ${mount} (${(e as NodeJS.ErrnoException).code}): not root and not delegated`,
    };
  }
  return { mount };
}
const host = probeCgroup2();
const SKIP = "skip" in host ? host.skip : null;
const NOTE = SKIP ? ` [skipped: ${SKIP}]` : "";
if (SKIP) console.log(`cli/orphan-cgroups.test:${NOTE}`);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { timeout: 60_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

let seq = 0;
const tops: string[] = [];
const dirs: string[] = [];
const children: ChildProcess[] = [];

interface Fixture {
  stateDir: string;
  /** `<top>/proclease` */
  root: string;
  /** `<root>/<instance id>`: where this state dir's lease cgroups live (the instance folder) */
  folder: string;
}

/** A fresh state dir (instance id, lease store) whose recorded proclease root is a fresh cgroup. */
async function fixture(): Promise<Fixture> {
  if (!("mount" in host)) throw new Error(SKIP!);
  const top = `${host.mount}/pl-orphan-${process.pid}-${++seq}`;
  mkdirSync(top);
  tops.push(top);
  const root = `${top}/proclease`;
  mkdirSync(root);
  const stateDir = mkdtempSync(join(tmpdir(), "proclease-orphan-"));
  dirs.push(stateDir);
  const instanceId = await loadOrCreateGatewayInstanceId(stateDir);
  await openLeaseStore(stateDir);
  await recordContainmentRoot(stateDir, root);
  const folder = `${root}/${instanceId}`;
  mkdirSync(folder);
  return { stateDir, root, folder };
}

const idOf = (path: string) => String(statSync(path).ino);

/** A process that ignores SIGTERM (exec keeps the ignored disposition), moved into `cgroup`. */
async function stubbornIn(cgroup: string): Promise<number> {
  const c = spawn("/bin/sh", ["-c", 'trap "" TERM; exec sleep 1000'], { stdio: "ignore" });
  children.push(c);
  await new Promise<void>((resolve, reject) => {
    c.once("spawn", resolve);
    c.once("error", reject);
  });
  const pid = c.pid!;
  const moved = enterCgroup(cgroup, pid);
  if (moved.outcome !== "moved")
    throw new Error(`moving ${pid} into ${cgroup}: ${moved.outcome} ${moved.detail ?? ""}`);
  // the exec has happened once the comm reads sleep: from then on TERM is ignored by the process itself
  await waitFor(() => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep", 10_000);
  return pid;
}

async function leaseWithCgroup(
  stateDir: string,
  cgroup: { path: string; id: string } | null,
  leaseId?: string,
): Promise<AcpxProcessLease> {
  const store = await openLeaseStore(stateDir);
  const gatewayInstanceId = await loadOrCreateGatewayInstanceId(stateDir);
  const l = await store.create({
    kind: "acpx",
    gatewayInstanceId,
    sessionKey: `agent:test:${++seq}`,
    wrapperRoot: "/nonexistent",
    wrapperPath: "/nonexistent/w",
    commandHash: "0".repeat(64),
    ...(leaseId ? { leaseId } : {}),
  });
  return cgroup === null ? l : store.update(l.leaseId, { cgroup });
}

// an interrupted run ends what these tests put in cgroups outside the worker's own, and removes those cgroups
onInterrupt(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const top of tops.splice(0)) killAndRemoveCgroupSync(top);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await removeCgroupTrees(tops);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface StatusJson {
  leases: Array<{
    lease: AcpxProcessLease;
    memory?: { ok: boolean; why?: string; current?: number; peak?: number | null };
  }>;
  orphanCgroups: {
    folders: Array<{ folder: string; source: string; state: string; why?: string }>;
    orphans: Array<{ name: string; path: string; populated: string; code: string; why: string }>;
    owned: number;
  };
}

describe("orphan cgroups", () => {
  it.skipIf(SKIP)(
    `status and doctor list a populated orphan; --dry-run leaves it; reap --orphan-cgroups ends it and removes it${NOTE}`,
    async () => {
      const f = await fixture();
      const orphan = `${f.folder}/stray-${process.pid}`;
      mkdirSync(orphan);
      const pid = await stubbornIn(orphan);
      // our own leaf, with a process in it, is never an orphan
      mkdirSync(`${f.root}/_gateway`);
      const gw = await stubbornIn(`${f.root}/_gateway`);

      const st = await cli(["status", "--state-dir", f.stateDir, "--json"]);
      expect(st.code, st.stderr).toBe(0);
      const view = JSON.parse(st.stdout) as StatusJson;
      expect(view.orphanCgroups.folders).toEqual([{ folder: f.folder, source: "record", state: "listed" }]);
      expect(view.orphanCgroups.orphans).toEqual([
        expect.objectContaining({ name: `stray-${process.pid}`, path: orphan, populated: "populated" }),
      ]);
      expect(view.orphanCgroups.orphans[0]!.code).toBe("no-lease-file");
      const text = await cli(["status", "--state-dir", f.stateDir]);
      expect(text.stdout).toMatch(/orphan cgroups \(1\)/);
      expect(text.stdout).toContain(orphan);
      expect(text.stdout).not.toContain("_gateway");

      const doc = await cli(["doctor", "--json", "--state-dir", f.stateDir]);
      expect(doc.code, doc.stderr).toBe(0);
      const row = (
        JSON.parse(doc.stdout) as { rows: Array<{ capability: string; ok: boolean; detail: string }> }
      ).rows.find((r) => r.capability === "orphan-cgroups");
      expect(row).toMatchObject({ ok: false });
      expect(row!.detail).toContain(`${orphan} (populated`);
      expect(row!.detail).not.toContain("_gateway");

      const dry = await cli(["reap", "--orphan-cgroups", "--dry-run", "--state-dir", f.stateDir, "--json"]);
      expect(dry.code, dry.stderr).toBe(0);
      const plan = JSON.parse(dry.stdout) as { dryRun: boolean; entries: Array<{ path: string; action: string }> };
      expect(plan.dryRun).toBe(true);
      expect(plan.entries).toEqual([expect.objectContaining({ path: orphan, action: "would-remove" })]);
      expect(isAlive(pid)).toBe(true);
      expect(existsSync(orphan)).toBe(true);

      const real = await cli(["reap", "--orphan-cgroups", "--state-dir", f.stateDir]);
      expect(real.code, real.stdout + real.stderr).toBe(0);
      expect(real.stdout).toMatch(new RegExp(`${orphan}\\s+populated\\s+removed\\s+emptied by cgroup\\.kill; removed`));
      await waitFor(() => !isAlive(pid), 10_000);
      expect(existsSync(orphan)).toBe(false);
      // the gateway leaf and its process were not touched
      expect(isAlive(gw)).toBe(true);
      expect(existsSync(`${f.root}/_gateway`)).toBe(true);

      const after = JSON.parse((await cli(["status", "--state-dir", f.stateDir, "--json"])).stdout) as StatusJson;
      expect(after.orphanCgroups.orphans).toEqual([]);
    },
  );

  it.skipIf(SKIP)(
    `a lease's own cgroup is not an orphan; one re-created under a lease's name (another identity) is, and is reaped${NOTE}`,
    async () => {
      const f = await fixture();
      const ownPath = `${f.folder}/own-${process.pid}`;
      mkdirSync(ownPath);
      const own = await leaseWithCgroup(f.stateDir, { path: ownPath, id: idOf(ownPath) });
      const ownPid = await stubbornIn(ownPath);

      const impostorName = `reborn-${process.pid}`;
      const impostorPath = `${f.folder}/${impostorName}`;
      mkdirSync(impostorPath);
      const oldId = idOf(impostorPath);
      rmdirSync(impostorPath);
      mkdirSync(impostorPath);
      expect(idOf(impostorPath)).not.toBe(oldId);
      await leaseWithCgroup(f.stateDir, { path: impostorPath, id: oldId }, impostorName);

      const view = JSON.parse((await cli(["status", "--state-dir", f.stateDir, "--json"])).stdout) as StatusJson;
      expect(view.orphanCgroups.owned).toBe(1);
      expect(view.orphanCgroups.orphans.map((o) => o.path)).toEqual([impostorPath]);
      expect(view.orphanCgroups.orphans[0]!.code).toBe("identity-differs");
      // the words name the lease whose name it took
      expect(view.orphanCgroups.orphans[0]!.why).toContain(`not lease ${impostorName}'s`);

      const real = await cli(["reap", "--orphan-cgroups", "--state-dir", f.stateDir, "--json"]);
      expect(real.code, real.stderr).toBe(0);
      const r = JSON.parse(real.stdout) as { entries: Array<{ path: string; action: string }> };
      expect(r.entries).toEqual([expect.objectContaining({ path: impostorPath, action: "removed" })]);
      expect(existsSync(impostorPath)).toBe(false);
      // the lease's own cgroup and its process stay
      expect(existsSync(ownPath)).toBe(true);
      expect(isAlive(ownPid)).toBe(true);
      expect(view.leases.find((l) => l.lease.leaseId === own.leaseId)?.lease.cgroup?.path).toBe(ownPath);
    },
  );

  it.skipIf(SKIP)(
    `reap --orphan-cgroups refuses while a gateway holds the state dir; --force leaves a cgroup a live gateway may be making${NOTE}`,
    async () => {
      const f = await fixture();
      const stray = `${f.folder}/stray-${process.pid}`;
      mkdirSync(stray);
      const pid = await stubbornIn(stray);
      // an open lease that records no cgroup yet, and a cgroup of its name: what a gateway shows between mkdir and recording it
      const making = await leaseWithCgroup(f.stateDir, null);
      const makingPath = `${f.folder}/${making.leaseId}`;
      mkdirSync(makingPath);

      const lock = await acquireStateDirLock(f.stateDir, getProcessFacts());
      try {
        const refused = await cli(["reap", "--orphan-cgroups", "--state-dir", f.stateDir]);
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(/holds .*--force/);
        expect(isAlive(pid)).toBe(true);
        expect(existsSync(stray)).toBe(true);

        const forced = await cli(["reap", "--orphan-cgroups", "--force", "--state-dir", f.stateDir, "--json"]);
        expect(forced.code, forced.stderr).toBe(0);
        const r = JSON.parse(forced.stdout) as {
          entries: Array<{ path: string; action: string; code: string; detail?: string }>;
        };
        const byPath = new Map(r.entries.map((e) => [e.path, e]));
        expect(byPath.get(stray)?.action).toBe("removed");
        expect(byPath.get(makingPath)).toMatchObject({ action: "left-alone", code: "no-cgroup-recorded" });
        expect(byPath.get(makingPath)!.detail).toMatch(/may be creating it/);
        expect(existsSync(makingPath)).toBe(true);
        await waitFor(() => !isAlive(pid), 10_000);
      } finally {
        await lock.release();
      }
    },
  );

  it.skipIf(SKIP)(
    `two state dirs whose gateways share one cgroup each judge only their own folder: the other's lease cgroup, with an unmarked process in it, is never an orphan here${NOTE}`,
    async () => {
      const a = await fixture();
      const other = mkdtempSync(join(tmpdir(), "proclease-orphan-"));
      dirs.push(other);
      const otherId = await loadOrCreateGatewayInstanceId(other);
      await openLeaseStore(other);
      await recordContainmentRoot(other, a.root);
      const otherFolder = `${a.root}/${otherId}`;
      mkdirSync(otherFolder);
      const theirs = `${otherFolder}/theirs-${process.pid}`;
      mkdirSync(theirs);
      await leaseWithCgroup(other, { path: theirs, id: idOf(theirs) });
      // the test's environment carries no lease markers: nothing but the folder says whose it is
      const theirPid = await stubbornIn(theirs);
      const mine = `${a.folder}/stray-${process.pid}`;
      mkdirSync(mine);

      const view = JSON.parse((await cli(["status", "--state-dir", a.stateDir, "--json"])).stdout) as StatusJson;
      expect(view.orphanCgroups.folders.map((r) => r.folder)).toEqual([a.folder]);
      expect(view.orphanCgroups.orphans.map((o) => o.path)).toEqual([mine]);
      const real = await cli(["reap", "--orphan-cgroups", "--state-dir", a.stateDir, "--json"]);
      expect(real.code, real.stderr).toBe(0);
      expect((JSON.parse(real.stdout) as { entries: Array<{ path: string }> }).entries.map((e) => e.path)).toEqual([
        mine,
      ]);
      expect(existsSync(mine)).toBe(false);
      expect(existsSync(theirs)).toBe(true);
      expect(isAlive(theirPid)).toBe(true);
      // and from the other state dir it is that lease's own
      const theirView = JSON.parse((await cli(["status", "--state-dir", other, "--json"])).stdout) as StatusJson;
      expect(theirView.orphanCgroups).toMatchObject({ owned: 1, orphans: [] });
    },
  );

  it.skipIf(SKIP)(
    `a recorded root that is not on cgroup2 is refused with the reason, never listed${NOTE}`,
    async () => {
      const f = await fixture();
      const fake = join(f.stateDir, "fake", "proclease");
      const instance = basename(f.folder);
      mkdirSync(join(fake, instance, "victim"), { recursive: true });
      const file = join(f.stateDir, "acpx", CONTAINMENT_RECORD_FILE);
      const rec = JSON.parse(readFileSync(file, "utf8")) as { roots: string[] };
      writeFileSync(file, JSON.stringify({ ...rec, roots: [fake, `${f.root}/../x/proclease`, ...rec.roots] }), {
        mode: 0o600,
      });
      const view = JSON.parse((await cli(["status", "--state-dir", f.stateDir, "--json"])).stdout) as StatusJson;
      const byFolder = new Map(view.orphanCgroups.folders.map((r) => [r.folder, r]));
      expect(byFolder.get(`${fake}/${instance}`)).toMatchObject({
        state: "refused",
        why: `${fake}/${instance} is not on a cgroup2 filesystem`,
      });
      expect(byFolder.get(`${f.root}/../x/proclease/${instance}`)).toMatchObject({ state: "refused" });
      expect(byFolder.get(`${f.root}/../x/proclease/${instance}`)!.why).toMatch(/not an absolute, normalised path/);
      expect(view.orphanCgroups.orphans).toEqual([]);
      const text = await cli(["status", "--state-dir", f.stateDir]);
      expect(text.stdout).toMatch(/instance folder refused: .*fake\/proclease\/[^ ]+ is not on a cgroup2 filesystem/);
      const dry = JSON.parse(
        (await cli(["reap", "--orphan-cgroups", "--dry-run", "--state-dir", f.stateDir, "--json"])).stdout,
      ) as { entries: unknown[] };
      expect(dry.entries).toEqual([]);
      expect(existsSync(join(fake, instance, "victim"))).toBe(true);
    },
  );
});

describe("memory per lease", () => {
  it.skipIf(SKIP)(`status and explain show memory.current/peak, or the reason once per report${NOTE}`, async () => {
    const f = await fixture();
    const cgs: string[] = [];
    const leases: AcpxProcessLease[] = [];
    for (const n of [1, 2]) {
      const p = `${f.folder}/mem${n}-${process.pid}`;
      mkdirSync(p);
      cgs.push(p);
      leases.push(await leaseWithCgroup(f.stateDir, { path: p, id: idOf(p) }));
    }
    await stubbornIn(cgs[0]!);
    const direct = await readMemory(cgs[0]!);
    if (!direct.ok)
      console.log(
        `cli/orphan-cgroups.test: memory figures are not readable here, so the reason is checked instead: ${direct.why}`,
      );

    const view = JSON.parse((await cli(["status", "--state-dir", f.stateDir, "--json"])).stdout) as StatusJson;
    const text = (await cli(["status", "--state-dir", f.stateDir])).stdout;
    const ex = await cli(["explain", leases[0]!.leaseId, "--state-dir", f.stateDir, "--json"]);
    expect(ex.code, ex.stderr).toBe(0);
    const exMemory = (JSON.parse(ex.stdout) as { memory?: { ok: boolean; why?: string; current?: number } }).memory;
    const mem = view.leases.map((l) => l.memory);
    if (direct.ok) {
      for (const m of mem) expect(m).toMatchObject({ ok: true, current: expect.any(Number) });
      expect(mem[0]!.current).toBeGreaterThan(0);
      expect(exMemory).toMatchObject({ ok: true });
      expect(text).toMatch(/memory\s+current \d/);
    } else {
      for (const m of mem) expect(m).toEqual({ ok: false, code: direct.code, why: direct.why });
      expect(exMemory).toEqual({ ok: false, code: direct.code, why: direct.why });
      // said once for both leases, not once per lease
      expect(text.split(direct.why).length - 1).toBe(1);
      expect(text).toContain(`memory per lease not shown (2 leases): ${direct.why}`);
      const exText = await cli(["explain", leases[0]!.leaseId, "--state-dir", f.stateDir]);
      expect(exText.stdout).toContain(`memory not shown: ${direct.why}`);
    }
  });
});
