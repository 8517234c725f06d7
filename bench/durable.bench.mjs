// Durable sessions (docs/lifecycle-controller.md "Durable sessions"), through
// the controller with the fixture agent, no OpenClaw:
//
// 1. Re-adoption: ensureSession re-adopting a session an earlier controller
//    detached (verify, connect, auth, header, replay), up to the first delta
//    of a turn on it, against a turn's first delta on a session that never
//    left, interleaved round by round. Printed: the target (≤ 1.2×)
//    is a real gateway's, where a live turn also pays OpenClaw's routing
//    (178–218 ms at p50 there); here a live turn is the controller's alone.
// 2. A streamed turn of 5,000 chunks in durable mode (the wrapper relays and
//    scans every line) against the same turn without it, two controllers in
//    this process, interleaved rounds, each side's quietest. Target ≤ 1.05× (quick guard 2×).
// 3. The durable wrapper's private memory (smaps_rollup), idle and while a
//    detached turn fills its journal to the bound. Target ≤ 0.5 MB idle and
//    ≤ 0.5 MB + the bound held.
// 4. A storm (full: 32 sessions, quick: 8): a gateway in its own process
//    with every session open and a turn in flight on four, SIGKILLed; a new
//    controller at once: how many are re-adopted with the same adapter pid,
//    and the first delta after the restart (p50, p99) against a live
//    session's (printed, as in 1) and against the same storm without
//    durable (each session resumed in a new process). Targets: all
//    re-adopted; durable p50 ≤ 0.25× the resumed one (quick 0.5×).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { alive, check, fmtMs, median, now, printTable, quantile } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const AGENT = join(root, "fixtures", "acp-agent", "agent.mjs");
const DIST = pathToFileURL(join(root, "dist", "index.js")).href;

export function skipReason() {
  return process.platform === "linux" ? undefined : "Linux only (the native wrapper)";
}

const { createAcpxLifecycleController } = await import(DIST);
const opts = (stateDir, durable) => ({
  stateDir,
  maintenanceIntervalMs: 0,
  keeper: "off",
  graceMs: 500,
  ...(durable ? { durable: { reattachWithinMs: 60_000 } } : {}),
});
const command = (...k) => [process.execPath, AGENT, ...k];

async function firstDelta(ctl, h, prompt) {
  const t0 = now();
  const turn = ctl.startTurn(h, prompt);
  let first = NaN;
  for await (const u of turn.events)
    if (Number.isNaN(first) && u.sessionUpdate === "agent_message_chunk") first = now() - t0;
  await turn.result;
  return first;
}

function privateMb(pid) {
  const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(t)?.[1] ?? NaN);
  return (kb("Private_Clean") + kb("Private_Dirty")) / 1024;
}

