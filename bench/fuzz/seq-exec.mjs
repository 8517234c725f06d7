// One execution of a sequence on a gateway process: its folders and plan
// file, the gateway's run, the runner's checks after each close and at the
// end (judge.mjs), a crash when the sequence says so, and the cleanup. The
// result: { failures, limits, crashed, gatewayGone, harness, ms, dir, steps }.
import { spawn } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanupSequence } from "./cleanup.mjs";
import { CLOSE_BOUND_MS, closeFailures, finalFailures, reportFailures, stepFailures } from "./judge.mjs";
import { leaseFiles } from "./oracle.mjs";

const SEQUENCE_WATCHDOG_MS = 180_000;
const NOBODY = 65534;

export class Execution {
  /**
   * env: { runDir, node, agent, innocent, mount, secret, python, pythonNobody,
   * unrelatedPid, foreign(), beforeCleanup(gw), gatewayPids, keep }; plant: []
   * or faults to plant ("leftover", "signal", "block", "rss": the check of the checks)
   */
  constructor(env, gw, seq, plant = []) {
    Object.assign(this, { env, gw, seq, plant, failures: [], limits: [], steps: [], checks: Promise.resolve() });
    this.tag = String(randomInt(100_000_000, 1_000_000_000));
    this.innTag = `inn${randomInt(100_000_000, 1_000_000_000)}`;
    this.id = `${seq.index}.${this.tag}`;
    // named without the tag: the tag must be in the argv of the hostile session's processes only
    this.dir = join(env.runDir, "seqs", `s${seq.index}-${randomBytes(4).toString("hex")}`);
    this.stateDir = join(this.dir, "state");
    this.workDir = join(this.dir, "work");
    this.pidsFile = join(this.dir, "pids");
    this.gatewayPids = env.gatewayPids;
  }

  prepare() {
    const uid = this.gw.profile === "nobody" ? NOBODY : 0;
    for (const [d, mode] of [
      [this.dir, 0o755],
      [this.workDir, 0o755],
      [this.stateDir, 0o700],
    ]) {
      mkdirSync(d, { recursive: true, mode });
      chownSync(d, uid, uid);
    }
    const s = this.gw.sentinelInfo;
    let sentinelAgent = null;
    try {
      sentinelAgent = s ? JSON.parse(readFileSync(s.info, "utf8")).pid : null;
    } catch {
      // not written: the session target is its wrapper alone
    }
    const plan = {
      seq: this.seq,
      tag: this.tag,
      dir: this.dir,
      stateDir: this.stateDir,
      pidsFile: this.pidsFile,
      cgroupMount: this.env.mount,
      python: this.gw.profile === "nobody" ? this.env.pythonNobody : this.env.python,
      secret: this.env.secret,
      targets: {
        sentinel: [this.env.unrelatedPid],
        session: s ? [s.wrapperPid, sentinelAgent].filter(Boolean) : [],
        gateway: [this.gw.pid],
        sentinelLease: s?.leaseId ?? null,
      },
    };
    this.planFile = join(this.dir, `plan-${this.tag}.json`);
    writeFileSync(this.planFile, JSON.stringify(plan), { mode: 0o644 });
  }

  leases() {
    return leaseFiles(this.stateDir).leases;
  }

  cgroupDirs() {
    const dirs = new Set(
      this.leases()
        .map((l) => l.cgroup)
        .filter(Boolean),
    );
    if (this.instanceId && this.root) dirs.add(join(this.root, this.instanceId));
    if (this.instanceId && this.env.mount && this.gw.cgroup !== null)
      dirs.add(join(this.env.mount, this.gw.cgroup, "proclease", this.instanceId));
    return [...dirs];
  }

  exclude() {
    const m = new Map();
    for (const w of this.env.foreign()) if (w.startTime) m.set(w.pid, w.startTime);
    return m;
  }

  /** What counts as the processes of `what`: "hostile", "innocent" or "all" (oracle.mjs leftovers) */
  whoFor(what) {
    const leases = this.leases();
    const mine =
      what === "innocent"
        ? leases.filter((l) => l.leaseId === this.innocentLease)
        : what === "hostile"
          ? leases.filter((l) => l.leaseId !== this.innocentLease)
          : leases;
    return {
      tags:
        what === "innocent" ? [this.innTag] : what === "hostile" ? [this.tag] : [this.tag, this.innTag, this.stateDir],
      leaseIds: new Set(mine.map((l) => l.leaseId)),
      instanceId: what === "all" ? this.instanceId : null,
      pidFiles: what === "innocent" ? [] : [this.pidsFile],
      cgroupDirs: what === "all" ? this.cgroupDirs() : mine.map((l) => l.cgroup).filter(Boolean),
      exclude: this.exclude(),
    };
  }

