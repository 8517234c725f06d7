// The fuzzer's runner: gateway processes (one long-lived per profile, several
// sequences at once in each; a fresh one for a sequence that kills its
// gateway, and after any failure), the sentinels, and the per-sequence and
// per-gateway judgement. A gateway-level breach (its RSS, its event loop, its
// death, its stderr, a sentinel harmed) names every sequence running at the
// time: triage.mjs runs those again alone to find whose it is.
import { holdBoundary } from "./boundary.mjs";
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { GatewayProc } from "./gateway-proc.mjs";
import { ownedDir, probeHost, uidOf } from "./host.mjs";
import { cgroupOf, leaseFiles } from "./oracle.mjs";
import { isSolo } from "./plan.mjs";
import { Execution } from "./seq-exec.mjs";
import { harm, restoreCgroup, startUnrelated, watch } from "./sentinels.mjs";
import { cleanupSequence } from "./cleanup.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, "..", "..");
const MIB = 1024 * 1024;

export class Runner {
  /** o: { seed, concurrency, keep, log(line), nsdelegate?: "remount" | "as-is" (default) } */
  constructor(o) {
    Object.assign(this, o);
    this.incidents = [];
    this.gateways = new Set();
    this.gatewayPids = new Set();
    this.pools = new Map();
    /** per profile, the gateway runAlone reuses while its sequences pass */
    this.alone = new Map();
    this.recent = new Set();
    this.live = new Set();
    this.n = 0;
  }

  /** A harmed unrelated sentinel is replaced, so the next harm is seen as new. */
  async respawnUnrelated() {
    this.unrelatedHarmed = false;
    try {
      process.kill(this.unrelated.child.pid, "SIGKILL");
    } catch {
      // already dead
    }
    this.unrelated = await startUnrelated(join(ROOT, "test", "fixtures", "soak", "hold.mjs"), this.host.runDir);
    this.env.unrelatedPid = this.unrelated.child.pid;
  }

  async setup() {
    const distUrl = pathToFileURL(join(ROOT, "dist", "index.js")).href;
    this.host = probeHost({ seed: this.seed, distUrl });
    // only the fuzz command remounts (nsdelegate: "remount"); a runner inside the suite must not race other files
    this.boundary = holdBoundary(this.host.mount, { off: this.nsdelegate !== "remount" });
    this.host.boundary = this.boundary;
    this.dist = distUrl;
    this.secret = `fz-secret-${randomBytes(12).toString("hex")}`;
    const u = await startUnrelated(join(ROOT, "test", "fixtures", "soak", "hold.mjs"), this.host.runDir);
    this.unrelated = u;
    this.env = {
      runDir: this.host.runDir,
      node: process.execPath,
      agent: join(HERE, "agent.mjs"),
      innocent: join(HERE, "innocent-agent.mjs"),
      mount: this.host.mount,
      secret: this.secret,
      python: this.host.python,
      pythonNobody: this.host.pythonNobody,
      unrelatedPid: u.child.pid,
      foreign: () => this.foreign(),
      beforeCleanup: (gw) => this.judgeGateway(gw),
      gatewayPids: this.gatewayPids,
      keep: this.keep,
      boundaryHeld: this.boundary.held,
    };
    return this.host;
  }

  /** every watched process that is no sequence's: the unrelated sentinel, the live gateways and their innocent sessions */
  foreign() {
    const out = [this.unrelated.w];
    for (const gw of this.gateways) if (!gw.dead && !gw.stopping) out.push(...(gw.watches ?? []));
    return out;
  }

  onIncident(inc) {
    this.incidents.push({ ...inc, at: Date.now() });
  }

  /** A started gateway; one that fails to start is tried once more (a loaded host), then the run stops (exit 2). */
  async newGateway(profile, sentinel) {
    try {
      return await this.startGateway(profile, sentinel);
    } catch (e) {
      this.log(`fuzz: a gateway did not start, trying once more: ${String(e?.message ?? e).slice(0, 300)}`);
      return this.startGateway(profile, sentinel);
    }
  }

