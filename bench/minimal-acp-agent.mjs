// The smallest Node ACP adapter worth measuring a session against: no SDK,
// no dependencies; it answers `initialize` and `session/new` over NDJSON on
// stdio and ends a prompt turn at once. What a session costs on top of this
// (time to ensure, private memory) is what proclease adds.
import { createInterface } from "node:readline";

let n = 0;
const send = (msg) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
createInterface({ input: process.stdin }).on("line", (line) => {
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.id === undefined) return;
  if (m.method === "initialize")
    send({ id: m.id, result: { protocolVersion: 1, agentCapabilities: {}, authMethods: [] } });
  else if (m.method === "session/new") send({ id: m.id, result: { sessionId: `minimal-${process.pid}-${++n}` } });
  else if (m.method === "session/prompt") send({ id: m.id, result: { stopReason: "end_turn" } });
  else send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
});
