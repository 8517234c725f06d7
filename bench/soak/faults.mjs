// The soak's fault mode (--faults, issue 17): real faults in random windows
// while the sessions run, drawn from the printed seed (their timing on a busy
// host does not replay):
//   ENOSPC  the state dir lives on a size-limited tmpfs (root: mount(2));
//           a window fills it to the last block, its end gives the space back
//   EMFILE  the live gateway's RLIMIT_NOFILE soft limit is lowered to a few
//           above the descriptors it holds (prlimit --pid), then restored
// The soak's assertions stay as they are: 0 orphans, 0 foreign signals, every
// lease closed or lost at the end, nothing quarantined, no gateway dying on its
// own. What a window may change is which scripted steps succeed: a step that
// failed naming the fault (or a close whose settlement was left pending) is
// counted as faulted, not as an error; every other failure still is.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rng, subSeed } from "./rng.mjs";
import { stat } from "./proc.mjs";

/** What a step's error text must name to count as the fault's, not the library's. */
export const FAULT_TEXT =
  /ENOSPC|EMFILE|ENFILE|EDQUOT|no space left|descriptor|RLIMIT_NOFILE|could not be written|could not be read|settlement pending|read it as gone|Too many open files/;

/** Why this host cannot run the fault mode, or null. */
export function faultModeUnavailable() {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0)
    return "not root: the ENOSPC windows need a size-limited tmpfs (mount) and the EMFILE ones prlimit --pid on the gateway";
  if (spawnSync("prlimit", ["--version"]).status !== 0) return "prlimit(1) is not installed";
  return null;
}

export class FaultWindows {
  constructor({ seed, dir, sizeKb = 16 * 1024 }) {
    this.r = rng(subSeed(seed, 1_000_003));
    this.dir = dir;
    const m = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${sizeKb}k,mode=0700`, "tmpfs", dir], {
      encoding: "utf8",
    });
    if (m.status !== 0) throw new Error(`mount tmpfs on ${dir}: ${m.stderr.trim()}`);
    this.mounted = true;
    this.windows = []; // {kind, pid, t0, t1, detail}
    this.active = null;
    this.stopped = false;
    this.loop = null;
  }

  /** Runs windows until stop(); `gatewayPid()` names the live incarnation's gateway (null between them). */
  start(gatewayPid) {
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    this.loop = (async () => {
      // the first window waits for the first gateway to be up: a state dir that was never initialised
      // cannot be on a full disk (its instance id, wrapper and folders must be written once)
      while (!this.stopped && gatewayPid() === null) await sleep(50);
      while (!this.stopped) {
        await sleep(this.r.int(1500, 5000));
        if (this.stopped) break;
        const kind = this.r.chance(0.5) ? "ENOSPC" : "EMFILE";
        const ms = this.r.int(300, 2500);
        const pid = gatewayPid();
        const w = kind === "ENOSPC" ? this.fill() : pid ? this.lowerNofile(pid) : null;
        if (!w) continue;
        this.active = w;
        this.windows.push(w);
        await sleep(ms);
        this.end(w);
      }
    })();
  }

  fill() {
    const file = join(this.dir, ".soak-fill");
    spawnSync("dd", ["if=/dev/zero", `of=${file}`, "bs=64k"], { stdio: "ignore" });
    for (let i = 0; i < 32; i++) {
      try {
        writeFileSync(`${file}-${i}`, "x".repeat(512));
      } catch {
        break;
      }
    }
    return { kind: "ENOSPC", t0: Date.now(), t1: null, detail: "tmpfs full" };
  }

  lowerNofile(pid) {
    const start = stat(pid)?.startTime;
    let fds;
    let limits;
    try {
      fds = readdirSync(`/proc/${pid}/fd`).length;
      limits = readFileSync(`/proc/${pid}/limits`, "utf8")
        .split("\n")
        .find((l) => l.startsWith("Max open files"));
    } catch {
      return null;
    }
    const [soft, hard] = limits.slice("Max open files".length).trim().split(/\s+/);
    const low = fds + 3;
    if (spawnSync("prlimit", ["--pid", String(pid), `--nofile=${low}:${hard}`]).status !== 0) return null;
    return {
      kind: "EMFILE",
      pid,
      start,
      soft,
      hard,
      t0: Date.now(),
      t1: null,
      detail: `RLIMIT_NOFILE ${soft} → ${low} (${fds} open)`,
    };
  }

  end(w) {
    if (w.t1 !== null) return;
    w.t1 = Date.now();
    if (this.active === w) this.active = null;
    if (w.kind === "ENOSPC") {
      for (const n of readdirSync(this.dir)) if (n.startsWith(".soak-fill")) rmSync(join(this.dir, n), { force: true });
    } else if (stat(w.pid)?.startTime === w.start) {
      spawnSync("prlimit", ["--pid", String(w.pid), `--nofile=${w.soft}:${w.hard}`]);
    }
  }

  /** Ends the window in progress and stops drawing new ones. */
  async stop() {
    this.stopped = true;
    if (this.active) this.end(this.active);
    await this.loop;
    if (this.active) this.end(this.active);
  }

  umount() {
    if (!this.mounted) return;
    this.mounted = false;
    spawnSync("umount", ["-l", this.dir]);
  }

  summary() {
    const by = { ENOSPC: 0, EMFILE: 0 };
    let ms = 0;
    for (const w of this.windows) {
      by[w.kind]++;
      ms += (w.t1 ?? Date.now()) - w.t0;
    }
    return { count: this.windows.length, by, seconds: ms / 1000 };
  }

  get mountedDir() {
    return existsSync(this.dir) ? this.dir : null;
  }
}