  async startGateway(profile, sentinel) {
    if (this.stopped) throw new Error("the run was interrupted");
    const name = `g${++this.n}-${profile}`;
    const uid = uidOf(profile);
    const gw = new GatewayProc({
      name,
      profile,
      sentinel,
      dir: ownedDir(join(this.host.runDir, `gw-${name}`), uid),
      dist: this.dist,
      innocent: this.env.innocent,
      secret: this.secret,
      env: { PROCLEASE_INSTANCE_INDEX: join(ownedDir(join(this.host.runDir, `index-${uid}`), uid), "index") },
      onIncident: (inc) => this.onIncident(inc),
      onSpawn: (pid) => this.gatewayPids.add(pid),
    });
    this.gateways.add(gw);
    try {
      await gw.start();
    } catch (e) {
      gw.kill();
      await this.retire(gw);
      throw e;
    }
    this.gatewayPids.add(gw.pid);
    const own = gw.cgroup === "/" ? "" : gw.cgroup;
    gw.watches = [watch(`gateway ${name}`, gw.pid, null, `${own}/proclease/_gateway`)];
    gw.windowIds = new Set();
    if (gw.sentinelInfo) {
      const info = JSON.parse(readFileSync(gw.sentinelInfo.info, "utf8"));
      gw.watches.push(
        watch(`${name}'s innocent session wrapper`, gw.sentinelInfo.wrapperPid),
        watch(`${name}'s innocent session agent`, info.pid, gw.sentinelInfo.log),
      );
    }
    return gw;
  }

  async retire(gw) {
    if (gw.dead) await gw.exited;
    else await gw.stop();
    const growth = (gw.peak ?? 0) - (gw.baseline ?? 0);
    if (growth > (this.peakGrowth?.bytes ?? -1)) this.peakGrowth = { bytes: growth, gateway: gw.name };
    this.gateways.delete(gw);
    for (const [k, p] of this.pools) if ((await p.catch(() => null)) === gw) this.pools.delete(k);
    await this.cleanupGateway(gw);
  }

  /** What a gateway's innocent session left when the gateway died instead of shutting it down. */
  async cleanupGateway(gw) {
    const s = gw.sentinelInfo;
    if (!s) return;
    let instance = null;
    try {
      instance = readFileSync(join(s.stateDir, "gateway-instance-id"), "utf8").trim();
    } catch {
      // never written
    }
    const cgroups = leaseFiles(s.stateDir)
      .leases.map((l) => l.cgroup)
      .filter(Boolean);
    if (instance && this.host.mount && gw.cgroup !== null)
      cgroups.push(join(this.host.mount, gw.cgroup, "proclease", instance));
    await cleanupSequence({
      who: {
        tags: [`sentinel-${gw.name}`],
        leaseIds: new Set([s.leaseId]),
        instanceId: instance,
        cgroupDirs: cgroups,
        exclude: new Map(),
      },
      foreign: [],
      mount: this.host.mount,
      cgroupDirs: cgroups,
    });
  }

  /**
   * The long-lived gateway of a profile. A tainted one (a failure, a breach)
   * takes no new sequence: a fresh one starts at once for the next, and the
   * tainted one is retired once its running sequences end.
   */
  async poolGateway(profile) {
    let gw = this.pools.has(profile) ? await this.pools.get(profile) : null;
    if (gw && (gw.dead || gw.tainted)) {
      this.pools.delete(profile);
      if (gw.inflight.size === 0) await this.retire(gw);
      gw = null;
    }
    if (!gw) {
      const p = this.newGateway(profile, true);
      this.pools.set(profile, p);
      gw = await p;
    }
    return gw;
  }

