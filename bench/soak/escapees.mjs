// The env-scrubbed setsid escapee of issue 13, as the soak plants and finds it.
// An escapee session's adapter command is /bin/sh, which starts
//   env -i setsid sh -c 'trap "" TERM; …; exec sleep 1000.<nonce>'
// in the background (stdio on /dev/null, as the fixture's own grandchildren)
// and then execs the real adapter, so the adapter keeps the pid the wrapper
// spawned. The escapee carries no environment at all (so no lease marker),
// leads its own session, ignores SIGTERM and, once the adapter and the wrapper
// are gone, has init as its parent: only the lease's cgroup still holds it.
//
// The soak finds it by a marker of its own that is NOT in its environment:
// the run's nonce in its argv, `sleep 1000.<nonce>` (sleep takes only numbers;
// the nonce makes the number unique to this run), and `$0` of the short-lived
// sh before the exec. So the final cleanup ends every escapee whether or not
// the library did. Each escapee also writes its pid to a file named for its
// session, which says whose it is.
import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cmdline, killSame, pids, stat } from "./proc.mjs";

// $0 tag, $1 pidfile, $2 the sleep's argument; then the adapter's argv
const LAUNCH =
  "tag=$0 f=$1 secs=$2; shift 2; " +
  "/usr/bin/env -i /usr/bin/setsid /bin/sh -c " +
  `'trap "" TERM; echo $$ >"$1.tmp" && mv "$1.tmp" "$1"; exec sleep "$2"' "$tag" "$f" "$secs" </dev/null >/dev/null 2>&1 & ` +
  'exec "$@"';

export class Escapees {
  constructor({ pidDir }) {
    this.pidDir = pidDir;
    const nonce = String(randomInt(100_000_000, 1_000_000_000));
    this.tag = `proclease-soak-escapee-${nonce}`;
    // 1000 s and a fraction that names this run: no soak lasts that long, and the cleanup ends it anyway
    this.secs = `1000.${nonce}`;
  }

  pidfile(sid) {
    return join(this.pidDir, `${sid}.escapee`);
  }

  /** The adapter argv wrapped so that it leaves an escapee behind. */
  wrap(argv, sid) {
    return ["/bin/sh", "-c", LAUNCH, this.tag, this.pidfile(sid), this.secs, ...argv];
  }

  /**
   * This run's escapee, in either stage: the inner sh before its exec, or the
   * sleep. Not the outer sh (the adapter before it execs): that one still
   * carries the lease markers and is the carriers scan's.
   */
  isOurs(argv) {
    return (
      argv !== null && ((argv.length === 6 && argv[3] === this.tag) || (argv.length === 2 && argv[1] === this.secs))
    );
  }

  /** An escapee started by no controller (--inject-faults): the run must report it. */
  plant() {
    const c = spawn(
      "/usr/bin/env",
      ["-i", "/usr/bin/setsid", "/bin/sh", "-c", 'trap "" TERM; exec sleep "$2"', this.tag, "-", this.secs],
      { stdio: "ignore" },
    );
    c.on("error", () => {});
    c.unref();
    return c.pid;
  }

  /** The escapee of session sid, once it has written its pid and while it is that process: {pid, startTime} or null. */
  noted(sid) {
    let pid;
    try {
      pid = Number(readFileSync(this.pidfile(sid), "utf8").trim());
    } catch {
      return null;
    }
    const st = pid > 1 ? stat(pid) : null;
    if (!st || st.state === "Z" || !this.isOurs(cmdline(pid))) return null;
    return { pid, startTime: st.startTime };
  }

  /** pid -> session id, from the pid files every escapee wrote. */
  owners() {
    const out = new Map();
    let names = [];
    try {
      names = readdirSync(this.pidDir).filter((n) => n.endsWith(".escapee"));
    } catch {
      return out;
    }
    for (const n of names) {
      try {
        out.set(Number(readFileSync(join(this.pidDir, n), "utf8").trim()), n.slice(0, -".escapee".length));
      } catch {
        /* gone */
      }
    }
    return out;
  }

  /** Every live escapee of this run: {pid, ppid, pgid, sid, state, startTime, argv, session}. */
  live() {
    const owners = this.owners();
    const out = [];
    for (const pid of pids()) {
      if (pid === process.pid) continue;
      const argv = cmdline(pid);
      if (!this.isOurs(argv)) continue;
      const st = stat(pid);
      if (st === null || st.state === "Z" || st.state === "X") continue;
      out.push({ ...st, argv, session: owners.get(pid) ?? null });
    }
    return out;
  }

  /**
   * SIGKILL every live escapee of this run, synchronously (a signal handler
   * runs it), until none has been seen for 300 ms: an adapter being spawned
   * when the scan starts can still launch one. Returns how many were sent.
   */
  killAll() {
    const pause = new Int32Array(new SharedArrayBuffer(4));
    let killed = 0;
    let cleanSince = Date.now();
    const deadline = Date.now() + 3000;
    while (Date.now() < deadline) {
      const found = this.live();
      for (const p of found) if (killSame(p.pid, p.startTime)) killed++;
      if (found.length) cleanSince = Date.now();
      else if (Date.now() - cleanSince >= 300) break;
      Atomics.wait(pause, 0, 0, 50);
    }
    return killed;
  }
}
