#!/usr/bin/env node
// The fuzzer's hostile ACP agent: no SDK, no dependency. It writes raw
// newline-delimited JSON-RPC to stdout and reads stdin itself, so it can do
// what no SDK agent would: stop reading, write lines of any size, answer ids
// it never got, hold a handshake step. It completes a valid handshake
// (initialize, session/new) unless one of its actions attacks the handshake.
//
//   node agent.mjs <plan file>
//
// The plan file (written by the runner, bench/fuzz/runner.mjs) holds the
// sequence (plan.mjs) and where things are: { seq, tag, dir, stateDir,
// pidsFile, targets, cgroupMount, python, secret }. The agent runs the
// sequence's actions (catalog.mjs) by phase: start actions at once, handshake
// actions shape its answers, turn actions in order on session/prompt, close
// actions on session/close. Everything it starts carries the run's tag in its
// argv and is written to the pids file, so the runner can find what is left
// whatever the process did to its environment, session or cgroup.
import { appendFileSync, closeSync, readFileSync, writeSync } from "node:fs";
import { BY_NAME } from "./catalog.mjs";
import { runStartAction, installTermBehaviour } from "./agent-procs.mjs";
import { runTurnAction, runCloseAction } from "./agent-turn.mjs";
import { handshakeAnswer } from "./agent-handshake.mjs";
import { rng, subSeed } from "../soak/rng.mjs";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
const seq = plan.seq;
const byPhase = (phase) => seq.actions.filter((x) => BY_NAME.get(x.a)?.phase === phase);

const ctx = {
  plan,
  seq,
  opts: seq.opts,
  // the tag every process of this run carries: unique per execution, so a rerun of the
  // same sequence (isolation, shrinking) never counts an earlier run's leftovers
  nonce: plan.tag,
  rnd: rng(subSeed(Number(seq.nonce), 7)),
  sessionId: null,
  stdoutClosed: false,
  stopTurn: false,
  nextId: 1,
  pending: new Map(),
  /** appends a line to the agent's report file (the runner reads it) */
  report(obj) {
    try {
      appendFileSync(`${plan.dir}/agent-report.jsonl`, `${JSON.stringify({ at: Date.now(), ...obj })}\n`);
    } catch {
      // the report is evidence, never a reason to stop the attack
    }
  },
  /** writes all of `s` to stdout, blocking as a pipe does; a closed or broken pipe ends writing for good */
  out(s) {
    if (ctx.stdoutClosed) return false;
    const buf = typeof s === "string" ? Buffer.from(s) : s;
    let off = 0;
    while (off < buf.length) {
      try {
        off += writeSync(1, buf, off, buf.length - off);
      } catch (e) {
        if (e.code === "EAGAIN") {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
          continue;
        }
        ctx.stdoutClosed = true;
        ctx.report({ what: "stdout-failed", code: e.code });
        return false;
      }
    }
    return true;
  },
  send(msg) {
    return ctx.out(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  },
  /** an agent→client request; resolves with its answer (or never, if stdin is not read) */
  request(method, params) {
    const id = ctx.nextId++;
    const p = new Promise((resolve) => ctx.pending.set(id, resolve));
    ctx.send({ id, method, params });
    return p;
  },
  closeStdout() {
    ctx.stdoutClosed = true;
    try {
      closeSync(1);
    } catch {
      // already closed
    }
  },
  pauseStdin: () => process.stdin.pause(),
  resumeStdin: () => process.stdin.resume(),
};

// ---- reading stdin: newline-delimited JSON, any line length the gateway
// sends (a 10 MiB file answer arrives in many chunks: only each new chunk is
// searched for its newline)
let parts = [];
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  let start = 0;
  for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", start)) {
    parts.push(chunk.slice(start, nl));
    const line = parts.join("");
    parts = [];
    start = nl + 1;
    if (line.trim() !== "") handleLine(line);
  }
  if (start < chunk.length) parts.push(chunk.slice(start));
});
function handleLine(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg === null || typeof msg !== "object") return;
  dispatch(msg).catch((e) => ctx.report({ what: "dispatch-failed", error: String(e?.stack ?? e) }));
}
process.stdin.on("end", () => {
  if (!ctx.surviveEof) process.exit(0);
});
process.stdin.on("error", () => undefined);

let turnRunning = false;
let turnAnswered = null;

async function dispatch(msg) {
  if (msg.method === undefined && msg.id !== undefined) {
    const resolve = ctx.pending.get(msg.id);
    ctx.pending.delete(msg.id);
    resolve?.(msg);
    return;
  }
  switch (msg.method) {
    case "initialize":
    case "session/new":
      return handshakeAnswer(ctx, msg, byPhase("handshake"));
    case "session/prompt":
      return runTurn(msg);
    case "session/cancel":
      ctx.stopTurn = true;
      if (turnRunning && !ctx.ignoreCancel) turnAnswered?.("cancelled");
      return;
    case "session/close":
      for (const act of byPhase("close")) await runCloseAction(ctx, act);
      if (!byPhase("close").some((x) => x.a === "never-answer-close")) ctx.send({ id: msg.id, result: {} });
      return;
    default:
      if (msg.id !== undefined) ctx.send({ id: msg.id, result: {} });
  }
}

async function runTurn(msg) {
  if (turnRunning) return ctx.send({ id: msg.id, error: { code: -32000, message: "busy" } });
  turnRunning = true;
  ctx.stopTurn = false;
  const answered = new Promise((resolve) => (turnAnswered = resolve));
  const work = (async () => {
    for (const act of byPhase("turn")) {
      if (ctx.stopTurn && !ctx.ignoreCancel) break;
      ctx.report({ what: "action", a: act.a });
      await runTurnAction(ctx, act);
      if (ctx.hang) await new Promise(() => {});
    }
    return "end_turn";
  })();
  const stopReason = await Promise.race([work, answered]);
  turnRunning = false;
  ctx.send({ id: msg.id, result: { stopReason } });
}

// ---- start
ctx.report({
  what: "started",
  pid: process.pid,
  startTime: readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ")[19],
  uid: process.getuid(),
  // an envRemove'd secret must never reach the adapter itself
  secretInEnv: plan.secret !== undefined && Object.values(process.env).some((v) => v.includes(plan.secret)),
});
installTermBehaviour(ctx, seq.actions);
for (const act of byPhase("start")) runStartAction(ctx, act);
