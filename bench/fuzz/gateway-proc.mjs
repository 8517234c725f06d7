// The runner's handle on one gateway process (gateway.mjs): it starts it (as
// root, or as uid 65534 through setpriv), routes each sequence's events to
// it, and judges the gateway from outside: its resident set (VmRSS and the
// kernel's high-water mark VmHWM, reset at the baseline), its stderr (bytes,
// raw escape codes, forged lines) and its survival. A breach is an
// incident naming the sequences running at the time; an RSS breach kills
// the gateway at once (the host is shared).
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import { cgroupOf } from "./oracle.mjs";
import { stat } from "../soak/proc.mjs";

const MIB = 1024 * 1024;
export const RSS_GROWTH_LIMIT = 256 * MIB;
const READY_MS = 120_000;

function statusKb(pid, key) {
  try {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export class GatewayProc {
  /** opts: { name, profile: "root"|"nobody", sentinel: bool, dir, dist, innocent, secret, env, onIncident(inc), onSpawn(pid) } */
  constructor(opts) {
    Object.assign(this, opts);
    this.handlers = new Map();
    this.inflight = new Set();
    this.stderr = { bytes: 0, windowBytes: 0, tail: "", carry: "" };
    this.dead = false;
    this.tainted = null;
  }

  start() {
    const script = join(dirname(fileURLToPath(import.meta.url)), "gateway.mjs");
    const args = [
      "--max-old-space-size=2048",
      script,
      ...["--dist", this.dist, "--dir", this.dir, "--name", this.name, "--innocent", this.innocent],
      ...(this.sentinel ? ["--sentinel", "1"] : []),
    ];
    const nobody = this.profile === "nobody";
    const [cmd, argv] = nobody
      ? ["setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, ...args]]
      : [process.execPath, args];
    this.child = spawn(cmd, argv, {
      cwd: this.dir,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...this.env, FUZZ_SECRET: this.secret },
    });
    // a gateway holds the secret from its first instruction, before it is ready: an agent's read may find it then
    if (this.child.pid !== undefined) this.onSpawn?.(this.child.pid);
    this.child.stdin.on("error", () => undefined);
    this.child.stderr.on("data", (b) => this.onStderr(b));
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    void this.exited.then((how) => this.onExit(how));
    createInterface({ input: this.child.stdout }).on("line", (l) => this.onLine(l));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway ${this.name} not ready in ${READY_MS} ms`)), READY_MS);
      this.readyCb = (ev) => {
        clearTimeout(timer);
        this.pid = ev.pid;
        this.startTime = stat(ev.pid)?.startTime;
        this.cgroup = cgroupOf(ev.pid);
        this.sentinelInfo = ev.sentinel;
        this.startSampler();
        resolve(ev);
      };
      void this.exited.then((how) => {
        clearTimeout(timer);
        reject(new Error(`gateway ${this.name} exited before ready (${JSON.stringify(how)}): ${this.stderr.tail}`));
      });
    });
  }

  startSampler() {
    try {
      writeFileSync(`/proc/${this.pid}/clear_refs`, "5");
    } catch {
      // an old kernel: the samples alone
    }
    this.baseline = statusKb(this.pid, "VmRSS") ?? 0;
    this.peak = this.baseline;
    this.sampler = setInterval(() => {
      const v = Math.max(statusKb(this.pid, "VmRSS") ?? 0, statusKb(this.pid, "VmHWM") ?? 0);
      if (v > this.peak) this.peak = v;
      if (v - this.baseline > RSS_GROWTH_LIMIT && !this.dead) {
        this.incident(
          "rss",
          `RSS grew ${Math.round((v - this.baseline) / MIB)} MB (limit 256 MB, baseline ${Math.round(this.baseline / MIB)} MB)`,
        );
        this.kill();
      }
    }, 100);
    this.sampler.unref();
  }

  incident(inv, detail, active = [...this.inflight]) {
    this.tainted ??= inv;
    this.onIncident({ inv, detail, active, gateway: this.name });
  }

  onStderr(b) {
    const s = this.stderr;
    s.bytes += b.length;
    s.windowBytes += b.length;
    const text = s.carry + b.toString("latin1");
    if (text.includes("\u001b")) this.incidentOnce("stderr-escape", "a raw ESC byte reached the gateway's stderr");
    if (/(^|\n)FUZZ-FORGED-/.test(text))
      this.incidentOnce(
        "stderr-forged-line",
        "a line an agent wrote reached the gateway's stderr as a log line of its own",
      );
    s.carry = text.slice(-64);
    s.tail = (s.tail + text).slice(-4096);
  }

  incidentOnce(inv, detail) {
    this.seen ??= new Set();
    const key = `${inv}:${[...this.inflight].sort().join(",")}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.incident(inv, detail);
  }

  onLine(line) {
    let ev;
    try {
      ev = JSON.parse(line);
    } catch {
      return;
    }
    if (ev.ev === "ready") return this.readyCb?.(ev);
    if (ev.ev === "block")
      return this.incident("loop-block", `event loop blocked ${ev.wallMs} ms (${ev.cpuMs} ms CPU)`, ev.active);
    if (ev.ev === "fatal")
      return this.incident("gateway-crash", `${ev.kind}: ${ev.error.split("\n").slice(0, 3).join(" | ")}`, ev.active);
    if (ev.id !== undefined) this.handlers.get(ev.id)?.(ev);
  }

  onExit(how) {
    clearInterval(this.sampler);
    const expected = this.dead || this.stopping;
    this.dead = true;
    if (!expected)
      this.incident("gateway-died", `exited ${JSON.stringify(how)}; stderr tail: ${this.stderr.tail.slice(-600)}`);
    for (const h of this.handlers.values()) h({ ev: "gateway-exit", how });
  }

  send(cmd) {
    if (!this.dead) this.child.stdin.write(`${JSON.stringify(cmd)}\n`);
  }

  /** Routes `id`'s events to `handler` while it runs. */
  attach(id, handler) {
    this.inflight.add(id);
    this.handlers.set(id, handler);
  }

  detach(id) {
    this.inflight.delete(id);
    this.handlers.delete(id);
  }

  /** stderr bytes since the last call (the runner's budget window) */
  takeStderrWindow() {
    const b = this.stderr.windowBytes;
    this.stderr.windowBytes = 0;
    return b;
  }

  kill() {
    this.dead = true;
    try {
      this.child.kill("SIGKILL");
    } catch {
      // gone
    }
  }

  async stop() {
    if (this.dead) return;
    this.stopping = true;
    this.send({ op: "exit" });
    this.child.stdin.end();
    const t = setTimeout(() => this.kill(), 15_000);
    await this.exited;
    clearTimeout(t);
  }
}
