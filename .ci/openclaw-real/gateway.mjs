// A real `openclaw gateway` process and an operator client on its WebSocket
// protocol, for .ci/openclaw-real/run.mjs. The client is OpenClaw's own
// GatewayClient (openclaw/plugin-sdk/gateway-runtime), connected as an
// operator app with the shared gateway token; `/acp spawn`, `cancel` and
// `close` need operator.admin, chat.send operator.write, history
// operator.read.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const OPERATOR_SCOPES = ["operator.admin", "operator.read", "operator.write"];

const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, "");

export async function loadGatewayClient(openclawDir) {
  const hostRequire = createRequire(join(openclawDir, "package.json"));
  const mod = await import(pathToFileURL(hostRequire.resolve("openclaw/plugin-sdk/gateway-runtime")).href);
  return mod.GatewayClient;
}

/** Resolves when cond() is truthy (polled), rejects naming what after timeoutMs. */
export async function waitFor(what, cond, timeoutMs = 60_000, everyMs = 50) {
  const t0 = performance.now();
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function freePort() {
  const srv = createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

export class Gateway {
  /** opts: { openclawDir, env, port, token, GatewayClient, logFile } */
  constructor(opts) {
    this.opts = opts;
    this.child = undefined;
    this.client = undefined;
    this.log = "";
    this.exited = undefined;
    this.incarnation = 0;
    /** every event frame of this incarnation's connection, in arrival order */
    this.events = [];
  }

  /** `openclaw gateway` in a session and process group of its own (so its whole group can be killed), then a connected client. */
  async start() {
    this.incarnation += 1;
    this.log = "";
    this.events = [];
    const { openclawDir, env, port } = this.opts;
    const bin = join(openclawDir, "node_modules/openclaw/openclaw.mjs");
    const child = spawn(process.execPath, [bin, "gateway", "--port", String(port), "--bind", "loopback"], {
      env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
    for (const s of [child.stdout, child.stderr]) s.on("data", (d) => (this.log += stripAnsi(String(d))));
    const t0 = performance.now();
    await waitFor(
      "the gateway's log to say ready",
      () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`the gateway exited before ready:\n${this.log.slice(-3000)}`);
        return /\[gateway\] ready/.test(this.log);
      },
      180_000,
      100,
    );
    const readyMs = performance.now() - t0;
    await this.connect();
    return { pid: child.pid, readyMs, connectedMs: performance.now() - t0 };
  }

  async connect() {
    const { GatewayClient, port, token } = this.opts;
    let hello;
    let failed;
    const ok = new Promise((resolve, reject) => ((hello = resolve), (failed = reject)));
    this.client = new GatewayClient({
      url: `ws://127.0.0.1:${port}`,
      token,
      role: "operator",
      scopes: OPERATOR_SCOPES,
      clientName: "gateway-client",
      clientDisplayName: "proclease CI",
      mode: "backend",
      onEvent: (e) => this.events.push({ at: performance.now(), event: e.event, payload: e.payload }),
      onHelloOk: () => hello(),
      onConnectError: (e) => failed(e),
    });
    this.client.start();
    await Promise.race([
      ok,
      new Promise((_, rej) => setTimeout(() => rej(new Error("no hello from the gateway in 60 s")), 60_000)),
    ]);
  }

  /** chat.send; returns the run id and the time it was sent. */
  async send(sessionKey, message) {
    const idempotencyKey = `ci-${this.incarnation}-${Math.random().toString(36).slice(2)}`;
    const sentAt = performance.now();
    const r = await this.client.request("chat.send", { sessionKey, message, idempotencyKey }, { expectFinal: false });
    return { runId: r.runId ?? idempotencyKey, sentAt, ack: r };
  }

  runEvents(runId) {
    return this.events.filter((e) => e.payload?.runId === runId);
  }

  /** The ACP runtime events (`agent` frames on the `acp` stream) of one run, in arrival order. */
  acpEvents(runId) {
    return this.runEvents(runId).filter(
      (e) => e.event === "agent" && e.payload.stream === "acp" && e.payload.data?.phase === "runtime_event",
    );
  }

  /** The run's terminal chat frame (final, error or aborted). */
  chatEnd(runId) {
    return this.runEvents(runId).find(
      (e) => e.event === "chat" && ["final", "error", "aborted"].includes(e.payload.state),
    );
  }

  /** A gateway command (/acp …) sent from the operator's main session; resolves with its reply text. */
  async command(text, timeoutMs = 120_000) {
    const { runId } = await this.send("agent:main:main", text);
    const end = await waitFor(`the reply to ${text}`, () => this.chatEnd(runId), timeoutMs);
    return textOf(end.payload.message) ?? end.payload.errorMessage ?? "";
  }

  async history(sessionKey) {
    return this.client.request("chat.history", { sessionKey, limit: 20 });
  }

  async stopClient() {
    const c = this.client;
    this.client = undefined;
    if (c) await c.stopAndWait({ timeoutMs: 5000 }).catch(() => c.stop());
  }

  /** signal the gateway alone, or (group) its whole process group; resolves with how it exited */
  async kill(signal, { group = false } = {}) {
    await this.stopClient();
    const pid = this.child.pid;
    process.kill(group ? -pid : pid, signal);
    const how = await Promise.race([this.exited, new Promise((r) => setTimeout(() => r(null), 120_000))]);
    if (how === null) throw new Error(`the gateway did not exit within 120 s of ${signal}`);
    return how;
  }
}

export function textOf(message) {
  if (!message) return undefined;
  if (typeof message.content === "string") return message.content;
  return (message.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("");
}
