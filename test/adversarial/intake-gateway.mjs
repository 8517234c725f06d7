// A stand-in gateway for the intake tests, in a process of its own so that
// its heap, its event loop and its stderr are the gateway's alone: it
// creates a controller (logger: console, as a gateway might pass), ensures
// one session with the hostile agent, then measures while the agent floods:
// the event loop's worst block (a 10 ms timer's drift, see LoopWatch), the peak of
// heap + external memory and of RSS over the baseline. It waits for a
// condition on sessionStatus (or a deadline), closes the session (timed,
// with the loop's lateness during the close) and prints one JSON line.
//
//   node --expose-gc intake-gateway.mjs '<config JSON>'
// config: { dist, stateDir, command, options, hook: "none" | "never",
//           prompt?: string, until: { refusedAtLeast?, held?, terminalsAtLeast? },
//           deadlineMs, settleMs }
// stdout: {"type":"ready","leaseId"} then {"type":"result", ...}
import { readFileSync, writeFileSync } from "node:fs";

const cfg = JSON.parse(process.argv[2]);
const { createAcpxLifecycleController } = await import(cfg.dist);
const MB = 1024 * 1024;
const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

// A late tick is a loop block only as far as this process ran meanwhile:
// on a loaded machine a process waits for a core too, and that is not the
// gateway blocking its loop. So each tick's block is its lateness, capped
// by the CPU time the whole process used in that interval (every thread:
// an upper bound on the main thread's); the wall lateness is kept as well.
class LoopWatch {
  max = 0;
  wallMax = 0;
  last = performance.now();
  lastCpu = cpuMs();
  timer = setInterval(() => {
    const now = performance.now();
    const cpu = cpuMs();
    const late = now - this.last - 10;
    const block = Math.min(late, cpu - this.lastCpu);
    if (block > this.max) this.max = block;
    if (late > this.wallMax) this.wallMax = late;
    this.last = now;
    this.lastCpu = cpu;
    const mem = process.memoryUsage();
    if (mem.heapUsed + mem.external > peak.heap) peak.heap = mem.heapUsed + mem.external;
    if (mem.rss > peak.rss) peak.rss = mem.rss;
  }, 10);
  reset() {
    const m = { block: Math.round(this.max), wall: Math.round(this.wallMax) };
    this.max = 0;
    this.wallMax = 0;
    return m;
  }
}

function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function vmHwm() {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

const hook = cfg.hook === "never" ? { onPermissionRequest: () => new Promise(() => {}) } : {};
const ctl = await createAcpxLifecycleController({
  stateDir: cfg.stateDir,
  graceMs: 400,
  maintenanceIntervalMs: 0,
  keeper: "off",
  logger: console,
  ...hook,
  ...cfg.options,
});
const h = await ctl.ensureSession({ sessionKey: "k-intake", agentId: "main", command: cfg.command });
emit({ type: "ready", leaseId: h.leaseId });

globalThis.gc?.();
const base = process.memoryUsage();
const peak = { heap: base.heapUsed + base.external, rss: base.rss };
try {
  writeFileSync("/proc/self/clear_refs", "5");
} catch {
  // the samples alone
}
const loop = new LoopWatch();
const t0 = performance.now();
let promptOutcome = "pending";
if (cfg.prompt !== undefined) {
  ctl.prompt(h, cfg.prompt).then(
    (r) => (promptOutcome = `resolved ${r.stopReason}`),
    (e) => (promptOutcome = `rejected ${e.name}`),
  );
}

const refusedOf = (st) => Object.values(st.intake?.refused ?? {}).reduce((a, b) => a + b, 0);
let status = await ctl.sessionStatus(h);
const met = (st) =>
  (cfg.until.refusedAtLeast !== undefined && refusedOf(st) >= cfg.until.refusedAtLeast) ||
  (cfg.until.held === true && st.stdoutHeld) ||
  (cfg.until.terminalsAtLeast !== undefined && st.terminals.length >= cfg.until.terminalsAtLeast);
while (!met(status) && performance.now() - t0 < cfg.deadlineMs) {
  await new Promise((r) => setTimeout(r, 50));
  status = await ctl.sessionStatus(h);
}
const conditionMet = met(status);
const untilMs = Math.round(performance.now() - t0);
await new Promise((r) => setTimeout(r, cfg.settleMs ?? 500));
status = await ctl.sessionStatus(h);
const floodLoopMs = loop.reset();

const c0 = performance.now();
const report = await ctl.closeSession({ handle: h });
const closeMs = Math.round(performance.now() - c0);
const closeLoopMs = loop.reset();
clearInterval(loop.timer);
const hwm = vmHwm();
emit({
  type: "result",
  conditionMet,
  untilMs,
  floodLoopMs: floodLoopMs.block,
  floodWallLateMs: floodLoopMs.wall,
  closeLoopMs: closeLoopMs.block,
  closeWallLateMs: closeLoopMs.wall,
  closeMs,
  closeOutcome: report.outcome,
  leaseState: report.leaseState,
  heapGrowthMb: Math.round((peak.heap - base.heapUsed - base.external) / MB),
  rssGrowthMb: Math.round((Math.max(peak.rss, hwm) - base.rss) / MB),
  promptOutcome,
  intake: status.intake ?? null,
  stdoutHeld: status.stdoutHeld,
  terminals: status.terminals.length,
  leases: (await ctl.listLeases()).map((l) => ({ sessionKey: l.sessionKey, state: l.state })),
});
await ctl.dispose();
process.exit(0);
