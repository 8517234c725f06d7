// One gateway incarnation as the soak sees it: a node process running
// test/fixtures/soak/gateway.mjs, commands in on stdin, events out on stdout,
// SIGKILLed at the points the plan draws.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { stat } from "./proc.mjs";

export class GatewayDied extends Error {
  name = "GatewayDied";
}
export class EventTimeout extends Error {
  name = "EventTimeout";
}

export class Incarnation {
  constructor({ index, script, args, stderrFd }) {
    this.index = index;
    this.events = [];
    this.waiters = new Set();
    this.dead = false;
    this.killedAt = null;
    this.exit = null;
    // detached: its own process group, as a gateway started by a service manager is
    this.child = spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", stderrFd], detached: true });
    this.pid = this.child.pid;
    this.startTime = stat(this.pid)?.startTime ?? null;
    this.child.stdin.on("error", () => {});
    this.exited = new Promise((resolve) => {
      this.child.on("exit", (code, signal) => {
        this.dead = true;
        this.exit = { code, signal };
        for (const w of this.waiters) w.onDeath();
        resolve(this.exit);
      });
    });
    createInterface({ input: this.child.stdout }).on("line", (line) => {
      let ev;
      try {
        ev = JSON.parse(line);
      } catch {
        ev = { ev: "garbage", line };
      }
      // the bystander the gateway put into its own group: its identity is read at once, while it surely runs
      if (ev.ev === "gateway" && ev.bystanderPid) ev.bystanderStartTime = stat(ev.bystanderPid)?.startTime ?? null;
      this.events.push(ev);
      for (const w of [...this.waiters]) w.check(ev);
    });
  }

  send(cmd) {
    if (this.dead) return false;
    try {
      this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The first event (already seen or future) matching pred. Rejects with
   * GatewayDied when the incarnation dies first, EventTimeout after ms.
   */
  waitEvent(pred, ms, what = "event", from = 0) {
    const seen = this.events.slice(from).find(pred);
    if (seen) return Promise.resolve(seen);
    if (this.dead) return Promise.reject(new GatewayDied(`gateway ${this.index} died before ${what}`));
    return new Promise((resolve, reject) => {
      const w = {
        check: (ev) => {
          if (!pred(ev)) return;
          done();
          resolve(ev);
        },
        onDeath: () => {
          done();
          reject(new GatewayDied(`gateway ${this.index} died before ${what}`));
        },
      };
      const timer = setTimeout(() => {
        done();
        reject(new EventTimeout(`gateway ${this.index}: no ${what} within ${ms} ms`));
      }, ms);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(w);
      };
      this.waiters.add(w);
    });
  }

  /** Index of the next event: pass it as `from` to wait only for what a command sent now causes. */
  mark() {
    return this.events.length;
  }

  /** An event for session sid whose ev is one of names, at index >= from. */
  waitSession(sid, names, ms, from) {
    return this.waitEvent(
      (e) => e.sid === sid && names.includes(e.ev),
      ms,
      `${names.join("|")} of session ${sid}`,
      from,
    );
  }

  /** SIGKILL (it is our own unreaped child: its pid cannot name anyone else yet). */
  async kill() {
    if (!this.dead) {
      this.killedAt ??= Date.now();
      this.child.kill("SIGKILL");
    }
    await this.exited;
  }

  /** Graceful end: dispose() and exit; SIGKILL if it does not go within ms. Returns true when it went by itself. */
  async stop(ms) {
    if (this.dead) return this.exit?.signal !== "SIGKILL";
    this.send({ op: "exit" });
    const t = setTimeout(() => this.child.kill("SIGKILL"), ms);
    const exit = await this.exited;
    clearTimeout(t);
    return exit.signal === null;
  }
}
