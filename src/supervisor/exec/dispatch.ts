/** The process tool's one entry point: a request by action name, answered by the matching ExecSessions method. */
import type { ExecSessions, ProcessActionRequest, ProcessActionResult } from "./types.js";

export async function runAction(api: ExecSessions, req: ProcessActionRequest): Promise<ProcessActionResult> {
  switch (req.action) {
    case "list":
      return { action: "list", sessions: api.list() };
    case "poll":
      return { action: "poll", ...(await api.poll(req.sessionId, { timeoutMs: req.timeoutMs, signal: req.signal })) };
    case "log":
      return { action: "log", ...api.log(req.sessionId, { offset: req.offset, limit: req.limit }) };
    case "write":
      api.write(req.sessionId, req.data, { eof: req.eof });
      return { action: "write", ok: true };
    case "send-keys":
      api.sendKeys(req.sessionId, req);
      return { action: "send-keys", ok: true };
    case "submit":
      api.submit(req.sessionId, req.text);
      return { action: "submit", ok: true };
    case "paste":
      api.paste(req.sessionId, req.text);
      return { action: "paste", ok: true };
    case "kill":
      return { action: "kill", result: await api.kill(req.sessionId) };
    case "clear":
      api.clear(req.sessionId);
      return { action: "clear", ok: true };
    case "remove":
      return { action: "remove", result: await api.remove(req.sessionId) };
    default:
      throw new TypeError(`unknown process action ${JSON.stringify((req as { action?: unknown }).action)}`);
  }
}
