/**
 * Instance folders whose state dir was deleted, on real cgroups and real
 * processes, through the CLI as an operator runs it (`node dist/cli/main.js`).
 *
 * Each test gets its own proclease root `<cgroup2 mount>/pl-orphinst-<pid>-<n>/proclease`
 * and its own instance index (PROCLEASE_INSTANCE_INDEX, a temp dir) so the
 * host's real index is never read or written. A state dir is recorded the
 * way a gateway records it (recordContainmentRoot with its instance id),
 * its instance folder made, then the state dir deleted: `doctor` names the
 * folder, `reap --orphan-cgroups --dry-run` removes nothing, and
 * `reap --orphan-cgroups` removes the empty folder and forgets its record.
 * A folder holding a cgroup, or a process, is reported and never removed;
 * the folder of a state dir that still exists is not an orphan.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { onInterrupt } from "../helpers/interrupt-cleanup.js";
import { removeCgroupTrees } from "../helpers/cgroup-teardown.js";
import { killAndRemoveCgroupSync } from "../helpers/worker-cgroup.js";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { enterCgroup } from "../../src/containment/index.js";
import { loadOrCreateGatewayInstanceId, openLeaseStore } from "../../src/ownership/index.js";
import { recordContainmentRoot } from "../../src/ownership/host/containment-record.js";
import { INSTANCE_INDEX_ENV } from "../../src/ownership/host/instance-index.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
if (!existsSync(MAIN)) throw new Error("dist/cli/main.js is missing: run `npm run build` before these tests");

const probe = await probeCgroup2();
const NOTE = containmentSkipNote(probe);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let seq = 0;
const tops: string[] = [];
const dirs: string[] = [];
const children: ChildProcess[] = [];
const savedIndex = process.env[INSTANCE_INDEX_ENV];

function cli(index: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { timeout: 60_000, encoding: "utf8", env: { ...process.env, [INSTANCE_INDEX_ENV]: index } },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

/** A fresh proclease root and instance index, and a recorder of state dirs under them. */
function host(): {
  root: string;
  index: string;
  gateway: () => Promise<{ stateDir: string; folder: string; instanceId: string }>;
} {
  if (!probe.writable) throw new Error(probe.why);
  const top = `${probe.mount.replace(/\/+$/, "")}/pl-orphinst-${process.pid}-${++seq}`;
  mkdirSync(top);
  tops.push(top);
  const root = `${top}/proclease`;
  mkdirSync(root);
  const index = mkdtempSync(join(tmpdir(), "proclease-index-"));
  dirs.push(index);
  process.env[INSTANCE_INDEX_ENV] = index;
  const gateway = async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "proclease-orphinst-"));
    dirs.push(stateDir);
    const instanceId = await loadOrCreateGatewayInstanceId(stateDir);
    await openLeaseStore(stateDir);
    await recordContainmentRoot(stateDir, root, instanceId);
    const folder = `${root}/${instanceId}`;
    mkdirSync(folder);
    return { stateDir, folder, instanceId };
  };
  return { root, index, gateway };
}

/** A process that ignores SIGTERM, moved into `cgroup`. */
async function stubbornIn(cgroup: string): Promise<number> {
  const c = spawn("/bin/sh", ["-c", 'trap "" TERM; exec sleep 1000'], { stdio: "ignore" });
  children.push(c);
  await new Promise<void>((resolve, reject) => {
    c.once("spawn", resolve);
    c.once("error", reject);
  });
  const moved = enterCgroup(cgroup, c.pid!);
  if (moved.outcome !== "moved") throw new Error(`moving ${c.pid} into ${cgroup}: ${moved.outcome}`);
  return c.pid!;
}

// an interrupted run ends what these tests put in cgroups outside the worker's own, and removes those cgroups
onInterrupt(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const top of tops.splice(0)) killAndRemoveCgroupSync(top);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

