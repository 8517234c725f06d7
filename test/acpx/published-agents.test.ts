/**
 * The conversation surface against published ACP agents, offline: what they
 * show without a login (initialize and session/new answers: capabilities,
 * modes, config options, and the controls that act on them).
 *
 * This file installs nothing. The agents come from a folder named by
 * PROCLEASE_ACP_AGENTS where they were installed with npm (CI does it in a
 * temp folder, never as dependencies):
 *   npm i @agentclientprotocol/claude-agent-acp@0.101.0 @agentclientprotocol/codex-acp@2.6.0
 * Without that folder (or an agent in it) each test is skipped, and says why
 * in its name and on stdout.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxEnsureError } from "../../src/acpx/report/errors.js";
import { disposeAfterEach, GRACE_MS, leaseCarriers, tempStateDir, trackLease, waitFor } from "./controller-helpers.js";

const controllers = disposeAfterEach();
/** the agents' HOME folders, removed once the file's tests ran (after their controllers are disposed) */
const homes: string[] = [];
const homeDir = (prefix: string): string => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  homes.push(d);
  return d;
};
afterAll(() => {
  for (const d of homes) rmSync(d, { recursive: true, force: true });
});
const dir = process.env.PROCLEASE_ACP_AGENTS;

function binOf(name: string): { bin: string | undefined; why: string } {
  if (!dir) return { bin: undefined, why: "PROCLEASE_ACP_AGENTS is not set (see this file's header)" };
  const bin = join(dir, "node_modules/.bin", name);
  return existsSync(bin) ? { bin, why: "" } : { bin: undefined, why: `${bin} is not installed` };
}

function published(name: string, title: string, fn: (bin: string) => Promise<void>): void {
  const { bin, why } = binOf(name);
  if (bin === undefined) {
    console.log(`[skip] ${name}: ${why}`);
    it.skip(`${title} (skipped: ${why})`, () => undefined);
  } else it(title, () => fn(bin), 120_000);
}

describe("published agents, offline", () => {
  published(
    "claude-agent-acp",
    "claude-agent-acp@0.101.0: capabilities, modes and config options readable; setMode and setConfigOption act; close; resume falls back with the agent's reason",
    async (bin) => {
      const ctl = await createAcpxLifecycleController({
        stateDir: tempStateDir("pub-claude"),
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        handshakeTimeoutMs: 60_000,
      });
      controllers.push(ctl);
      // a throwaway HOME; IS_SANDBOX lets its bypass mode start as root (this CI runs as root)
      const env = { HOME: homeDir("proclease-claude-home-"), IS_SANDBOX: "1" };
      const h = await ctl.ensureSession({
        sessionKey: "k-claude",
        agentId: "claude",
        command: [bin],
        env,
        cwd: tmpdir(),
      });
      trackLease(h.leaseId);
      expect(h.agentInfo?.name).toBe("@agentclientprotocol/claude-agent-acp");
      expect(h.agentCapabilities).toMatchObject({
        loadSession: true,
        promptCapabilities: { image: true, embeddedContext: true },
      });
      expect(h.agentCapabilities.sessionCapabilities).toMatchObject({ resume: {}, close: {}, list: {} });
      const seen: SessionUpdate[] = [];
      ctl.onUpdate(h, (u) => seen.push(u));
      let st = await ctl.sessionStatus(h);
      expect(st.modes?.availableModes.map((m) => m.id)).toEqual(
        expect.arrayContaining(["default", "acceptEdits", "plan"]),
      );
      expect(st.configOptions?.map((o) => o.id)).toEqual(expect.arrayContaining(["mode", "model"]));
      await ctl.setMode(h, "plan");
      const opts = await ctl.setConfigOption(h, "model", "sonnet");
      expect(opts.find((o) => o.id === "model")).toMatchObject({ currentValue: "sonnet" });
      st = await ctl.sessionStatus(h);
      expect(st.modes?.currentModeId).toBe("plan");
      expect(
        await waitFor(() => seen.some((u) => u.sessionUpdate === "available_commands_update"), 10_000),
      ).toBeGreaterThanOrEqual(0);
      expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
      expect(leaseCarriers(h.leaseId)).toEqual([]);
      // offline the session never had a message, so the agent has nothing to resume: a new one, with its reason
      const again = await ctl.ensureSession({
        sessionKey: "k-claude",
        agentId: "claude",
        command: [bin],
        env,
        cwd: tmpdir(),
      });
      trackLease(again.leaseId);
      expect(again.resumed).toBe(false);
      expect(again.resumeReason).toMatch(/the agent refused session\/resume for session ".+": Resource not found/);
      expect((await ctl.closeSession({ handle: again })).outcome).toBe("closed");
    },
  );

  published(
    "codex-acp",
    "codex-acp@2.6.0: auth_required on session/new is typed, with the agent's methods; the lease settles",
    async (bin) => {
      const ctl = await createAcpxLifecycleController({
        stateDir: tempStateDir("pub-codex"),
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        handshakeTimeoutMs: 60_000,
      });
      controllers.push(ctl);
      const env = { HOME: homeDir("proclease-codex-home-"), CODEX_HOME: homeDir("proclease-codex-") };
      const e = (await ctl
        .ensureSession({ sessionKey: "k-codex", agentId: "codex", command: [bin], env, envRemove: ["OPENAI_API_KEY"] })
        .catch((x: unknown) => x)) as AcpxEnsureError;
      expect(e).toBeInstanceOf(AcpxEnsureError);
      if (e.leaseId) trackLease(e.leaseId);
      expect(e.failure).toBe("auth-required");
      expect(e.authMethods?.map((m) => m.id)).toEqual(["api-key", "chat-gpt"]);
      expect(["closed", "lost"]).toContain(e.leaseState);
    },
  );
});