  onEvent(ev, settle) {
    switch (ev.ev) {
      case "controller":
        this.instanceId = ev.instanceId;
        this.root = ev.root;
        this.containment = ev.containment;
        return;
      case "step":
        this.steps.push(ev);
        if (ev.step === "innocent-ensure" && ev.ok) this.innocentLease = ev.leaseId;
        if (ev.step === "innocent-close") this.innocentCloseAt = ev.at - ev.ms;
        this.failures.push(...stepFailures(ev, this.seq));
        return;
      case "close-rejected":
        return this.failures.push({ inv: "close-rejected", detail: `${ev.what} rejected` });
      case "ensure-after-abort":
        return this.failures.push({
          inv: "ensure-after-dispose",
          detail: `the ensure succeeded after ${ev.how}() began`,
        });
      case "check":
        this.checks = this.checks.then(async () => {
          this.failures.push(...(await closeFailures(this, ev)));
          this.gw.send({ op: "checked", id: this.id, what: ev.what });
        });
        return;
      case "turn-started":
        return this.maybeCrash();
      case "harness-error":
        this.harness = ev.error;
        return settle(null);
      case "done":
        return void this.checks.then(() => settle(ev));
      case "gateway-exit":
        return settle(null);
    }
  }

  /**
   * The check of the checks: "leftover" leaves a process of the sequence
   * running (its tag in argv), "signal" signals the unrelated sentinel; the
   * gateway plants "block" and "rss" itself (gateway-seq.mjs). Each must be named.
   */
  plantFaults() {
    if (this.plant.includes("leftover"))
      spawn("sleep", [`3000.${this.tag}`], { detached: true, stdio: "ignore" }).unref();
    try {
      if (this.plant.includes("signal")) process.kill(this.env.unrelatedPid, "SIGUSR1");
    } catch {
      // the sentinel is gone: that is named too
    }
  }

  maybeCrash() {
    const crash = this.seq.actions.find((x) => x.a === "gw-crash");
    if (!crash) return;
    setTimeout(() => {
      this.crashAt = Date.now();
      this.gw.kill();
    }, crash.p.afterMs);
  }

  innocentSignals() {
    try {
      const before = this.innocentCloseAt ?? Infinity;
      return readFileSync(join(this.dir, "innocent-signals.log"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l))
        .filter((e) => e.at < before);
    } catch {
      return [];
    }
  }

  async run() {
    const t0 = Date.now();
    this.prepare();
    const done = await new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.failures.push({
          inv: "call-unbounded",
          detail: `the sequence did not finish in ${SEQUENCE_WATCHDOG_MS} ms`,
        });
        this.gw.kill();
        resolve(null);
      }, SEQUENCE_WATCHDOG_MS);
      const settle = (v) => {
        clearTimeout(timer);
        resolve(v);
      };
      this.gw.attach(this.id, (ev) => this.onEvent(ev, settle));
      this.gw.send({
        op: "run",
        id: this.id,
        seq: this.seq,
        stateDir: this.stateDir,
        planFile: this.planFile,
        workDir: this.workDir,
        node: this.env.node,
        agent: this.env.agent,
        innocentAgent: this.env.innocent,
        innocentInfo: join(this.dir, "innocent.json"),
        innocentLog: join(this.dir, "innocent-signals.log"),
        innocentTag: this.innTag,
        plant: this.plant.filter((p) => p === "block" || p === "rss"),
      });
    });
    this.gw.detach(this.id);
    if (this.plant.length) this.plantFaults();
    await this.judgeEnd(done);
    // the sentinels are judged before the cleanup puts back what an agent moved
    this.env.beforeCleanup(this.gw);
    await cleanupSequence({
      who: this.whoFor("all"),
      foreign: this.env.foreign(),
      mount: this.env.mount,
      cgroupDirs: this.cgroupDirs(),
    });
    // a controller of a hung call may still write its state dir: the run folder goes at teardown then
    try {
      if (!this.env.keep) rmSync(this.dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    } catch {
      // still written to: it goes with the run folder
    }
    return {
      failures: this.failures,
      limits: this.limits,
      crashed: this.crashAt !== undefined,
      gatewayGone: done === null && this.crashAt === undefined,
      harness: this.harness ?? null,
      ms: Date.now() - t0,
      dir: this.dir,
      steps: this.steps,
    };
  }

  async judgeEnd(done) {
    if (this.crashAt !== undefined) {
      const deadline = this.crashAt + this.seq.opts.graceMs + CLOSE_BOUND_MS;
      this.failures.push(...(await finalFailures(this, null, deadline, "crash")));
    } else if (done) {
      this.failures.push(...(await finalFailures(this, done, (done.shutdownAt ?? Date.now()) + CLOSE_BOUND_MS)));
    }
    this.failures.push(...reportFailures(this));
    for (const s of this.innocentSignals())
      this.failures.push({ inv: "foreign-harmed", detail: `the innocent session caught ${s.what} before its close` });
  }
}
