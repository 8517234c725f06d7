/**
 * The host faults of the fault suite that need root and undoing (harness.ts
 * has the rest): a size-limited tmpfs to fill, and a pids cgroup to put a
 * gateway in. Each comes with the reason a host cannot make it, for the test
 * to skip with.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IS_ROOT, waitFor } from "./harness.js";

/** A tmpfs of `sizeKb` mounted on a fresh folder (root only); fill() takes every free block, unfill() gives them back. */
export interface Tmpfs {
  dir: string;
  fill(): void;
  unfill(): void;
  umount(): void;
}

export function tmpfsSkipReason(): string | null {
  if (process.platform !== "linux") return "not Linux: no tmpfs";
  if (!IS_ROOT) return "not root: a size-limited tmpfs needs mount(2)";
  const probe = mkdtempSync(join(tmpdir(), "proclease-faults-probe-"));
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], { encoding: "utf8" });
  if (r.status === 0) spawnSync("umount", [probe]);
  rmSync(probe, { recursive: true, force: true });
  return r.status === 0 ? null : `mount -t tmpfs failed here: ${(r.stderr || r.error?.message || "").trim()}`;
}

export function mountTmpfs(sizeKb: number): Tmpfs {
  const dir = mkdtempSync(join(tmpdir(), "proclease-faults-tmpfs-"));
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${sizeKb}k,mode=0700`, "tmpfs", dir], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`mount tmpfs on ${dir}: ${r.stderr}`);
  const fillFile = join(dir, "fill");
  let mounted = true;
  return {
    dir,
    fill() {
      // dd stops at ENOSPC; a few small files then take the last partial blocks
      spawnSync("dd", ["if=/dev/zero", `of=${fillFile}`, "bs=4k"], { encoding: "utf8" });
      for (let i = 0; i < 64; i++) {
        try {
          writeFileSync(join(dir, `fill-${i}`), "x".repeat(512));
        } catch {
          break;
        }
      }
    },
    unfill() {
      for (const n of readdirSync(dir)) if (n.startsWith("fill")) rmSync(join(dir, n), { force: true });
    },
    umount() {
      if (!mounted) return;
      mounted = false;
      spawnSync("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A pids cgroup (v2 where the controller is on cgroup2, else v1) for a test to put a gateway in. */
export interface PidsCgroup {
  path: string;
  version: 1 | 2;
  setMax(n: number | "max"): void;
  current(): number;
  add(pid: number): void;
  /** moves what is left in it back to the parent and removes it, waiting for a dying task to leave; throws when it cannot */
  remove(): Promise<void>;
}

function pidsV1Mount(): string | null {
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const f = line.split(" ");
    const sep = f.indexOf("-");
    if (sep > 0 && f[sep + 1] === "cgroup" && (f[sep + 3] ?? "").split(",").includes("pids")) return f[4]!;
  }
  return null;
}

export function pidsCgroupSkipReason(): string | null {
  if (process.platform !== "linux") return "not Linux: no cgroups";
  if (!IS_ROOT) return "not root: a pids cgroup needs write access to the cgroup tree";
  if (pidsV1Mount() === null) return "no pids controller mounted (neither cgroup v1 pids nor a writable v2 one)";
  return null;
}

export function makePidsCgroup(label: string): PidsCgroup {
  const mount = pidsV1Mount();
  if (mount === null) throw new Error("no pids cgroup");
  const path = join(mount, `proclease-faults-${label}-${process.pid}-${Date.now()}`);
  mkdirSync(path);
  return {
    path,
    version: 1,
    setMax: (n) => writeFileSync(join(path, "pids.max"), String(n)),
    current: () => Number(readFileSync(join(path, "pids.current"), "utf8")),
    add: (pid) => writeFileSync(join(path, "cgroup.procs"), String(pid)),
    async remove() {
      // A task killed just before still counts in a v1 cgroup until it is
      // reaped, and rmdir says EBUSY meanwhile: wait for that, and fail
      // loudly past the deadline rather than leave the folder on the host.
      await waitFor(() => moveBackAndRemove(mount, path), 10_000, 10).catch((e: Error) => {
        throw new Error(`pids cgroup ${path} not removed: ${e.message}`);
      });
    },
  };
}

/**
 * One try at removing a v1 pids cgroup: whatever is left in it goes back to
 * the parent, then rmdir. true once it is gone, false while a dying task
 * keeps it busy; any other refusal throws.
 */
function moveBackAndRemove(mount: string, path: string): boolean {
  let procs: string[];
  try {
    procs = readFileSync(join(path, "cgroup.procs"), "utf8").split("\n").filter(Boolean);
  } catch {
    return true; // already removed
  }
  for (const p of procs) {
    try {
      writeFileSync(join(mount, "cgroup.procs"), p);
    } catch {
      // gone or going
    }
  }
  try {
    rmdirSync(path);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return true;
    if (code === "EBUSY") return false;
    throw e;
  }
}
