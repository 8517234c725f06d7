// Protocol fuzz and garbage for the hostile agent: JSON-RPC lines that are
// valid JSON but wrong in every way a parser or a router can trip on, and
// bytes that are not JSON at all. Drawn from the agent's own seeded stream,
// so a sequence replays the same bytes.
import { deepJson } from "./agent-handshake.mjs";

const ODD_IDS = [null, 1.5, -1, 0, 2 ** 53 + 2, "", "\u0000", { a: 1 }, [1], true, 1e308, "__proto__"];
const METHODS = [
  "fs/read_text_file",
  "fs/write_text_file",
  "terminal/create",
  "terminal/output",
  "terminal/kill",
  "terminal/release",
  "terminal/wait_for_exit",
  "session/request_permission",
  "session/update",
  "_proclease/fuzz",
  "initialize",
  "session/prompt",
  "",
  "constructor",
  "__proto__",
];
const ODD_PARAMS = [
  () => null,
  () => 42,
  () => "params",
  () => [],
  () => ({ sessionId: 7, path: ["x"], command: { a: 1 }, args: "not-an-array" }),
  () => ({ sessionId: "nope", path: "relative/path", content: null }),
  () => ({ __proto__: { polluted: true }, constructor: { prototype: { polluted: true } } }),
  () => ({ sessionId: "x", update: { sessionUpdate: "no_such_update", content: 5 } }),
  () => ({ sessionId: "x", toolCall: null, options: "allow" }),
  () => ({ sessionId: "x", terminalId: "t".repeat(5000) }),
];

function fuzzMessage(ctx) {
  const r = ctx.rnd;
  const sid = ctx.sessionId;
  switch (r.int(0, 9)) {
    case 0:
      return { jsonrpc: "2.0", id: r.pick(ODD_IDS), method: r.pick(METHODS), params: r.pick(ODD_PARAMS)() };
    case 1:
      return { jsonrpc: "2.0", method: r.pick(METHODS), params: { sessionId: sid, ...r.pick(ODD_PARAMS)() } };
    case 2:
      return { jsonrpc: "2.0", id: r.int(0, 5), result: { ok: true }, error: { code: 1, message: "both" } };
    case 3:
      return { jsonrpc: "2.0", id: r.int(0, 5), error: { code: "not-a-number", message: { nested: true } } };
    case 4:
      return [{ jsonrpc: "2.0", method: "session/update", params: { sessionId: sid } }, 5, null];
    case 5:
      return r.pick([42, "string", null, true, [], {}]);
    case 6:
      return { jsonrpc: "1.0", id: r.int(1, 9), method: "session/update" };
    case 7:
      return { id: r.int(1, 9), method: "terminal/create", params: { sessionId: sid, command: "" } };
    case 8:
      return {
        jsonrpc: "2.0",
        method: "session/update",
        params: { sessionId: sid, update: { sessionUpdate: "agent_message_chunk", content: { type: "image" } } },
      };
    default:
      return { jsonrpc: "2.0", method: "session/update", params: { sessionId: sid, _meta: { n: [1e308, -0] } } };
  }
}

/** `count` fuzzed lines, plus now and then a deep or a number-laden one written as text. */
export function protocolFuzz(ctx, count) {
  const lines = [];
  for (let i = 0; i < count; i++) {
    if (ctx.rnd.chance(0.05)) lines.push(`{"jsonrpc":"2.0","method":"x","params":${deepJson(ctx.rnd.int(10, 5000))}}`);
    else if (ctx.rnd.chance(0.05)) lines.push('{"jsonrpc":"2.0","id":1e999,"result":{}}');
    else lines.push(JSON.stringify(fuzzMessage(ctx)));
  }
  ctx.out(`${lines.join("\n")}\n`);
  ctx.report({ what: "protocol-fuzz", count });
}

/** `bytes` of garbage: random bytes (invalid UTF-8, NULs, newlines) or printable text lines that are not JSON. */
export function garbage(ctx, bytes, binary) {
  const buf = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) {
    buf[i] = binary ? ctx.rnd.int(0, 255) : i % 80 === 79 ? 10 : 33 + ctx.rnd.int(0, 90);
  }
  ctx.out(buf);
  ctx.report({ what: "garbage", bytes, binary });
}
