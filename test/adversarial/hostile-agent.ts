/**
 * Hostile ACP agents for the intake tests: small .mjs scripts written to a
 * temp folder, speaking raw newline-delimited JSON-RPC (no SDK, so they can
 * send what an SDK never would). Each answers initialize and session/new,
 * then runs its scenario on every other message it reads. The scenario is
 * JavaScript with these in scope: `m` (the message read), `send(obj)` and
 * `sendRaw(line)` (blocking writes to stdout: a pipe's write blocks once
 * the gateway stops reading), `stopReading()` (stdin is never read again,
 * so the gateway's answers pile up on its side), `sessionId`, `state` (an
 * object kept across messages), `env` (process.env).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

export interface HostileAgentSpec {
  /** initialize's agentCapabilities (JSON) */
  agentCapabilities?: Record<string, unknown>;
  /** JavaScript: an expression for session/new's raw answer line (without newline), `m` in scope; default a plain answer */
  sessionNewLine?: string;
  /** JavaScript: the body run for every other message */
  onMessage: string;
}

export const HOSTILE_SESSION_ID = "hostile-session";

export function hostileAgent(label: string, spec: HostileAgentSpec): string[] {
  const dir = mkdtempSync(join(tmpdir(), `proclease-hostile-${label}-`));
  dirs.push(dir);
  const file = join(dir, "agent.mjs");
  const caps = JSON.stringify(spec.agentCapabilities ?? {});
  const sessionNew = spec.sessionNewLine ?? `JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { sessionId } })`;
  writeFileSync(
    file,
    `import { writeSync } from "node:fs";
const sessionId = ${JSON.stringify(HOSTILE_SESSION_ID)};
const env = process.env;
const state = {};
const pause = new Int32Array(new SharedArrayBuffer(4));
// blocking writes (fd 1 is a pipe): the agent stops when the gateway stops reading
function sendRaw(line) {
  const b = Buffer.from(line + "\\n");
  let off = 0;
  while (off < b.length) {
    try {
      off += writeSync(1, b, off);
    } catch (e) {
      // a non-blocking pipe: wait a millisecond rather than spin
      if (e.code === "EAGAIN") {
        Atomics.wait(pause, 0, 0, 1);
        continue;
      }
      if (e.code === "EPIPE") process.exit(0);
      throw e;
    }
  }
}
const send = (o) => sendRaw(JSON.stringify(o));
let reading = true;
// the agent lives on with stdin unread (nothing else would keep its event loop alive)
function stopReading() {
  if (reading) setInterval(() => {}, 1 << 30);
  reading = false;
  process.stdin.removeAllListeners("data");
  process.stdin.pause();
}
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => {
  buf += d;
  let nl;
  while (reading && (nl = buf.indexOf("\\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line.trim() !== "") onMessage(JSON.parse(line));
  }
});
process.stdin.on("end", () => process.exit(0));
function onMessage(m) {
  if (m.method === "initialize") {
    send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1, agentCapabilities: ${caps} } });
    return;
  }
  if (m.method === "session/new") {
    sendRaw(${sessionNew});
    return;
  }
  ${spec.onMessage}
}
`,
  );
  return [process.execPath, file];
}
