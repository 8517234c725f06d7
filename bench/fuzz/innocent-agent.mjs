#!/usr/bin/env node
// A cooperative ACP agent that is a sentinel: the fuzzer's innocent sessions
// run it (one per gateway that lives across sequences, and a later session
// in a sequence's own controller). It answers the handshake and every prompt
// at once, writes {pid, startTime} to its info file, and appends every
// signal it catches to its signal log, so the runner can tell whether
// anything signalled it before its own close. SIGTERM is logged, then it
// exits as a cooperative agent does; SIGKILL and SIGSTOP cannot be caught:
// the runner checks it is the same live, running process instead.
//
//   node innocent-agent.mjs <info file> <signal log> <tag>
import { appendFileSync, readFileSync, renameSync, writeFileSync, writeSync } from "node:fs";

const [info, log, tag] = process.argv.slice(2);
const note = (what) => appendFileSync(log, `${JSON.stringify({ pid: process.pid, what, at: Date.now(), tag })}\n`);
for (const s of ["SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGALRM", "SIGPIPE", "SIGCONT"])
  process.on(s, () => note(`signal ${s}`));
process.on("SIGTERM", () => {
  note("signal SIGTERM");
  process.exit(0);
});
const startTime = readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ")[19];
writeFileSync(`${info}.tmp`, JSON.stringify({ pid: process.pid, startTime }));
renameSync(`${info}.tmp`, info);

const send = (msg) => writeSync(1, `${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
let parts = [];
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  let start = 0;
  for (let nl = chunk.indexOf("\n"); nl >= 0; nl = chunk.indexOf("\n", start)) {
    parts.push(chunk.slice(start, nl));
    const line = parts.join("");
    parts = [];
    start = nl + 1;
    answer(line);
  }
  if (start < chunk.length) parts.push(chunk.slice(start));
});
process.stdin.on("end", () => process.exit(0));

function answer(line) {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m?.id === undefined || m.method === undefined) return;
  if (m.method === "initialize")
    send({
      id: m.id,
      result: { protocolVersion: 1, agentCapabilities: { sessionCapabilities: { close: {} } }, authMethods: [] },
    });
  else if (m.method === "session/new") send({ id: m.id, result: { sessionId: `innocent-${process.pid}` } });
  else if (m.method === "session/prompt") send({ id: m.id, result: { stopReason: "end_turn" } });
  else send({ id: m.id, result: {} });
}