afterEach(async () => {
  if (savedIndex === undefined) delete process.env[INSTANCE_INDEX_ENV];
  else process.env[INSTANCE_INDEX_ENV] = savedIndex;
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await removeCgroupTrees(tops);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

interface ReapJson {
  instanceFolders: {
    dryRun: boolean;
    entries: Array<{ folder: string; state: string; action: string }>;
    forgotten: string[];
    problems: string[];
  };
}

describe(`instance folders whose state dir is gone${NOTE}`, () => {
  it.skipIf(!probe.writable)(
    "doctor names the empty one; a dry run keeps it; reap --orphan-cgroups removes it and forgets its record",
    async () => {
      const h = host();
      const gone = await h.gateway();
      const kept = await h.gateway();
      expect(JSON.parse(readFileSync(join(h.index, `${gone.instanceId}.json`), "utf8"))).toMatchObject({
        instanceId: gone.instanceId,
        stateDir: gone.stateDir,
        roots: [h.root],
      });
      rmSync(gone.stateDir, { recursive: true, force: true });
      // another state dir, so the CLI's own state-dir part has something to read
      const doc = await cli(h.index, ["doctor", "--state-dir", kept.stateDir, "--json"]);
      const row = (
        JSON.parse(doc.stdout) as { rows: Array<{ capability: string; ok: boolean; detail: string }> }
      ).rows.find((r) => r.capability === "orphan-cgroups")!;
      expect(row.ok).toBe(false);
      const goneList = row.detail.slice(row.detail.indexOf("whose state dir is gone"));
      expect(goneList).toContain(gone.folder);
      // the state dir that still exists: its folder is its own, not an orphan
      expect(goneList).not.toContain(kept.folder);

      const dry = JSON.parse(
        (await cli(h.index, ["reap", "--orphan-cgroups", "--dry-run", "--state-dir", kept.stateDir, "--json"])).stdout,
      ) as ReapJson;
      expect(dry.instanceFolders.entries).toEqual([
        expect.objectContaining({ folder: gone.folder, state: "empty", action: "would-remove" }),
      ]);
      expect(existsSync(gone.folder)).toBe(true);

      const real = await cli(h.index, ["reap", "--orphan-cgroups", "--state-dir", kept.stateDir]);
      expect(real.code, real.stderr).toBe(0);
      expect(real.stdout).toContain(gone.folder);
      expect(existsSync(gone.folder)).toBe(false);
      expect(existsSync(kept.folder)).toBe(true);
      expect(existsSync(join(h.index, `${gone.instanceId}.json`))).toBe(false);
      expect(existsSync(join(h.index, `${kept.instanceId}.json`))).toBe(true);
      const after = (
        JSON.parse((await cli(h.index, ["doctor", "--state-dir", kept.stateDir, "--json"])).stdout) as {
          rows: Array<{ capability: string; detail: string }>;
        }
      ).rows.find((r) => r.capability === "orphan-cgroups")!;
      expect(after.detail).not.toContain(gone.folder);
      expect(after.detail).not.toContain("whose state dir is gone");
    },
  );

  it.skipIf(!probe.writable)(
    "never removes a folder that holds a cgroup or a process: reported, left alone, its record kept",
    async () => {
      const h = host();
      const withCgroup = await h.gateway();
      mkdirSync(`${withCgroup.folder}/leftover`);
      const withProcess = await h.gateway();
      // a process directly in the folder (no lease cgroup below it): populated, no subdirectory
      await stubbornIn(withProcess.folder);
      for (const g of [withCgroup, withProcess]) rmSync(g.stateDir, { recursive: true, force: true });
      const other = mkdtempSync(join(tmpdir(), "proclease-orphinst-none-"));
      dirs.push(other);
      const doc = await cli(h.index, ["doctor", "--state-dir", other, "--json"]);
      const row = (
        JSON.parse(doc.stdout) as { rows: Array<{ capability: string; ok: boolean; detail: string }> }
      ).rows.find((r) => r.capability === "orphan-cgroups")!;
      expect(row.ok).toBe(false);
      expect(row.detail).toContain(withCgroup.folder);
      expect(row.detail).toContain(withProcess.folder);

      const real = JSON.parse(
        (await cli(h.index, ["reap", "--orphan-cgroups", "--state-dir", other, "--json"])).stdout,
      ) as ReapJson;
      const byFolder = new Map(real.instanceFolders.entries.map((e) => [e.folder, e]));
      expect(byFolder.get(withCgroup.folder)).toMatchObject({ state: "holds-cgroups", action: "left-alone" });
      expect(byFolder.get(withProcess.folder)).toMatchObject({ state: "populated", action: "left-alone" });
      expect(existsSync(`${withCgroup.folder}/leftover`)).toBe(true);
      expect(existsSync(withProcess.folder)).toBe(true);
      expect(readFileSync(`${withProcess.folder}/cgroup.events`, "utf8")).toMatch(/populated 1/);
      expect(real.instanceFolders.forgotten).toEqual([]);
    },
  );

  it.skipIf(!probe.writable)(
    "a controller with containment records its instance in the index: its state dir and root",
    async () => {
      const index = mkdtempSync(join(tmpdir(), "proclease-index-"));
      dirs.push(index);
      process.env[INSTANCE_INDEX_ENV] = index;
      const stateDir = mkdtempSync(join(tmpdir(), "proclease-orphinst-ctl-"));
      dirs.push(stateDir);
      const ctl = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 });
      try {
        expect(ctl.containment.available, ctl.containment.available ? "" : ctl.containment.why).toBe(true);
        if (!ctl.containment.available) return;
        const record = JSON.parse(readFileSync(join(index, `${ctl.gatewayInstanceId}.json`), "utf8")) as {
          stateDir: string;
          roots: string[];
        };
        expect(record).toMatchObject({ stateDir, roots: [ctl.containment.root] });
      } finally {
        await ctl.dispose();
      }
    },
  );
});