  /**
   * After a sequence, before its cleanup puts back what an agent moved: every
   * watched process (the unrelated sentinel, every gateway and its innocent
   * session, whichever gateway the sequence ran on) is judged, and harm is
   * laid on every sequence that ran anywhere since the last look; then the
   * stderr budget of the sequence's own gateway.
   */
  judgeGateway(gw) {
    const suspects = [...this.recent];
    const hurt = harm(this.unrelated.w);
    for (const h of hurt) this.onIncident({ inv: "foreign-harmed", detail: h, active: suspects, gateway: "-" });
    if (hurt.length) this.unrelatedHarmed = true;
    restoreCgroup(this.unrelated.w, this.host.mount);
    for (const g of this.gateways) {
      // a gateway being retired exits at our asking (an unasked exit is its own incident, gateway-died)
      if (g.dead || g.stopping || !g.watches) continue;
      for (const w of g.watches) for (const h of harm(w)) g.incident("foreign-harmed", h, suspects);
      for (const w of g.watches) restoreCgroup(w, this.host.mount);
      const s = g.sentinelInfo;
      const l = s && leaseFiles(s.stateDir).leases.find((x) => x.leaseId === s.leaseId);
      if (s && l?.state !== "open" && !g.sentinelLost) {
        g.sentinelLost = true;
        g.incident("foreign-harmed", `the innocent session's lease is ${l?.state ?? "missing"}`, suspects);
      }
    }
    this.recent = new Set([...this.gateways].flatMap((g) => [...g.inflight]));
    if (gw.dead) return;
    const bytes = gw.takeStderrWindow();
    const allowed = Math.max(1, gw.windowIds.size) * MIB;
    if (bytes > allowed)
      gw.incident("stderr-flood", `${bytes} bytes of stderr while ${gw.windowIds.size} sequence(s) ran`, [
        ...gw.windowIds,
      ]);
    gw.windowIds = new Set(gw.inflight);
  }

  /** Runs `seq` on `gw`; answers its result with the incidents of the gateway while it ran. */
  async execute(seq, gw, plant = []) {
    const ex = new Execution(this.env, gw, seq, plant);
    this.live.add(ex);
    this.recent.add(ex.id);
    gw.windowIds.add(ex.id);
    const from = this.incidents.length;
    let r;
    try {
      r = await ex.run();
    } catch (e) {
      // the fuzzer's own failure: reported with the sequence, never the end of the run
      r = { failures: [], crashed: false, gatewayGone: false, harness: String(e?.stack ?? e), ms: 0, steps: ex.steps };
      await cleanupSequence({
        who: ex.whoFor("all"),
        foreign: this.foreign(),
        mount: this.host.mount,
        cgroupDirs: ex.cgroupDirs(),
      }).catch(() => undefined);
    }
    this.live.delete(ex);
    if (this.unrelatedHarmed) await this.respawnUnrelated();
    if (r.failures.length || r.harness) gw.tainted ??= "a failure";
    const incidents = this.incidents.slice(from).filter((i) => i.active.includes(ex.id));
    return { seq, id: ex.id, gateway: gw.name, ...r, incidents };
  }

  /**
   * Sequences at `concurrency` at once, none started after `deadline`
   * (Date.now() ms); answers their results in order. `onResult` sees each as it ends.
   */
  async runMany(seqs, concurrency, deadline = Infinity, onResult = () => {}) {
    const queue = [...seqs];
    const results = [];
    const running = new Set();
    while (queue.length || running.size) {
      if (Date.now() >= deadline || this.stopped) queue.length = 0;
      while (queue.length && running.size < concurrency) {
        const seq = queue[0];
        const gw = isSolo(seq)
          ? await this.newGateway(seq.opts.profile, false)
          : await this.poolGateway(seq.opts.profile);
        queue.shift();
        // a sequence counts as running until its gateway is retired: the run never ends before that
        const p = this.execute(seq, gw)
          .then(async (r) => {
            results.push(r);
            onResult(r);
            if (isSolo(seq) || ((gw.tainted || gw.dead) && gw.inflight.size === 0)) await this.retire(gw);
          })
          .catch((e) => this.log(`fuzz: the runner failed after sequence #${seq.index}: ${e?.stack ?? e}`))
          .finally(() => running.delete(p));
        running.add(p);
      }
      if (running.size) await Promise.race(running);
    }
    for (const p of [...this.pools.values()]) {
      const gw = await p;
      if (gw.tainted || gw.dead) await this.retire(gw);
    }
    return results.sort((a, b) => a.seq.index - b.seq.index);
  }

