/**
 * The raw surface: a leased adapter whose ACP the caller speaks itself (as
 * OpenClaw's acpx extension keeps its own ACP client). The test speaks ACP
 * with the SDK's own client over the handed-over stdin/stdout; the tree is
 * verified and reaped through the same lifecycle as any session.
 * Build first (`npm run build`).
 */
import { Readable, Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { client, ndJsonStream, type SessionNotification } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxRawSessionError } from "../../src/acpx/sessions/raw-session-error.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  readPidfile,
  tempStateDir,
  trackLease,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

describe("spawnRawAdapter", () => {
  it("hands over stdin/stdout of a leased adapter; the caller's own ACP client runs a turn; close reaps the tree", async () => {
    const stateDir = tempStateDir("raw");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const pidfile = `${stateDir}/agent.pid`;
    const raw = await ctl.spawnRawAdapter({
      sessionKey: "k-raw",
      agentId: "main",
      command: agentArgv({ kind: "setsid", pidfile }),
    });
    trackLease(raw.handle.leaseId);
    const pids = await readPidfile(pidfile);
    expect(raw.lease).toMatchObject({ leaseId: raw.handle.leaseId, state: "open", rootPid: raw.handle.rootPid });
    expect(raw.handle.acpSessionId).toBe("");

    const updates: SessionNotification[] = [];
    const conn = client({ name: "plugin" })
      .onNotification("session/update", ({ params }) => void updates.push(params))
      .connect(
        ndJsonStream(
          Writable.toWeb(raw.stdin) as WritableStream<Uint8Array>,
          Readable.toWeb(raw.stdout) as ReadableStream<Uint8Array>,
        ),
      );
    const init = await conn.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
    expect(init.agentInfo?.name).toBe("proclease-fixture-agent");
    const { sessionId } = await conn.agent.request("session/new", { cwd: process.cwd(), mcpServers: [] });
    const r = await conn.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] });
    expect(r.stopReason).toBe("end_turn");
    expect(updates.some((u) => u.update.sessionUpdate === "agent_message_chunk")).toBe(true);

    // the controller does not speak on a stream it handed over
    expect(() => ctl.startTurn(raw.handle, "no")).toThrow(AcpxRawSessionError);
    await expect(ctl.setMode(raw.handle, "code")).rejects.toBeInstanceOf(AcpxRawSessionError);
    expect((await ctl.listSessions()).find((s) => s.sessionKey === "k-raw")).toMatchObject({
      live: true,
      leaseId: raw.handle.leaseId,
    });

    const tree = await raw.verify();
    expect(tree?.members.map((m) => m.pid)).toEqual(
      expect.arrayContaining([raw.handle.rootPid, pids.pid, pids.grandchildPid]),
    );
    const report = await raw.close("plugin done");
    expect(report.outcome).toBe("closed");
    for (const pid of [raw.handle.rootPid, pids.pid, pids.grandchildPid!]) expect(alive(pid)).toBe(false);
    expect(leaseCarriers(raw.handle.leaseId)).toEqual([]);
    expect(await raw.verify()).toBeNull();
  });
});
