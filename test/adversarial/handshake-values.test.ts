/**
 * An agent's values are checked before they are stored (issue 46, finding
 * 13): a hostile agent (test/fixtures/adversarial/handshake-agent.mjs)
 * answers session/new with a session id of 300 KiB, or one holding an
 * escape sequence and a newline. The ensure fails "invalid-session-id"
 * before any session record is written, its processes are ended and its
 * lease settled, and the key stays usable. A record an earlier version
 * wrote with such an id (too large for the record store to read) can still
 * be closed, live and after a restart, and the key ensured again. Real
 * processes; build first (`npm run build`).
 */
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { sessionFileName } from "../../src/acpx/sessions/session-store.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  leaseCarriers,
  readPidfile,
  ROOT,
  tempStateDir,
  trackLease,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const AGENT = join(ROOT, "test/fixtures/adversarial/handshake-agent.mjs");
const GRACE_MS = 300;

async function controller(stateDir: string): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    keeper: "off",
  });
  controllers.push(ctl);
  return ctl;
}

async function leaseState(stateDir: string, leaseId: string): Promise<string | undefined> {
  return (await (await openLeaseStore(stateDir)).get(leaseId))?.state;
}

const sessionFiles = (stateDir: string): string[] => readdirSync(join(stateDir, "acpx", "sessions"));

describe("a session id the agent answers is checked before it is stored", () => {
  const cases = [
    { label: "300 KiB long", flag: `--session-id-bytes=${300 * 1024}`, why: /characters long, over the 1024 allowed/ },
    {
      label: "holding ESC and a newline",
      flag: `--session-id-json=${JSON.stringify("s1\u001b[31m\nforged")}`,
      why: /not printable: U\+001B at index 2/,
    },
  ];
  for (const c of cases) {
    it(`${c.label}: invalid-session-id, no record written, processes ended, lease settled, the key usable again`, async () => {
      const stateDir = tempStateDir("hs-value");
      const pidfile = join(stateDir, "agent.json");
      const ctl = await controller(stateDir);
      const err = (await ctl
        .ensureSession({
          sessionKey: "k-bad-id",
          agentId: "main",
          command: [process.execPath, AGENT, c.flag, `--pidfile=${pidfile}`],
        })
        .then(
          () => null,
          (e: unknown) => e,
        )) as { name: string; failure: string; message: string; leaseId: string; leaseState: string } | null;
      expect(err).toMatchObject({ name: "AcpxEnsureError", failure: "invalid-session-id" });
      expect(err!.message).toMatch(c.why);
      // the message never carries the value raw: no escape, no newline, not 300 KiB
      expect(err!.message).not.toMatch(/[\u001b\n]/);
      expect(err!.message.length).toBeLessThan(2000);
      expect(sessionFiles(stateDir)).toEqual([]);
      const { pid } = await readPidfile(pidfile);
      expect(alive(pid), "the adapter (it ignores SIGTERM) was ended").toBe(false);
      expect(["closed", "lost"]).toContain(await leaseState(stateDir, err!.leaseId));

      const h = await ctl.ensureSession({ sessionKey: "k-bad-id", agentId: "main", command: agentArgv({}) });
      trackLease(h.leaseId);
      expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
    });
  }
});

/** Rewrites the key's record as an earlier version would have written it, with a 300 KiB session id (too large to read back). */
function oversizeRecord(stateDir: string, h: AcpRuntimeHandle): void {
  const record = {
    sessionKey: h.sessionKey,
    leaseId: h.leaseId,
    acpSessionId: "a".repeat(300 * 1024),
    owner: h.owner,
    createdAt: 1,
    updatedAt: 1,
  };
  writeFileSync(join(stateDir, "acpx", "sessions", sessionFileName(h.sessionKey)), JSON.stringify(record, null, 2), {
    mode: 0o600,
  });
}

describe("a record an earlier version wrote with an oversized session id", () => {
  it("live: closeSession closes the session by its lease, and the key is ensured again", async () => {
    const stateDir = tempStateDir("hs-record-live");
    const ctl = await controller(stateDir);
    const h = await ctl.ensureSession({ sessionKey: "k-old", agentId: "main", command: agentArgv({ stubborn: true }) });
    trackLease(h.leaseId);
    oversizeRecord(stateDir, h);
    const report = await ctl.closeSession({ handle: { sessionKey: "k-old" } });
    expect(report).toMatchObject({ outcome: "closed", leaseId: h.leaseId });
    expect(alive(h.rootPid)).toBe(false);
    expect(leaseCarriers(h.leaseId)).toEqual([]);
    const again = await ctl.ensureSession({ sessionKey: "k-old", agentId: "main", command: agentArgv({}) });
    trackLease(again.leaseId);
    expect(again.leaseId).not.toBe(h.leaseId);
  });

  it("after a restart: the next controller closes it by the key's lease, and ensures the key again", async () => {
    const stateDir = tempStateDir("hs-record-restart");
    const first = await controller(stateDir);
    const h = await first.ensureSession({
      sessionKey: "k-old",
      agentId: "main",
      command: agentArgv({ stubborn: true }),
    });
    trackLease(h.leaseId);
    oversizeRecord(stateDir, h);
    // dispose leaves the session running and its lease open (its documented behaviour)
    await first.dispose();
    const next = await controller(stateDir);
    const report = await next.closeSession({ handle: { sessionKey: "k-old" } });
    expect(report).toMatchObject({ outcome: "closed", leaseId: h.leaseId });
    expect(await waitFor(() => !alive(h.rootPid), 5000)).not.toBe(-1);
    expect(await leaseState(stateDir, h.leaseId)).toBe("closed");
    const again = await next.ensureSession({ sessionKey: "k-old", agentId: "main", command: agentArgv({}) });
    trackLease(again.leaseId);
    expect(again.resumed).toBe(false);
  });

  it("after a restart, ensureSession on the key settles the old lease first and starts the new session", async () => {
    const stateDir = tempStateDir("hs-record-ensure");
    const first = await controller(stateDir);
    const h = await first.ensureSession({
      sessionKey: "k-old",
      agentId: "main",
      command: agentArgv({ stubborn: true }),
    });
    trackLease(h.leaseId);
    oversizeRecord(stateDir, h);
    await first.dispose();
    const next = await controller(stateDir);
    const again = await next.ensureSession({ sessionKey: "k-old", agentId: "main", command: agentArgv({}) });
    trackLease(again.leaseId);
    expect(await waitFor(() => !alive(h.rootPid), 5000)).not.toBe(-1);
    expect(await leaseState(stateDir, h.leaseId)).toBe("closed");
  });
});
