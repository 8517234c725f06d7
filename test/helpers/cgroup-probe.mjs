// Whether this host can contain processes in cgroup v2, decided without the
// code under test: find a cgroup2 mount in /proc/self/mountinfo, make a cgroup
// under this process's own cgroup there, move a real child into it, read the
// child's /proc/PID/cgroup back, end the child and remove the cgroup. The
// containment tests run when this says yes, whatever detectContainment()
// says; a detection that calls a working host "off" then fails them instead
// of turning them into skips.
//
// Works on a pure cgroup2 host (/sys/fs/cgroup is cgroup2) and on a hybrid
// one (v1 controllers, cgroup2 at /sys/fs/cgroup/unified): the mount is
// found by type, not by path.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** mountinfo escapes space, tab, newline and backslash as \ooo */
const unescape = (s) => s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));

/** @returns {{ root: string, point: string, fstype: string, superOptions: string[] }[]} */
function mounts() {
  const out = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const sep = line.indexOf(" - ");
    if (sep < 0) continue;
    const left = line.slice(0, sep).split(" ");
    const [fstype = "", , superOptions = ""] = line.slice(sep + 3).split(" ");
    out.push({
      root: unescape(left[3] ?? ""),
      point: unescape(left[4] ?? ""),
      fstype,
      superOptions: superOptions.split(","),
    });
  }
  return out;
}

function ownV2Path() {
  const line = readFileSync("/proc/self/cgroup", "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  return line === undefined ? null : line.slice(3);
}

const v2PathOf = (pid) => {
  try {
    return (
      readFileSync(`/proc/${pid}/cgroup`, "utf8")
        .split("\n")
        .find((l) => l.startsWith("0::"))
        ?.slice(3) ?? null
    );
  } catch {
    return null;
  }
};

let cached;

export function probeCgroup2() {
  cached ??= probe();
  return cached;
}

async function probe() {
  if (process.platform !== "linux")
    return { writable: false, why: `cgroup v2 is Linux-only; this is ${process.platform}`, layout: "none" };
  const all = mounts();
  const v2 = all.filter((m) => m.fstype === "cgroup2");
  const layout = all.some((m) => m.fstype === "cgroup") ? "hybrid" : v2.length > 0 ? "unified" : "none";
  if (v2.length === 0) return { writable: false, why: "no cgroup2 mount in /proc/self/mountinfo", layout };
  const own = ownV2Path();
  if (own === null) return { writable: false, why: "/proc/self/cgroup has no v2 (0::) line", layout };
  const whys = [];
  for (const m of v2) {
    // a mount of a subtree (its root is not "/") shows only what lies under that root
    const rel = m.root === "/" ? own : own === m.root || own.startsWith(`${m.root}/`) ? own.slice(m.root.length) : null;
    if (rel === null) {
      whys.push(`${m.point}: this process's cgroup ${own} is outside the mount's root ${m.root}`);
      continue;
    }
    const dir = join(m.point, rel, `proclease-test-probe-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
    const r = await tryContain(dir);
    if (r === null)
      return {
        writable: true,
        mount: m.point,
        own: join(m.point, rel).replace(/(.)\/$/, "$1"),
        layout: layout === "none" ? "unified" : layout,
      };
    whys.push(`${m.point}: ${r}`);
  }
  return { writable: false, why: whys.join("; "), layout };
}

/** null when a child could be moved into a fresh cgroup at `dir` (removed again); else why not */
async function tryContain(dir) {
  try {
    mkdirSync(dir);
  } catch (err) {
    return `mkdir ${dir} failed (${err.code ?? String(err)})`;
  }
  const child = spawn("sleep", ["1000"], { stdio: "ignore" });
  const exited = once(child, "exit");
  let result = null;
  try {
    if (child.pid === undefined) throw new Error("sleep did not start");
    writeFileSync(join(dir, "cgroup.procs"), String(child.pid));
    const seen = v2PathOf(child.pid);
    if (seen === null || !dir.endsWith(seen))
      result = `the child was moved, but /proc/${child.pid}/cgroup says ${String(seen)}`;
  } catch (err) {
    result = `moving a child into ${dir} failed (${err.code ?? String(err)})`;
  } finally {
    child.kill("SIGKILL");
    await exited;
  }
  // the cgroup empties once the child is reaped; rmdir answers EBUSY until then
  for (let i = 0; ; i++) {
    try {
      rmdirSync(dir);
      break;
    } catch (err) {
      const code = err.code;
      if (code !== "EBUSY" || i >= 500) return result ?? `rmdir ${dir} failed (${code ?? String(err)})`;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  return result;
}

/** The skip note a containment test carries when the probe says no, "" when it says yes. */
export function containmentSkipNote(p) {
  return p.writable ? "" : ` [skipped: no writable cgroup v2 here (independent probe): ${p.why}]`;
}

/**
 * The kind of host, for the committed list of tests it may skip
 * (.ci/expected-skips/<kind>.txt): who runs the suite, and what cgroup v2
 * the independent probe found: root-hybrid, root-unified, root-no-cgroup2,
 * user-hybrid, ...
 */
export async function hostKind() {
  const p = await probeCgroup2();
  const who = process.getuid?.() === 0 ? "root" : "user";
  return `${who}-${p.writable ? p.layout : "no-cgroup2"}`;
}

/**
 * Which of `wanted` a lease cgroup here can use, by the kernel's own files:
 * a controller bound to a v1 hierarchy (named in a "cgroup" mount's options)
 * cannot be enabled on v2; one listed in the cgroup2 mount's root
 * cgroup.controllers can. Without a writable cgroup2, none.
 */
export async function v2ControllersFor(wanted) {
  const p = await probeCgroup2();
  const v1 = new Set(
    mounts()
      .filter((m) => m.fstype === "cgroup")
      .flatMap((m) => m.superOptions),
  );
  let root = [];
  if (p.writable) {
    try {
      root = readFileSync(join(p.mount, "cgroup.controllers"), "utf8").trim().split(/\s+/);
    } catch {
      root = [];
    }
  }
  return {
    usable: wanted.filter((c) => p.writable && root.includes(c) && !v1.has(c)),
    onV1: wanted.filter((c) => v1.has(c)),
  };
}
