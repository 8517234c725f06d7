// Foreign processes that live through the soak and must never be signalled,
// plus the busy-host churn. Each bystander is test/fixtures/soak/hold.mjs,
// which logs every signal it catches; SIGKILL/SIGSTOP (uncatchable) show up as
// a bystander that is no longer the same live process, or stopped, at the end.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { INSTANCE_KEY, LEASE_KEY, killSame, sameAlive, stat } from "./proc.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The environment every process the soak starts gets: never our markers by accident. */
export function cleanEnv(extra = {}) {
  const env = { ...process.env, ...extra };
  if (!(LEASE_KEY in extra)) delete env[LEASE_KEY];
  if (!(INSTANCE_KEY in extra)) delete env[INSTANCE_KEY];
  return env;
}

export class Bystanders {
  constructor({ holdPath, logDir }) {
    this.holdUrl = pathToFileURL(holdPath).href;
    this.holdPath = holdPath;
    this.logDir = logDir;
    /** every bystander ever started: {name, pid, startTime, log, stop, kind: "static"|"twin"|"group", retired} */
    this.all = [];
    this.twins = [];
    this.seq = 0;
  }

  /** pid -> start time of every bystander: excluded from the orphan scan (they carry lease ids on purpose). */
  excludeMap() {
    return new Map(this.all.filter((b) => b.startTime).map((b) => [b.pid, b.startTime]));
  }

  /**
   * A bystander: argv is exactly `argv` (a look-alike, through the --import
   * preload) or plain `node hold.mjs`; env extra adds markers.
   */
  start(name, { argv = null, env = {}, detached = true, kind = "static" } = {}) {
    const n = ++this.seq;
    const log = join(this.logDir, `${n}-${name}.log`);
    const stop = join(this.logDir, `${n}-${name}.stop`);
    const base = { SOAK_HOLD_LOG: log, SOAK_HOLD_STOP: stop, ...env };
    const [cmd, ...rest] = argv ?? [process.execPath, this.holdPath];
    const child = spawn(cmd, rest, {
      stdio: "ignore",
      detached,
      env: cleanEnv(argv ? { ...base, NODE_OPTIONS: `--import=${this.holdUrl}` } : base),
    });
    child.on("error", () => {});
    child.unref();
    // our own unreaped child: its start time is read before its pid can be reused
    const b = { name, pid: child.pid, startTime: stat(child.pid)?.startTime ?? null, log, stop, kind, retired: false };
    this.all.push(b);
    return b;
  }

  startStatic({ agentPath }) {
    this.start("adapter-lookalike-detached", {
      argv: [process.execPath, agentPath, "--ignore-sigterm", "--grandchild=setsid"],
    });
    // in the soak's own process group (not detached)
    this.start("adapter-lookalike-soak-group", {
      argv: [process.execPath, agentPath, "--turn=until-cancel"],
      detached: false,
    });
    this.start("foreign-instance", { env: { [LEASE_KEY]: randomUUID(), [INSTANCE_KEY]: randomUUID() } });
    this.start("lease-id-only", { env: { [LEASE_KEY]: randomUUID() } });
  }

  /** Same argv as our wrapper roots (known once the first lease names the installed wrapper). */
  startWrapperLookalike({ wrapperPath, graceMs, agentPath }) {
    if (this.wrapperLookalike) return;
    this.wrapperLookalike = this.start("wrapper-lookalike", {
      // the Node wrapper (a .cjs shim) runs under node; the native one is its own executable
      argv: [
        ...(wrapperPath.endsWith(".cjs") ? [process.execPath] : []),
        wrapperPath,
        "--grace-ms",
        String(graceMs),
        "--",
        process.execPath,
        agentPath,
      ],
    });
  }

  /**
   * A twin of a live session: carries its REAL lease id, with another
   * instance id or none. It starts after the lease, so it is exactly what a
   * remnant search must look at and leave alone. At most `max` live at once:
   * the oldest is retired through its stop file (never a signal).
   */
  twin(leaseId, kind, max = 6) {
    const env =
      kind === "foreign-instance" ? { [LEASE_KEY]: leaseId, [INSTANCE_KEY]: randomUUID() } : { [LEASE_KEY]: leaseId };
    this.twins.push(this.start(`twin-${kind}`, { env, kind: "twin" }));
    while (this.twins.filter((t) => !t.retired).length > max) {
      const old = this.twins.find((t) => !t.retired);
      old.retired = true;
      writeFileSync(old.stop, "");
    }
  }

