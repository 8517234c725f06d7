// Bench-only OpenClaw plugin: the bare peer of bench/openclaw-gateway.bench.mjs.
// An ACP runtime backend "direct" that spawns the configured agent itself and
// speaks ACP with the same SDK proclease uses: no lease, no wrapper, no
// cgroup, no verification. It registers the reply_dispatch hook as proclease
// does, so a chat message to one of its agents' sessions reaches it through
// the same gateway path. Never shipped (bench/ is outside the package).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { client as acpClient, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const BACKEND = "direct";

// the gateway runs from inside the openclaw package: its SDK resolves by the package's own name
const hostSdk = () =>
  import(pathToFileURL(createRequire(process.argv[1]).resolve("openclaw/plugin-sdk/acp-runtime")).href);

function createRuntime(agents) {
  const live = new Map();
  const open = async (input) => {
    const spec = agents[input.agent];
    if (!spec) throw new Error(`direct-acp: no agent ${input.agent}`);
    const child = spawn(spec.command[0], spec.command.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
    const s = { child, onUpdate: undefined };
    const app = acpClient({ name: "direct-acp" })
      .onNotification("session/update", ({ params }) => s.onUpdate?.(params))
      .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" } }));
    s.conn = app.connect(ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
    await s.conn.agent.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "direct-acp", version: "0" },
    });
    const res = await s.conn.agent.request("session/new", { cwd: input.cwd ?? process.cwd(), mcpServers: [] });
    s.sessionId = res.sessionId;
    live.set(input.sessionKey, s);
    return s;
  };
  const handleOf = (input, s) => ({
    sessionKey: input.sessionKey,
    agentId: input.agentId,
    backend: BACKEND,
    runtimeSessionName: input.sessionKey,
    backendSessionId: s.sessionId,
    agentSessionId: s.sessionId,
  });
  return {
    async ensureSession(input) {
      const s = live.get(input.sessionKey) ?? (await open(input));
      return handleOf(input, s);
    },
    async *runTurn({ handle, text }) {
      const s = live.get(handle.sessionKey);
      if (!s) throw new Error(`direct-acp: no live session ${handle.sessionKey}`);
      const queue = [];
      let wake;
      s.onUpdate = (n) => {
        const u = n.update;
        if (
          (u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "agent_thought_chunk") &&
          u.content?.type === "text"
        ) {
          queue.push({
            type: "text_delta",
            text: u.content.text,
            stream: u.sessionUpdate === "agent_message_chunk" ? "output" : "thought",
            tag: u.sessionUpdate,
          });
          wake?.();
        }
      };
      let answer;
      const prompt = s.conn.agent
        .request("session/prompt", { sessionId: s.sessionId, prompt: [{ type: "text", text }] })
        .then((r) => ((answer = r), wake?.()));
      try {
        while (answer === undefined || queue.length > 0) {
          if (queue.length > 0) yield queue.shift();
          else await new Promise((r) => (wake = r));
        }
        await prompt;
        yield {
          type: "done",
          status: answer.stopReason === "cancelled" ? "cancelled" : "completed",
          stopReason: answer.stopReason,
        };
      } finally {
        s.onUpdate = undefined;
      }
    },
    async cancel({ handle }) {
      const s = live.get(handle.sessionKey);
      if (s) await s.conn.agent.notify("session/cancel", { sessionId: s.sessionId });
    },
    async close({ handle }) {
      const s = live.get(handle.sessionKey);
      live.delete(handle.sessionKey);
      if (s) s.child.kill("SIGKILL");
    },
    shutdown() {
      for (const s of live.values()) s.child.kill("SIGKILL");
      live.clear();
    },
  };
}

export default {
  id: "direct-acp",
  name: "direct-acp (bench peer)",
  description: "Bench-only ACP backend: spawns the agent directly with the ACP SDK, nothing leased.",
  register(api) {
    if (api.registrationMode !== undefined && api.registrationMode !== "full") return;
    const runtime = createRuntime(api.pluginConfig?.agents ?? {});
    api.on("reply_dispatch", async (event, ctx) => (await hostSdk()).tryDispatchAcpReplyHook(event, ctx), {
      eligibleDispatchKinds: ["acp"],
    });
    api.registerService({
      id: "direct-acp-runtime",
      async start() {
        (await hostSdk()).registerAcpRuntimeBackend({ id: BACKEND, runtime });
      },
      async stop() {
        (await hostSdk()).unregisterAcpRuntimeBackend(BACKEND);
        runtime.shutdown();
      },
    });
  },
};
