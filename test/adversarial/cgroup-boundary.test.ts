/**
 * The lease cgroup's boundary, held by the kernel: each adapter runs in its
 * own cgroup namespace rooted at its lease cgroup, and on a cgroup2 mounted
 * with `nsdelegate` no process of its tree can move a process across it,
 * root included. A hostile agent (root, as its gateway) tries both ways:
 * - a grandchild clears its environment, calls setsid, writes itself into
 *   the hierarchy's root cgroup, and the agent's wrapper is SIGKILLed: the
 *   write is refused, so the close still finds it in the lease cgroup and
 *   ends it, and the lease reads closed/killed;
 * - the agent writes another session's wrapper and adapter and an unrelated
 *   process into its own lease cgroup: every write is refused.
 *
 * nsdelegate is a mount option of the whole cgroup2 hierarchy. When this
 * host's cgroup2 lacks it, this file turns it on for its own run (a remount,
 * as root) and restores the mount's options afterwards: it changes nothing
 * for a process in the host's own cgroup namespace, which is every process
 * but the adapters these tests start. Build first (`npm run build`).
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { detectContainment, mountOf } from "../../src/containment/index.js";
import { predictBoundary } from "../../src/containment/boundary.js";
import { readMountTable } from "../../src/containment/mountinfo.js";
import { probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  ROOT,
  say,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const probe = await probeCgroup2();

interface Cgroup2 {
  point: string;
  options: string[];
}

function cgroup2Mounts(): Cgroup2[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((l) => l.includes(" - cgroup2 "))
    .map((l) => ({ point: l.split(" ")[4]!, options: l.split(" - ")[1]!.split(" ")[2]!.split(",") }));
}

const probeMount = probe.writable ? probe.mount : null;

/** Why this file cannot run here, or null; and the mount whose options it changed (restored in afterAll). */
function setUp(): { skip: string | null; changed: Cgroup2 | null } {
  if (!probe.writable) return { skip: `no writable cgroup2 (${probe.why})`, changed: null };
  const mount = cgroup2Mounts().find((m) => probeMount === m.point);
  if (mount === undefined) return { skip: "the probe's cgroup2 mount is not in /proc/self/mountinfo", changed: null };
  if (mount.options.includes("nsdelegate")) return { skip: null, changed: null };
  if (process.getuid?.() !== 0) return { skip: "cgroup2 lacks nsdelegate and only root may remount it", changed: null };
  try {
    execFileSync("mount", ["-o", `remount,${[...mount.options, "nsdelegate"].join(",")}`, "cgroup2", mount.point]);
  } catch (e) {
    return { skip: `cannot remount cgroup2 with nsdelegate (${(e as Error).message})`, changed: null };
  }
  return { skip: null, changed: mount };
}

const { skip, changed } = setUp();
if (changed) console.log(`[cgroup-boundary.test] cgroup2 at ${changed.point} remounted with nsdelegate for this run`);
if (skip) console.log(`[cgroup-boundary.test] skipped: ${skip}`);
const note = skip ? ` [skipped: ${skip}]` : "";
afterAll(() => {
  if (changed) execFileSync("mount", ["-o", `remount,${changed.options.join(",")}`, "cgroup2", changed.point]);
});

const strays: number[] = [];
afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