  /**
   * One sequence alone, on a gateway of its own: every incident is its own.
   * `plant`: the check of the checks: faults planted at the sequence's end
   * that the invariants must name (plantFaults in seq-exec.mjs).
   */
  async runAlone(seq, plant = []) {
    const solo = isSolo(seq);
    const profile = seq.opts.profile;
    // a gateway that ran clean sequences alone takes the next one (shrinking runs many)
    let gw = solo ? null : this.alone.get(profile);
    if (gw && (gw.dead || gw.tainted)) gw = null;
    if (!gw) {
      if (this.alone.has(profile) && !solo) await this.retire(this.alone.get(profile));
      gw = await this.newGateway(profile, !solo);
      if (!solo) this.alone.set(profile, gw);
    }
    const r = await this.execute(seq, gw, plant);
    if (solo || gw.dead || gw.tainted || r.failures.length || r.incidents.length || plant.length) {
      if (this.alone.get(profile) === gw) this.alone.delete(profile);
      await this.retire(gw);
    }
    const failures = [...r.failures, ...r.incidents.map((i) => ({ inv: i.inv, detail: i.detail }))];
    return { ...r, failures };
  }

  /**
   * The last safety net: every state dir the run made (its sequences', its
   * gateways' innocent sessions') named cgroups by its leases and its
   * instance id; whatever of them is still there is killed and removed.
   */
  async sweepRunDir() {
    const stateDirs = [];
    const under = (d) => {
      try {
        return readdirSync(d);
      } catch {
        return [];
      }
    };
    for (const s of under(join(this.host.runDir, "seqs"))) stateDirs.push(join(this.host.runDir, "seqs", s, "state"));
    for (const g of under(this.host.runDir))
      if (g.startsWith("gw-")) stateDirs.push(join(this.host.runDir, g, "sentinel"));
    const own = cgroupOf(process.pid);
    const dirs = new Set();
    for (const sd of stateDirs) {
      for (const l of leaseFiles(sd).leases) if (l.cgroup) dirs.add(l.cgroup).add(dirname(l.cgroup));
      try {
        const id = readFileSync(join(sd, "gateway-instance-id"), "utf8").trim();
        if (this.host.mount && own !== null && id) dirs.add(join(this.host.mount, own, "proclease", id));
      } catch {
        // never written
      }
    }
    // a gateway killed while its controller probed containment leaves that probe (<root>/_probe-<its pid>-n)
    if (this.host.mount && own !== null) {
      const root = join(this.host.mount, own, "proclease");
      for (const n of under(root))
        if ([...this.gatewayPids].some((pid) => n.startsWith(`_probe-${pid}-`))) dirs.add(join(root, n));
    }
    const exclude = new Map(this.foreign().map((w) => [w.pid, w.startTime]));
    const who = { tags: [], leaseIds: new Set(), cgroupDirs: [...dirs], exclude };
    await cleanupSequence({ who, foreign: this.foreign(), mount: this.host.mount, cgroupDirs: [...dirs] });
  }

  async teardown() {
    for (const gw of [...this.gateways]) await this.retire(gw).catch(() => undefined);
    await this.sweepRunDir().catch((e) => this.log(`fuzz: the final sweep failed: ${e?.message ?? e}`));
    try {
      process.kill(this.unrelated.child.pid, "SIGKILL");
    } catch {
      // gone
    }
    try {
      this.boundary.restore();
    } catch (e) {
      this.log(`fuzz: the cgroup2 mount's options could not be put back: ${e.message}`);
    }
    try {
      if (!this.keep) rmSync(this.host.runDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    } catch (e) {
      this.log(`fuzz: the run folder ${this.host.runDir} could not be removed: ${e.message}`);
    }
  }

  /** Interrupted: every gateway SIGKILLed, then what each running sequence started, and the run folder. */
  async emergency() {
    this.stopped = true;
    for (const gw of this.gateways) gw.kill();
    for (const ex of this.live)
      await cleanupSequence({
        who: ex.whoFor("all"),
        foreign: [],
        mount: this.host.mount,
        cgroupDirs: ex.cgroupDirs(),
      });
    await this.teardown();
  }
}