/** 1. Re-adoption up to the first delta vs a live turn's first delta, rounds interleaved. */
async function readoption(rounds) {
  const dir = mkdtempSync(join(tmpdir(), "pl-bench-durable-"));
  const input = { sessionKey: "b", agentId: "main", command: command() };
  let ctl = await createAcpxLifecycleController(opts(dir, true));
  let h = await ctl.ensureSession(input);
  await firstDelta(ctl, h, "/count 1");
  const adopt = [];
  const live = [];
  try {
    for (let r = 0; r < rounds; r++) {
      live.push(await firstDelta(ctl, h, "/count 1"));
      await ctl.detach();
      ctl = await createAcpxLifecycleController(opts(dir, true));
      const t0 = now();
      h = await ctl.ensureSession(input);
      if (h.adopted !== true) throw new Error("the session was not re-adopted");
      adopt.push(now() - t0 + (await firstDelta(ctl, h, "/count 1")));
    }
  } finally {
    await ctl.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
  return { adopt: median(adopt), live: median(live) };
}

/** 2. A burst turn, durable vs not, rounds interleaved; each side's quietest. */
async function streamed(rounds, chunks) {
  const sides = {};
  for (const durable of [false, true]) {
    const dir = mkdtempSync(join(tmpdir(), "pl-bench-durable-"));
    const ctl = await createAcpxLifecycleController(opts(dir, durable));
    const h = await ctl.ensureSession({ sessionKey: "s", agentId: "main", command: command() });
    sides[durable] = { dir, ctl, h, ms: [] };
  }
  try {
    for (let r = 0; r < rounds; r++)
      for (const durable of r % 2 ? [true, false] : [false, true]) {
        const s = sides[durable];
        const t0 = now();
        const turn = s.ctl.startTurn(s.h, `/chunks ${chunks}`);
        for await (const _ of turn.events);
        await turn.result;
        s.ms.push(now() - t0);
      }
  } finally {
    for (const s of Object.values(sides)) {
      await s.ctl.shutdown();
      rmSync(s.dir, { recursive: true, force: true });
    }
  }
  return { plain: Math.min(...sides[false].ms), durable: Math.min(...sides[true].ms) };
}

/** 3. The durable wrapper's private memory, idle and with a detached turn held at the journal's bound. */
async function memory(boundBytes) {
  const dir = mkdtempSync(join(tmpdir(), "pl-bench-durable-"));
  const o = { ...opts(dir, true), durable: { reattachWithinMs: 60_000, journalBytes: boundBytes } };
  let ctl = await createAcpxLifecycleController(o);
  try {
    const h = await ctl.ensureSession({ sessionKey: "m", agentId: "main", command: command() });
    await firstDelta(ctl, h, "/count 3");
    const idle = privateMb(h.rootPid);
    const turn = ctl.startTurn(h, "/chunks 200000");
    turn.result.catch(() => undefined);
    // the prompt is with the agent (its first chunk came) before the gateway goes
    for await (const _ of turn.events) break;
    await ctl.detach();
    // the agent streams into the journal until the bound holds its stdout
    await new Promise((r) => setTimeout(r, 1500));
    const held = privateMb(h.rootPid);
    ctl = await createAcpxLifecycleController(o);
    await ctl.ensureSession({ sessionKey: "m", agentId: "main", command: command() });
    return { idle, held };
  } finally {
    await ctl.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
}

const GATEWAY = `
  const cfg = JSON.parse(process.env.GW);
  const { createAcpxLifecycleController } = await import(cfg.dist);
  const ctl = await createAcpxLifecycleController(cfg.opts);
  const hs = [];
  for (let i = 0; i < cfg.n; i++) hs.push(await ctl.ensureSession({ sessionKey: "k" + i, agentId: "main", command: cfg.command }));
  for (let i = 0; i < 4 && i < cfg.n; i++) { const t = ctl.startTurn(hs[i], "/count 400"); t.result.catch(() => {}); (async () => { for await (const _ of t.events); })().catch(() => {}); }
  process.stdout.write(JSON.stringify(hs.map((h) => ({ key: h.sessionKey, rootPid: h.rootPid, pgid: h.processGroupId }))) + "\\n");
  setInterval(() => {}, 1 << 30);
`;

/** 4. One storm round: n sessions, a gateway SIGKILLed with four turns in flight, then a new controller at once. */
async function storm(n, durable) {
  const dir = mkdtempSync(join(tmpdir(), "pl-bench-storm-"));
  const cmd = command("--stream-batch", "4", "--stream-gap-ms", "20");
  const gw = spawn(process.execPath, ["--input-type=module", "-e", GATEWAY], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, GW: JSON.stringify({ dist: DIST, opts: opts(dir, durable), n, command: cmd }) },
  });
  const before = await new Promise((resolve, reject) => {
    let buf = "";
    gw.stdout.on("data", (d) => {
      buf += d;
      if (buf.includes("\n")) resolve(JSON.parse(buf.slice(0, buf.indexOf("\n"))));
    });
    gw.once("exit", () => reject(new Error("the storm's gateway exited early")));
  });
  gw.kill("SIGKILL");
  await new Promise((r) => gw.once("exit", r));
  const ctl = await createAcpxLifecycleController(opts(dir, durable));
  try {
    await ctl.reapStartupOrphans();
    const first = [];
    let same = 0;
    for (const b of before) {
      const t0 = now();
      const h = await ctl.ensureSession({ sessionKey: b.key, agentId: "main", command: cmd });
      if (h.adopted === true && h.rootPid === b.rootPid && h.processGroupId === b.pgid && alive(b.pgid)) same++;
      // a session whose turn was in flight: its first delta after the restart is the adopted turn's first
      // (the replay); the rest of that turn is read before the next (the agent takes one turn at a time)
      let d = NaN;
      if (h.turn) {
        for await (const u of h.turn.events)
          if (Number.isNaN(d) && u.sessionUpdate === "agent_message_chunk") d = now() - t0;
        await h.turn.result.catch(() => undefined);
      } else d = now() - t0 + (await firstDelta(ctl, h, "/count 1"));
      first.push(d);
    }
    const live = [];
    const h0 = await ctl.ensureSession({ sessionKey: before[0].key, agentId: "main", command: cmd });
    for (let i = 0; i < Math.max(10, n); i++) live.push(await firstDelta(ctl, h0, "/count 1"));
    return {
      same,
      n,
      p50: quantile(first, 0.5),
      p99: quantile(first, 0.99),
      live50: median(live),
      live99: quantile(live, 0.99),
    };
  } finally {
    await ctl.shutdown();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run({ quick }) {
  const checks = [];
  const r = await readoption(quick ? 5 : 15);
  const s = await streamed(quick ? 5 : 11, quick ? 2000 : 5000);
  const m = await memory(1 << 20);
  const n = quick ? 8 : 32;
  const sd = await storm(n, true);
  const sn = await storm(n, false);
  printTable("durable sessions", [
    {
      what: "re-adoption → first delta (median)",
      value: fmtMs(r.adopt),
      baseline: `live turn → first delta ${fmtMs(r.live)}`,
      ratio: `${(r.adopt / r.live).toFixed(2)}×`,
    },
    {
      what: `streamed turn, ${quick ? 2000 : 5000} chunks (quietest)`,
      value: `durable ${fmtMs(s.durable)}`,
      baseline: `without ${fmtMs(s.plain)}`,
      ratio: `${(s.durable / s.plain).toFixed(3)}×`,
    },
    {
      what: "durable wrapper private memory",
      value: `idle ${m.idle.toFixed(2)} MB, held ${m.held.toFixed(2)} MB`,
      baseline: "bound 1.00 MB",
      ratio: "",
    },
    { what: `storm of ${n}, durable: re-adopted, same adapter`, value: `${sd.same}/${sd.n}`, baseline: "", ratio: "" },
    {
      what: "storm, durable: first delta after restart",
      value: `p50 ${fmtMs(sd.p50)}, p99 ${fmtMs(sd.p99)}`,
      baseline: `live p50 ${fmtMs(sd.live50)}, p99 ${fmtMs(sd.live99)}`,
      ratio: `p99 ${(sd.p99 / sd.live99).toFixed(2)}×`,
    },
    {
      what: "storm, without durable: first delta after restart",
      value: `p50 ${fmtMs(sn.p50)}, p99 ${fmtMs(sn.p99)}`,
      baseline: `live p50 ${fmtMs(sn.live50)}, p99 ${fmtMs(sn.live99)}`,
      ratio: `p99 ${(sn.p99 / sn.live99).toFixed(2)}×`,
    },
  ]);
  // the targets against a live turn (≤ 1.2×, storm p99 ≤ 2×) are a real gateway's, where a turn pays
  // OpenClaw's routing too (openclaw-gateway.bench.mjs); here a live turn is the controller's alone: printed above.
  // Gated: what re-adoption replaces, a session resumed in a new process after the restart, and the wrapper's own cost.
  checks.push(
    check("storm: first delta after restart, durable p50 / without p50", sd.p50 / sn.p50, "<=", quick ? 0.5 : 0.25),
  );
  checks.push(check("streamed turn durable / without (quietest)", s.durable / s.plain, "<=", quick ? 2 : 1.05));
  checks.push(check("durable wrapper private memory, idle", m.idle, "<=", 0.5, "MB"));
  checks.push(check("durable wrapper private memory, a turn held at a 1 MB bound", m.held, "<=", 1.5, "MB"));
  checks.push(check("storm: sessions re-adopted with the same adapter", sd.same, ">=", sd.n, "sessions"));
  return checks;
}
