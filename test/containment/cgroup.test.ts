// cgroup v2 containment on real processes: the env-scrubbed setsid escapee
// that outlives a SIGKILLed wrapper + adapter is still listed by the lease
// cgroup and ended by it (cgroup.kill, and the signal-loop fallback); cgroup
// identity across a re-created name; the guards. Limits, memory and the
// controllers detected are cgroup-resources.test.ts's; detection as an
// unprivileged user and from inside the gateway leaf is
// detection-elsewhere.test.ts's.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createLeaseCgroup,
  enterCgroup,
  GATEWAY_LEAF,
  isPopulated,
  killCgroup,
  listLeaseCgroups,
  membersOf,
  readCgroupOf,
  removeCgroup,
  signalMembers,
  verifyCgroupIdentity,
  waitUntilEmpty,
  type ContainmentSupport,
  type LeaseCgroup,
} from "../../src/containment/index.js";
import { NOTE, on, probe, SKIP, support } from "./cgroup-setup.js";
import { useLeaseCgroups } from "./lease-cgroups.js";
import { isAliveSync, readStat } from "../helpers/liveness.js";
import { isAlive, waitFor } from "../supervisor/helpers.js";

if (SKIP) console.log(`containment/cgroup.test:${NOTE}`);

const { made, pids, children, INSTANCE, nextSeq, lease, startFixture } = useLeaseCgroups("cgroup");

/**
 * The test's own reading of "is `pid` inside `cg` (or below it), and is that
 * still the directory `cg` was made as": /proc/PID/cgroup's 0:: line, mapped
 * under this process's own cgroup (where every test cgroup is made), and the
 * directory's inode. A zombie runs nothing: "gone".
 */
function membership(pid: number, cg: LeaseCgroup): "member" | "not-member" | "gone" {
  const v2 = (p: number | "self") => {
    try {
      return (
        readFileSync(`/proc/${p}/cgroup`, "utf8")
          .split("\n")
          .find((l) => l.startsWith("0::"))
          ?.slice(3) ?? null
      );
    } catch {
      return null;
    }
  };
  const theirs = v2(pid);
  if (theirs === null || !isAliveSync(pid)) return "gone";
  const ours = v2("self")!;
  if (!probe.writable || (ours !== "/" && theirs !== ours && !theirs.startsWith(`${ours}/`))) return "not-member";
  const path = probe.own + (ours === "/" ? theirs : theirs.slice(ours.length));
  if (path !== cg.path && !path.startsWith(`${cg.path}/`)) return "not-member";
  try {
    return String(statSync(cg.path, { bigint: true }).ino) === cg.id ? "member" : "not-member";
  } catch {
    return "not-member";
  }
}

const environOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/environ`);
  } catch {
    return null;
  }
};

describe("detection on this host", () => {
  it(`detectContainment() agrees with the independent probe (${probe.writable ? `a child was moved into a cgroup under ${probe.own}` : `no: ${probe.why}`})`, () => {
    expect(support.available, `detectContainment(): ${JSON.stringify(support)}; probe: ${JSON.stringify(probe)}`).toBe(
      probe.writable,
    );
  });

  it.skipIf(SKIP)(
    `finds our cgroup from /proc, proves a child cgroup works, leaves no probe behind${NOTE}`,
    async () => {
      const s = on(support);
      const ours = await readCgroupOf(process.pid);
      expect(ours).not.toBeNull();
      // the vitest worker never moves: the base is where we are
      expect(s.base).toBe(ours);
      expect(s.gatewayCgroup).toBe(ours);
      expect(s.movedGateway).toBe(false);
      expect(s.root).toBe(`${ours}/proclease`);
      expect(s.base.startsWith(s.mount)).toBe(true);
      const mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
      expect(mountinfo).toContain(` ${s.mount.replace(/ /g, "\\040")} `);
      const line = mountinfo
        .split("\n")
        .find((l) => l.includes(` ${s.mount.replace(/ /g, "\\040")} `) && l.includes(" - cgroup2 "));
      expect(s.favordynmods).toBe(/[ ,]favordynmods(,|$)/.test(line!.split(" - ")[1]!));
      expect(statSync(s.root).isDirectory()).toBe(true);
      expect(s.kill).toBe(existsSync(`${(await lease("killfile")).path}/cgroup.kill`) ? "cgroup.kill" : "signal-loop");
      expect(readdirSync(s.root).filter((n) => n.startsWith(`_probe-${process.pid}-`))).toEqual([]);
    },
  );
});

describe("the env-scrubbed setsid escapee", () => {
  for (const method of ["cgroup.kill", "signal-loop"] as const) {
    it.skipIf(SKIP)(
      `survives SIGKILL of wrapper + adapter; the lease cgroup still lists it and ${method} ends it; populated 0; rmdir${NOTE}`,
      async () => {
        const cg = await lease(`escapee-${method.replace(".", "")}`);
        const { pid } = await startFixture("escapee.sh", [cg.path], ["wrapper", "adapter", "escapee"]);
        const escapee = pid.escapee!;
        // the escapee is where the ownership markers cannot follow: new session, empty environment
        await waitFor(() => readStat(escapee)?.session === escapee && readStat(escapee)?.comm === "sleep", 10_000);
        expect(environOf(escapee)?.length).toBe(0);
        for (const p of [pid.wrapper!, pid.adapter!, escapee]) expect(await readCgroupOf(p)).toBe(cg.path);

        process.kill(pid.adapter!, "SIGKILL");
        process.kill(pid.wrapper!, "SIGKILL");
        await waitFor(() => !isAlive(pid.adapter!) && !isAlive(pid.wrapper!), 10_000);
        // re-parented away from its dead parents, no marker, yet still a member
        await waitFor(() => readStat(escapee)?.ppid !== pid.adapter, 10_000);
        expect(isAlive(escapee)).toBe(true);
        const members = await membersOf(cg.path);
        expect(members).toEqual({ state: "ok", pids: [escapee] });
        expect(membership(escapee, cg)).toBe("member");
        expect(await isPopulated(cg.path)).toBe("populated");

        if (method === "cgroup.kill") {
          // one write; the kernel delivers asynchronously, so populated is polled
          expect(await killCgroup(cg.path, { method, waitMs: 0 })).toEqual({ outcome: "sent", via: "cgroup.kill" });
          expect(await waitUntilEmpty(cg.path, 10_000)).toBe("empty");
        } else {
          expect(await killCgroup(cg.path, { method, waitMs: 10_000 })).toEqual({
            outcome: "empty",
            via: "signal-loop",
          });
          // the loop froze the cgroup against forks; it is thawed again
          expect(readFileSync(`${cg.path}/cgroup.freeze`, "utf8").trim()).toBe("0");
        }
        await waitFor(() => !isAlive(escapee), 10_000);
        expect(await isPopulated(cg.path)).toBe("empty");
        expect(await membersOf(cg.path)).toEqual({ state: "ok", pids: [] });
        expect(await removeCgroup(cg.path)).toEqual({ outcome: "removed" });
        expect(existsSync(cg.path)).toBe(false);
        expect(await verifyCgroupIdentity(cg.path, cg.id)).toBe("gone");
        expect(membership(escapee, cg)).toBe("gone");
      },
    );
  }

  for (const method of ["cgroup.kill", "signal-loop"] as const) {
    it.skipIf(SKIP)(`${method} ends a member that keeps forking during the teardown${NOTE}`, async () => {
      const cg = await lease(`storm-${method.replace(".", "")}`);
      await startFixture("fork-storm.sh", [cg.path], ["storm"]);
      await waitFor(async () => {
        const m = await membersOf(cg.path);
        return m.state === "ok" && m.pids.length >= 20;
      }, 15_000);
      const k = await killCgroup(cg.path, { method, waitMs: 15_000 });
      expect(k).toEqual({ outcome: "empty", via: method });
      expect(await isPopulated(cg.path)).toBe("empty");
      expect(await removeCgroup(cg.path)).toEqual({ outcome: "removed" });
    });
  }

  it.skipIf(SKIP)(
    `signalMembers sends the TERM phase to every member (and a TERM-deaf one needs the kill)${NOTE}`,
    async () => {
      const cg = await lease("term");
      const deaf = spawn(
        "/bin/sh",
        ["-c", `echo $$ > '${cg.path}/cgroup.procs' && trap '' TERM && echo ready && while :; do sleep 1; done`],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      children.push(deaf);
      pids.add(deaf.pid!);
      let out = "";
      deaf.stdout!.on("data", (d: Buffer) => (out += d.toString()));
      await waitFor(() => out.includes("ready"), 10_000);
      const polite = spawn("sleep", ["1000"], { stdio: "ignore" });
      children.push(polite);
      pids.add(polite.pid!);
      expect(enterCgroup(cg.path, polite.pid!)).toEqual({ outcome: "moved" });
      const r = await signalMembers(cg.path, "SIGTERM");
      expect(r.state).toBe("ok");
      if (r.state !== "ok") return;
      const byPid = new Map(r.sent.map((s) => [s.pid, s.outcome]));
      expect(byPid.get(deaf.pid!)).toBe("signalled");
      expect(byPid.get(polite.pid!)).toBe("signalled");
      await waitFor(() => polite.exitCode !== null || polite.signalCode !== null, 10_000);
      expect(polite.signalCode).toBe("SIGTERM");
      expect(await isPopulated(cg.path)).toBe("populated");
      expect(await killCgroup(cg.path)).toEqual({ outcome: "empty", via: "cgroup.kill" });
    },
  );
});

describe("identity and membership", () => {
  it.skipIf(SKIP)(
    `a cgroup removed and created again under the same name does not pass for the old one${NOTE}`,
    async () => {
      const first = await lease("reuse");
      expect(await verifyCgroupIdentity(first.path, first.id)).toBe("match");
      expect(await removeCgroup(first.path)).toEqual({ outcome: "removed" });
      expect(await verifyCgroupIdentity(first.path, first.id)).toBe("gone");
      const name = first.path.slice(first.path.lastIndexOf("/") + 1);
      const again = await createLeaseCgroup(support, name, INSTANCE);
      expect(again.ok).toBe(true);
      if (!again.ok) return;
      made.push(again.cgroup);
      expect(again.cgroup.path).toBe(first.path);
      expect(again.cgroup.id).not.toBe(first.id);
      expect(await verifyCgroupIdentity(first.path, first.id)).toBe("mismatch");
      expect(await verifyCgroupIdentity(first.path, again.cgroup.id)).toBe("match");
      const child = spawn("sleep", ["1000"], { stdio: "ignore" });
      children.push(child);
      pids.add(child.pid!);
      expect(enterCgroup(again.cgroup.path, child.pid!)).toEqual({ outcome: "moved" });
      expect(membership(child.pid!, again.cgroup)).toBe("member");
      // the old lease's record names the same path, but not this cgroup
      expect(membership(child.pid!, first)).toBe("not-member");
      // a process elsewhere is not a member
      expect(membership(process.pid, again.cgroup)).toBe("not-member");
    },
  );

  it.skipIf(SKIP)(
    `with an instance name, the lease cgroup sits in the instance folder (made once, kept); kill and remove take it, never the folder or the root${NOTE}`,
    async () => {
      on(support);
      if (!support.available) return; // narrows the type: on() has thrown otherwise
      const instance = `test-instance-${process.pid}-${nextSeq()}`;
      const folder = `${support.root}/${instance}`;
      try {
        const a = await createLeaseCgroup(support, `lease-a-${process.pid}`, instance);
        const b = await createLeaseCgroup(support, `lease-b-${process.pid}`, instance);
        expect(a.ok && b.ok).toBe(true);
        if (!a.ok || !b.ok) return;
        expect(a.cgroup.path).toBe(`${folder}/lease-a-${process.pid}`);
        expect(b.cgroup.path).toBe(`${folder}/lease-b-${process.pid}`);
        const child = spawn("sleep", ["1000"], { stdio: "ignore" });
        children.push(child);
        pids.add(child.pid!);
        expect(enterCgroup(a.cgroup.path, child.pid!)).toEqual({ outcome: "moved" });
        expect(await killCgroup(folder)).toMatchObject({ outcome: "refused" });
        expect(await removeCgroup(folder)).toMatchObject({ outcome: "refused" });
        expect(await removeCgroup(support.root)).toMatchObject({ outcome: "refused" });
        expect(existsSync(b.cgroup.path)).toBe(true);
        expect(await killCgroup(a.cgroup.path)).toMatchObject({ outcome: "empty" });
        expect(await removeCgroup(a.cgroup.path)).toEqual({ outcome: "removed" });
        expect(await removeCgroup(b.cgroup.path)).toEqual({ outcome: "removed" });
        const bad = await createLeaseCgroup(support, "x", "a.b");
        expect(bad.ok === false && bad.code).toBe("bad-name");
      } finally {
        for (const n of readdirSync(folder, { withFileTypes: true }))
          if (n.isDirectory()) await removeCgroup(`${folder}/${n.name}`);
        rmdirSync(folder);
      }
    },
  );

  it.skipIf(SKIP)(
    `createLeaseCgroup never adopts an existing directory and refuses names that are not plain${NOTE}`,
    async () => {
      const cg = await lease("exists");
      const name = cg.path.slice(cg.path.lastIndexOf("/") + 1);
      const dup = await createLeaseCgroup(support, name, INSTANCE);
      expect(dup.ok === false && dup.code).toBe("exists");
      for (const bad of ["../escape", GATEWAY_LEAF, "_probe-1", "a.b", "a/b", ""]) {
        const r = await createLeaseCgroup(support, bad, INSTANCE);
        expect(r.ok === false && r.code).toBe("bad-name");
      }
      const offSupport: ContainmentSupport = { available: false, code: "not-linux", why: "test" };
      const r = await createLeaseCgroup(offSupport, "x", INSTANCE);
      expect(r).toEqual({ ok: false, code: "unavailable", why: "test" });
    },
  );

  it.skipIf(SKIP)(
    `enterCgroup: a vanished pid is "gone", a missing cgroup "no-cgroup", a path that is not absolute and normalised refused${NOTE}`,
    async () => {
      const cg = await lease("move");
      const dead = spawnSync("true").pid!;
      expect(enterCgroup(cg.path, dead).outcome).toBe("gone");
      expect(enterCgroup(`${cg.path}-missing`, process.pid).outcome).toBe("no-cgroup");
      expect(enterCgroup("relative/path", process.pid).outcome).toBe("refused");
      expect(enterCgroup(`${cg.path}-missing`).outcome).toBe("no-cgroup");
      expect(enterCgroup(`${cg.path}/`).outcome).toBe("refused");
      expect(await readCgroupOf(dead)).toBeNull();
      expect(() => enterCgroup(cg.path, 0)).toThrow(TypeError);
    },
  );

  it.skipIf(SKIP)(
    `listLeaseCgroups lists lease cgroups with ids and populated state, never our own "_" leaves${NOTE}`,
    async () => {
      const s = on(support);
      const a = await lease("list-a");
      const b = await lease("list-b");
      const child = spawn("sleep", ["1000"], { stdio: "ignore" });
      children.push(child);
      pids.add(child.pid!);
      expect(enterCgroup(b.path, child.pid!)).toEqual({ outcome: "moved" });
      const folder = `${s.root}/${INSTANCE}`;
      mkdirSync(`${folder}/_probe-listing-${process.pid}`);
      try {
        const r = await listLeaseCgroups(folder);
        expect(r.state).toBe("ok");
        if (r.state !== "ok") return;
        const mine = r.cgroups.filter((c) => c.path === a.path || c.path === b.path);
        expect(mine).toEqual([
          { name: a.path.slice(folder.length + 1), path: a.path, id: a.id, populated: "empty" },
          { name: b.path.slice(folder.length + 1), path: b.path, id: b.id, populated: "populated" },
        ]);
        expect(r.cgroups.some((c) => c.name.startsWith("_"))).toBe(false);
        expect(await listLeaseCgroups(`${s.root}/no-such-dir`)).toEqual({ state: "ok", cgroups: [] });
      } finally {
        rmdirSync(`${folder}/_probe-listing-${process.pid}`);
      }
    },
  );

  it.skipIf(SKIP)(
    `removeCgroup waits while populated clears, and removes sub-cgroups of a nested gateway first${NOTE}`,
    async () => {
      const cg = await lease("nested");
      mkdirSync(`${cg.path}/proclease`);
      mkdirSync(`${cg.path}/proclease/inner`);
      const child = spawn("sleep", ["1000"], { stdio: "ignore" });
      children.push(child);
      pids.add(child.pid!);
      expect(enterCgroup(`${cg.path}/proclease/inner`, child.pid!)).toEqual({ outcome: "moved" });
      // the member of a sub-cgroup is a member of the lease
      expect(await membersOf(cg.path)).toEqual({ state: "ok", pids: [child.pid!] });
      expect(membership(child.pid!, cg)).toBe("member");
      // still populated: rmdir must not succeed within a short wait
      const busy = await removeCgroup(cg.path, { waitMs: 50 });
      expect(busy.outcome).toBe("busy");
      // it ends while removeCgroup is retrying
      setTimeout(() => child.kill("SIGKILL"), 100);
      expect(await removeCgroup(cg.path, { waitMs: 10_000 })).toEqual({ outcome: "removed" });
      expect(existsSync(cg.path)).toBe(false);
    },
  );
});

describe("guards", () => {
  it.skipIf(SKIP)(
    `killCgroup refuses a cgroup holding this process, and any path that is not …/proclease/<instance>/<name>${NOTE}`,
    async () => {
      const s = on(support);
      const cg = await lease("self");
      const home = (await readCgroupOf(process.pid))!;
      expect(enterCgroup(cg.path)).toEqual({ outcome: "moved" });
      try {
        expect(await readCgroupOf(process.pid)).toBe(cg.path);
        const k = await killCgroup(cg.path);
        expect(k).toMatchObject({ outcome: "refused", code: "holds-us" });
        const sm = await signalMembers(cg.path, "SIGTERM");
        expect(sm.state).toBe("refused");
      } finally {
        expect(enterCgroup(home)).toEqual({ outcome: "moved" });
      }
      expect(await readCgroupOf(process.pid)).toBe(home);
      for (const p of [s.mount, s.root, s.base, `${s.root}/${GATEWAY_LEAF}`, `${s.root}/${INSTANCE}`]) {
        const k = await killCgroup(p);
        expect(["refused", "gone"]).toContain(k.outcome);
      }
      expect((await killCgroup(s.root)).outcome).toBe("refused");
      // a directory that merely looks like one, on another filesystem
      const fake = mkdtempSync(join(tmpdir(), "proclease-fake-"));
      try {
        mkdirSync(join(fake, "proclease", "o", "x"), { recursive: true });
        const k = await killCgroup(join(fake, "proclease", "o", "x"));
        expect(k).toMatchObject({ outcome: "refused", code: "not-a-lease-cgroup" });
        // the words name which check refused it
        expect(k.outcome === "refused" && k.why).toMatch(/not on a cgroup2 filesystem/);
        expect((await removeCgroup(join(fake, "proclease", "o", "x"))).outcome).toBe("refused");
      } finally {
        rmSync(fake, { recursive: true, force: true });
      }
      expect(await killCgroup(`${s.root}/test-never-made-${process.pid}`)).toEqual({ outcome: "gone" });
    },
  );

  it.skipIf(SKIP)(`an unreadable or missing cgroup is never "empty"${NOTE}`, async () => {
    const s = on(support);
    expect(await isPopulated(`${s.root}/test-never-made-${process.pid}`)).toBe("gone");
    // the root cgroup of the hierarchy has no cgroup.events: no answer, not "empty"
    expect(["unknown", "populated"]).toContain(await isPopulated(s.mount));
    expect(await membersOf(tmpdir())).toMatchObject({ state: "unknown" });
    expect(await verifyCgroupIdentity(tmpdir(), "1")).toBe("unknown");
    await expect(verifyCgroupIdentity(s.root, "abc")).rejects.toThrow(TypeError);
  });
});
