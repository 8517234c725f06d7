#!/usr/bin/env node
// The fuzzer's gateway: one node process that hosts the controllers under
// test, so the runner can judge its memory (RSS, from outside), its event
// loop (a drift monitor inside, below) and its survival. It lives across
// many sequences; each sequence gets a controller of its own (its own state
// dir, instance id and cgroup folder), several at once.
//
//   node gateway.mjs --dist <file URL of dist/index.js> --dir D --name N
//                    --innocent <path of innocent-agent.mjs> [--sentinel 1]
//
// With --sentinel 1 it first starts an innocent session (its own
// controller, state dir D/sentinel) that must stay open and unsignalled
// while hostile sequences run beside it. stdin: one JSON command per line;
// stdout: one JSON event per line (written synchronously):
//   {"op":"run", id, seq, …paths}   → step… check… done (gateway-seq.mjs)
//   {"op":"checked", id, what}      → the runner judged a close; the sequence goes on
//   {"op":"exit"}                   → the sentinel controller shut down, exit 0
// Events: ready {pid, sentinel}, block {wallMs, cpuMs, active}, fatal, and
// the sequences' own (gateway-seq.mjs).
import { readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { runSequence } from "./gateway-seq.mjs";

const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];

export const emit = (ev) => {
  try {
    writeSync(1, `${JSON.stringify({ at: Date.now(), ...ev })}\n`);
  } catch {
    process.exit(0);
  }
};
const errText = (e) => String(e?.stack ?? e).slice(0, 4000);
process.on("uncaughtException", (e) => {
  emit({ ev: "fatal", kind: "uncaughtException", error: errText(e), active: [...active] });
  process.exit(70);
});
process.on("unhandledRejection", (e) => {
  emit({ ev: "fatal", kind: "unhandledRejection", error: errText(e), active: [...active] });
  process.exit(70);
});

/** ids of the sequences running now: whom a block, a crash or a sentinel's harm may be due to */
const active = new Set();

// ---- the event-loop monitor. A tick late by more than 250 ms is a block only
// when this thread also spent more than 250 ms of CPU in between: on a host
// shared with other work a late tick alone may be the scheduler's doing, but
// CPU the thread burned between two ticks is the loop's own.
const TICK_MS = 20;
const BLOCK_MS = 250;
function threadCpuMs() {
  const f = readFileSync("/proc/thread-self/stat", "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}
let lastWall = performance.now();
let lastCpu = threadCpuMs();
let worst = { wallMs: 0, cpuMs: 0 };
setInterval(() => {
  const now = performance.now();
  const cpu = threadCpuMs();
  const wallMs = Math.round(now - lastWall - TICK_MS);
  const cpuMs = cpu - lastCpu;
  lastWall = now;
  lastCpu = cpu;
  if (cpuMs > worst.cpuMs) worst = { wallMs, cpuMs };
  if (wallMs > BLOCK_MS && cpuMs > BLOCK_MS) emit({ ev: "block", wallMs, cpuMs, active: [...active] });
}, TICK_MS);

const { createAcpxLifecycleController } = await import(args.dist);
const secret = process.env.FUZZ_SECRET;

let sentinel = null;
if (args.sentinel === "1") {
  const stateDir = join(args.dir, "sentinel");
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: 500, keeper: "off" });
  const info = join(args.dir, "sentinel-agent.json");
  const log = join(args.dir, "sentinel-signals.log");
  const handle = await ctl.ensureSession({
    sessionKey: "sentinel",
    agentId: "innocent",
    command: [process.execPath, args.innocent, info, log, `sentinel-${args.name}`],
    envRemove: ["FUZZ_SECRET"],
  });
  sentinel = { ctl, handle, info, log, stateDir };
}

const waiters = new Map();
/** resolves when the runner answers {"op":"checked", id, what} */
export const checked = (id, what) => new Promise((resolve) => waiters.set(`${id}\0${what}`, resolve));

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch {
    return;
  }
  if (cmd.op === "run") {
    active.add(cmd.id);
    runSequence(createAcpxLifecycleController, cmd, { emit, checked, secret })
      .catch((e) => emit({ ev: "harness-error", id: cmd.id, error: errText(e) }))
      .finally(() => active.delete(cmd.id));
  } else if (cmd.op === "checked") {
    const k = `${cmd.id}\0${cmd.what}`;
    waiters.get(k)?.();
    waiters.delete(k);
  } else if (cmd.op === "exit") void bye();
});
rl.on("close", () => void bye());

async function bye() {
  try {
    await sentinel?.ctl.shutdown();
  } finally {
    emit({ ev: "bye", worst });
    process.exit(0);
  }
}

emit({
  ev: "ready",
  pid: process.pid,
  uid: process.getuid(),
  sentinel: sentinel && {
    wrapperPid: sentinel.handle.rootPid,
    leaseId: sentinel.handle.leaseId,
    info: sentinel.info,
    log: sentinel.log,
    stateDir: sentinel.stateDir,
  },
});