/** A controller whose sessions run under the given wrapper (chosen when the controller installs it). */
async function controller(
  label: string,
  wrapper: "native" | "node" = "native",
): Promise<{ ctl: AcpxLifecycleController; dir: string }> {
  const dir = tempStateDir(label);
  const saved = process.env.PROCLEASE_WRAPPER;
  process.env.PROCLEASE_WRAPPER = wrapper;
  try {
    const ctl = await createAcpxLifecycleController({ stateDir: dir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    return { ctl, dir };
  } finally {
    if (saved === undefined) delete process.env.PROCLEASE_WRAPPER;
    else process.env.PROCLEASE_WRAPPER = saved;
  }
}

function readWhenThere(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

const mountPoint = (): string => probeMount!;

describe.skipIf(skip !== null)(`the lease cgroup's boundary under nsdelegate (a root agent)${note}`, () => {
  it.each(["native", "node"] as const)(
    "a setsid, env-cleared grandchild that writes itself into the root cgroup is refused, and the close ends it after its wrapper was killed (%s wrapper)",
    async (wrapper) => {
      const { ctl, dir } = await controller(`escape-${wrapper}`, wrapper);
      const out = join(dir, "escapee");
      const escapee = [
        "trap '' TERM",
        `echo $$ > ${out}.pid`,
        `if echo $$ > ${mountPoint()}/cgroup.procs; then echo escaped > ${out}.how; else echo refused > ${out}.how; fi`,
        "while :; do /bin/sleep 1; done",
      ].join("; ");
      const script = `setsid /usr/bin/env -i /bin/sh -c '${escapee}' </dev/null >/dev/null 2>&1 & exec "$0" "$@"`;
      const h = await ctl.ensureSession({
        sessionKey: `boundary:escape:${wrapper}`,
        agentId: "hostile",
        command: ["/bin/sh", "-c", script, ...agentArgv({})],
      });
      trackLease(h.leaseId);
      expect(await waitFor(() => /^(escaped|refused)\n$/.test(readWhenThere(`${out}.how`)), 10_000)).not.toBe(-1);
      const pid = Number(readWhenThere(`${out}.pid`));
      trackPid(pid);
      strays.push(pid);
      expect(readFileSync(`/proc/${pid}/environ`).length).toBe(0);
      // the agent kills its own wrapper: nothing of the lease keeps a parent link to it any more
      process.kill(h.rootPid, "SIGKILL");
      expect(await waitFor(() => !alive(h.rootPid), 5000)).not.toBe(-1);
      expect(readWhenThere(`${out}.how`)).toBe("refused\n");

      const report = await ctl.closeSession({ handle: h });
      expect(report, report.detail).toMatchObject({ outcome: "closed", leaseState: "closed", settledAs: "killed" });
      expect(await waitFor(() => !alive(pid), 5000)).not.toBe(-1);
    },
  );

  it("the agent cannot pull another session's wrapper and adapter, nor an unrelated process, into its lease cgroup", async () => {
    const { ctl, dir } = await controller("pull");
    const go = join(dir, "go");
    const done = join(dir, "done");
    // waits for "<cgroup.procs path> <pid>..." in `go`, tries each write, writes "<pid>:moved|refused" lines to `done`
    const puller = [
      `while [ ! -s ${go} ]; do /bin/sleep 0.05; done`,
      `set -- $(cat ${go})`,
      'procs=$1; shift; for p in "$@"; do if echo $p > $procs; then echo $p:moved; else echo $p:refused; fi; done > ' +
        `${done}.tmp; mv ${done}.tmp ${done}`,
    ].join("; ");
    const hostile = await ctl.ensureSession({
      sessionKey: "boundary:hostile",
      agentId: "hostile",
      command: ["/bin/sh", "-c", `(${puller}) </dev/null >/dev/null 2>&1 & exec "$0" "$@"`, ...agentArgv({})],
    });
    trackLease(hostile.leaseId);
    const innocent = await ctl.ensureSession({ sessionKey: "boundary:innocent", agentId: "i", command: agentArgv({}) });
    trackLease(innocent.leaseId);
    const sleeper = spawn("/bin/sleep", ["600"], { stdio: "ignore", detached: true });
    strays.push(sleeper.pid!);
    const leases = await ctl.listLeases();
    const cgOf = (id: string) => leases.find((l) => l.leaseId === id)!.cgroup!.path;
    const targets = [innocent.rootPid, innocent.processGroupId!, sleeper.pid!];
    const before = targets.map((p) => readFileSync(`/proc/${p}/cgroup`, "utf8"));
    writeFileSync(go, `${cgOf(hostile.leaseId)}/cgroup.procs ${targets.join(" ")}\n`);
    expect(await waitFor(() => readWhenThere(done) !== "", 10_000)).not.toBe(-1);
    expect(readWhenThere(done)).toBe(targets.map((p) => `${p}:refused\n`).join(""));
    expect(targets.map((p) => readFileSync(`/proc/${p}/cgroup`, "utf8"))).toEqual(before);
    expect(await ctl.closeSession({ handle: hostile })).toMatchObject({ outcome: "closed" });
    for (const p of targets) expect(alive(p)).toBe(true);
  });

  it("a terminal the agent asked for gets the same boundary: its setsid, env-cleared escapee's write to the root cgroup is refused, and the close ends it", async () => {
    const dir = tempStateDir("terminal");
    const ctl = await createAcpxLifecycleController({
      stateDir: dir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      clientCapabilities: { terminal: true },
    });
    controllers.push(ctl);
    const out = join(dir, "escapee");
    const escapee = [
      "trap '' TERM",
      `echo $$ > ${out}.pid`,
      `if echo $$ > ${mountPoint()}/cgroup.procs; then echo escaped > ${out}.how; else echo refused > ${out}.how; fi`,
      "while :; do /bin/sleep 1; done",
    ].join("; ");
    // a script file: the terminal's own shell must not expand the escapee's $$
    writeFileSync(`${out}.sh`, `${escapee}\n`);
    const h = await ctl.ensureSession({ sessionKey: "boundary:terminal", agentId: "hostile", command: agentArgv({}) });
    trackLease(h.leaseId);
    // the terminal's root exits at once; only its escapee is left, and only the terminal's cgroup knows it
    await say(ctl, h, `/terminal-start setsid /usr/bin/env -i /bin/sh ${out}.sh </dev/null >/dev/null 2>&1 & exit 0`);
    expect(await waitFor(() => /^(escaped|refused)\n$/.test(readWhenThere(`${out}.how`)), 10_000)).not.toBe(-1);
    const pid = Number(readWhenThere(`${out}.pid`));
    trackPid(pid);
    strays.push(pid);
    expect(readWhenThere(`${out}.how`)).toBe("refused\n");
    expect(await ctl.closeSession({ handle: h })).toMatchObject({ outcome: "closed" });
    expect(await waitFor(() => !alive(pid), 10_000)).not.toBe(-1);
  });

  it("detection says the boundary holds here, and names what is missing where it would not", async () => {
    const c = await detectContainment();
    if (!c.available) throw new Error(`the probe says containment works here, detection says: ${c.why}`);
    expect(c.boundary, c.boundary.why).toMatchObject({ holds: true });
    const table = await readMountTable();
    const without = table.entries.map((e) =>
      e.mountPoint === mountPoint() ? { ...e, superOptions: e.superOptions.filter((o) => o !== "nsdelegate") } : e,
    );
    const off = await predictBoundary(without, mountOf(c));
    expect(off).toMatchObject({ holds: false, code: "no-nsdelegate" });
    if (!off.holds) expect(off.why).toContain(`mount -o remount,nsdelegate cgroup2 ${mountPoint()}`);
    // a gateway that is not root cannot give its adapters a namespace at all
    const asNobody = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const { predictBoundary } = await import(${JSON.stringify(join(ROOT, "dist/containment/boundary.js"))});
         const { readMountTable } = await import(${JSON.stringify(join(ROOT, "dist/containment/mountinfo.js"))});
         const t = await readMountTable();
         console.log(JSON.stringify(await predictBoundary(t.entries, { mountPoint: ${JSON.stringify(mountPoint())}, root: "/", readOnly: false })));`,
      ],
      { uid: 65534, gid: 65534, encoding: "utf8", timeout: 20_000 },
    );
    if (asNobody.status !== 0) {
      console.log(`[cgroup-boundary.test] the uid 65534 case did not run: ${asNobody.stderr.trim().split("\n")[0]}`);
      return;
    }
    expect(JSON.parse(asNobody.stdout)).toMatchObject({ holds: false, code: "not-privileged" });
  });
});
