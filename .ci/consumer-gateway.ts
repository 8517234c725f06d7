// A gateway author's first file, type-checked by .ci/consumer-check.sh
// against the packed tarball: the root's controller and supervisor, and the
// OpenClaw entry, as docs/install.md says a consumer sets TypeScript up.
import { createAcpxLifecycleController, createProcessSupervisor, type AcpRuntimeHandle } from "proclease";
import { createOpenClawAcpRuntime, createOpenClawProcessSupervisor } from "proclease/openclaw";

const stateDir = "/var/lib/gateway";
const acpx = await createAcpxLifecycleController({ stateDir });
await acpx.reapStartupOrphans();
const handle: AcpRuntimeHandle = await acpx.ensureSession({
  sessionKey: "agent:main:acp:1",
  agentId: "codex",
  command: ["npx", "@agentclientprotocol/codex-acp"],
});
const turn = acpx.startTurn(handle, "hello");
for await (const update of turn.events) {
  if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text")
    process.stdout.write(update.content.text);
}
const { stopReason, usage } = await turn.result;
console.log(stopReason, JSON.stringify(usage));
await acpx.closeSession({ handle });
await acpx.shutdown();

const supervisor = createOpenClawProcessSupervisor(createProcessSupervisor({ stateDir }));
const runtime = createOpenClawAcpRuntime({
  stateDir,
  agents: { codex: { command: ["npx", "@agentclientprotocol/codex-acp"] } },
});
console.log(typeof supervisor.spawn, runtime.backendId);