  /** The bystander an incarnation put into its own process group (it exits once the gateway is gone). */
  addGroup(pid, startTime, log) {
    this.all.push({ name: "gateway-group", pid, startTime, log, stop: null, kind: "group", retired: true });
  }

  /**
   * The verdict on every bystander. Live ones must be the same live, running
   * process; retired ones (twins, group bystanders) must have logged their own
   * exit; none may have logged a signal.
   */
  async verdicts({ settleMs = 4000 } = {}) {
    const deadline = Date.now() + settleMs;
    const read = (b) =>
      existsSync(b.log)
        ? readFileSync(b.log, "utf8")
            .trim()
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l))
        : [];
    // retired ones exit within their 200 ms poll; give a loaded host time
    while (Date.now() < deadline) {
      const pending = this.all.filter(
        (b) =>
          b.retired && !read(b).some((e) => e.what.startsWith("exit")) && b.startTime && sameAlive(b.pid, b.startTime),
      );
      if (pending.length === 0) break;
      await sleep(100);
    }
    return this.all.map((b) => {
      const events = read(b);
      const signals = events.filter((e) => e.what.startsWith("signal"));
      const exited = events.find((e) => e.what.startsWith("exit"));
      const st = b.startTime ? stat(b.pid) : null;
      const same = st !== null && st.startTime === b.startTime && st.state !== "Z" && st.state !== "X";
      const problems = [];
      if (!b.startTime) problems.push("never seen alive (start time unreadable at spawn)");
      if (!events.some((e) => e.what === "started")) problems.push("never logged its start");
      for (const s of signals) problems.push(`received ${s.what.slice(7)} at ${new Date(s.at).toISOString()}`);
      if (b.retired) {
        if (!exited && !same) problems.push("gone without logging its own exit (SIGKILLed?)");
      } else {
        if (!same) problems.push(`no longer alive (pid ${b.pid}, start time ${b.startTime}): SIGKILLed?`);
        else if (st.state === "T" || st.state === "t") problems.push("stopped (SIGSTOP?)");
        if (exited) problems.push(`exited by itself (${exited.what}) before the end`);
      }
      return { ...b, signals: signals.length, problems };
    });
  }

  /** End of run: stop files first, then SIGKILL whatever is still the same process. */
  async stopAll() {
    for (const b of this.all) if (b.stop) writeFileSync(b.stop, "");
    const deadline = Date.now() + 2000;
    while (Date.now() < deadline && this.all.some((b) => b.startTime && sameAlive(b.pid, b.startTime))) await sleep(50);
    for (const b of this.all) if (b.startTime) killSame(b.pid, b.startTime);
  }
}

/**
 * N same-uid loops spawning /bin/true for the whole run: processes appearing
 * and exiting at every read. At nice 10: the loops take every idle cycle (the
 * spawn rate stays in the hundreds per second, printed at the end) without
 * starving the gateways they are meant to disturb, which would only make the
 * soak slower, not harder.
 */
export const CHURN_NICE = 10;
export class Churn {
  constructor(n) {
    this.loops = [];
    for (let i = 0; i < n; i++) {
      const c = spawn("nice", ["-n", String(CHURN_NICE), "sh", "-c", "while :; do /bin/true; done"], {
        stdio: "ignore",
        detached: true,
        env: cleanEnv(),
      });
      c.on("error", () => {});
      c.unref();
      this.loops.push({ pid: c.pid, startTime: stat(c.pid)?.startTime ?? null, child: c });
    }
  }

  stop() {
    for (const l of this.loops) {
      // the loop leads its own group (detached): the group signal takes the running /bin/true too
      if (l.startTime && sameAlive(l.pid, l.startTime)) {
        try {
          process.kill(-l.pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    }
    this.loops = [];
  }
}
