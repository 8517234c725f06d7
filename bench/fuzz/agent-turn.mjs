// The hostile agent's protocol actions, run in a turn or when session/close
// arrives: floods of client requests (fs, permissions, terminals) it may
// never read the answers of, lines of tiny JSON values, deep nesting,
// responses to ids never sent, huge lines, garbage, a closed stdout, its own
// death. Writes block as a pipe does (agent.mjs `out`): an agent whose
// gateway stops reading stops here, holding nothing itself.
import { writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { garbage, protocolFuzz } from "./agent-fuzz.mjs";
import { deepJson } from "./agent-handshake.mjs";
import { runProcAction } from "./agent-procs.mjs";

const MIB = 1024 * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** waits for `promises` at most `ms`; answers how many settled with a result */
async function settledWithin(promises, ms, ok) {
  let n = 0;
  const counted = promises.map((p) => p.then((m) => (ok(m) ? n++ : 0)));
  await Promise.race([Promise.all(counted), sleep(ms)]);
  return n;
}

/** Writes the lines made by `make(i)` for i < count, about 1 MiB per write. */
function writeMany(ctx, count, make) {
  let batch = [];
  let size = 0;
  for (let i = 0; i < count && !ctx.stdoutClosed; i++) {
    const line = make(i);
    batch.push(line);
    size += line.length;
    if (size >= MIB) {
      ctx.out(batch.join(""));
      batch = [];
      size = 0;
    }
  }
  if (batch.length) ctx.out(batch.join(""));
}

function requestLine(ctx, method, params) {
  const id = ctx.nextId++;
  return { id, line: `${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n` };
}

/** Sends `count` requests at once; answers their promises (which settle only while stdin is read). */
function flood(ctx, count, method, params) {
  const promises = [];
  writeMany(ctx, count, (i) => {
    const { id, line } = requestLine(ctx, method, params(i));
    promises.push(new Promise((resolve) => ctx.pending.set(id, resolve)));
    return line;
  });
  return promises;
}

async function fsReadFlood(ctx, p) {
  const file = join(process.cwd(), `fz-${ctx.nonce}-${p.mib}.txt`);
  writeFileSync(file, `${"a".repeat(1023)}\n`.repeat(p.mib * 1024));
  if (!p.readStdin) ctx.pauseStdin();
  const answers = flood(ctx, p.count, "fs/read_text_file", () => ({ sessionId: ctx.sessionId, path: file }));
  const served = p.readStdin ? await settledWithin(answers, 15_000, (m) => m.result !== undefined) : null;
  ctx.report({ what: "fs-read-flood", count: p.count, mib: p.mib, served });
}

async function fsWriteFlood(ctx, p) {
  const content = "w".repeat(p.kib * 1024);
  const answers = flood(ctx, p.count, "fs/write_text_file", (i) => ({
    sessionId: ctx.sessionId,
    path: join(process.cwd(), `fz-w-${ctx.nonce}-${i % 8}.txt`),
    content,
  }));
  ctx.report({ what: "fs-write-flood", count: p.count, served: await settledWithin(answers, 5_000, () => true) });
}

async function permissionFlood(ctx, p) {
  if (!p.readStdin) ctx.pauseStdin();
  const options = [
    { optionId: "allow", name: "Allow", kind: "allow_once" },
    { optionId: "reject", name: "Reject", kind: "reject_once" },
  ];
  flood(ctx, p.count, "session/request_permission", (i) => ({
    sessionId: ctx.sessionId,
    toolCall: { toolCallId: `fz-${i}`, title: "rm -rf /", kind: "execute", status: "pending" },
    options,
  }));
  ctx.report({ what: "permission-flood", count: p.count });
}

function updateLine(ctx, text, meta = "") {
  return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":${JSON.stringify(ctx.sessionId)},"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":${JSON.stringify(text)}}${meta}}}}\n`;
}

function tinyValuesLine(ctx, p) {
  const n = Math.floor((p.mib * MIB) / (p.shape === "array" ? 2 : 8));
  let body;
  if (p.shape === "array") body = `[${"0,".repeat(n - 1)}0]`;
  else {
    const parts = new Array(n);
    for (let i = 0; i < n; i++) parts[i] = `"${(i % 46656).toString(36)}":0`;
    body = `{${parts.join(",")}}`;
  }
  for (let i = 0; i < p.count && !ctx.stdoutClosed; i++) ctx.out(updateLine(ctx, "x", `,"_meta":{"v":${body}}`));
  ctx.report({ what: "tiny-values-line", mib: p.mib, count: p.count });
}

function unknownIdResponses(ctx, p) {
  const forged = `\u001b[31m\nFUZZ-FORGED-${ctx.nonce} root logged in from 10.0.0.1\n\u001b[0m`;
  const fill = Math.max(0, p.idBytes - (p.escape ? forged.length : 0));
  const id = `${p.escape ? forged : ""}${"i".repeat(fill)}`;
  writeMany(ctx, p.count, (i) => `{"jsonrpc":"2.0","id":${JSON.stringify(`${i}:${id}`)},"result":{}}\n`);
  ctx.report({ what: "unknown-id-responses", count: p.count, idBytes: p.idBytes, escape: p.escape });
}

/** The terminal's command: a TERM-ignoring sleep, with a setsid env -i grandchild when asked. */
export function terminalParams(ctx, escapee) {
  const rec = `rec() { s=$(cut -d' ' -f22 /proc/$1/stat 2>/dev/null) && echo "$1 $s" >> '${ctx.plan.pidsFile}'; }; `;
  const inner = `${rec}rec $$; trap '' TERM; exec sleep 3000.${ctx.nonce}`;
  const esc = escapee ? `( setsid env -i PATH=/usr/bin:/bin /bin/sh -c "$1" fz${ctx.nonce} & ); ` : "";
  return {
    sessionId: ctx.sessionId,
    command: "/bin/sh",
    args: ["-c", `${rec}rec $$; ${esc}trap '' TERM; exec sleep 3000.${ctx.nonce}`, `fz${ctx.nonce}`, inner],
    env: [],
    outputByteLimit: 1024,
  };
}

/** terminal/create `count` times at once; counts the terminals the gateway created. */
export async function terminals(ctx, count, escapee, waitMs) {
  // said before the flood: a close may end this agent before every create is answered
  if (escapee) ctx.report({ what: "terminal-escapees" });
  const answers = flood(ctx, count, "terminal/create", () => terminalParams(ctx, escapee));
  const created = await settledWithin(answers, waitMs, (m) => typeof m?.result?.terminalId === "string");
  ctx.report({ what: "terminals", requested: count, created, escapee });
}

function hugeLine(ctx, p) {
  const chunk = "x".repeat(MIB);
  ctx.out(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":${JSON.stringify(ctx.sessionId)},"t":"`);
  for (let i = 0; i < p.mib && !ctx.stdoutClosed; i++) ctx.out(chunk);
  if (p.newline) ctx.out('"}}\n');
  ctx.report({ what: "huge-line", mib: p.mib, newline: p.newline, broken: ctx.stdoutClosed });
}

function stderrFlood(ctx, mib) {
  const chunk = Buffer.from(`${"e".repeat(1023)}\n`.repeat(1024));
  for (let i = 0; i < mib; i++) {
    try {
      writeSync(2, chunk);
    } catch {
      break;
    }
  }
  ctx.report({ what: "stderr-flood", mib });
}

function exitNow(ctx, how) {
  ctx.report({ what: "exit-now", how });
  if (how === "exit") process.exit(3);
  process.kill(process.pid, how);
}

const TURN = {
  "fs-read-flood": fsReadFlood,
  "fs-write-flood": fsWriteFlood,
  "permission-flood": permissionFlood,
  "update-flood": (ctx, p) => writeMany(ctx, p.count, () => updateLine(ctx, "u".repeat(p.bytes))),
  "tiny-values-line": tinyValuesLine,
  "deep-update": (ctx, p) => ctx.out(updateLine(ctx, "deep", `,"_meta":${deepJson(p.depth)}`)),
  "unknown-id-responses": unknownIdResponses,
  "terminal-flood": (ctx, p) => terminals(ctx, p.count, p.escapee, 10_000),
  "close-stdout": (ctx, p) => {
    ctx.closeStdout();
    ctx.report({ what: "close-stdout" });
    if (p.thenHang) ctx.hang = true;
  },
  garbage: (ctx, p) => garbage(ctx, p.bytes, p.binary),
  "huge-line": hugeLine,
  "protocol-fuzz": (ctx, p) => protocolFuzz(ctx, p.count),
  "stderr-flood": (ctx, p) => stderrFlood(ctx, p.mib),
  "exit-now": (ctx, p) => exitNow(ctx, p.how),
  "hang-turn": (ctx, p) => {
    ctx.ignoreCancel = p.ignoreCancel;
    ctx.hang = true;
  },
};

export async function runTurnAction(ctx, act) {
  if (await runProcAction(ctx, act)) return;
  const fn = TURN[act.a];
  if (fn) await fn(ctx, act.p);
}

export async function runCloseAction(ctx, act) {
  if (act.a !== "terminals-on-close") return;
  const waiting = terminals(ctx, act.p.count, false, 5_000);
  await sleep(act.p.answerAfterMs);
  ctx.report({ what: "close-answer-due", afterMs: act.p.answerAfterMs });
  await Promise.race([waiting, sleep(1000)]);
}
