/**
 * ACP client terminals served by the process supervisor as leased runs of
 * the session, driven by the fixture agent's own terminal/* requests. The
 * terminal's command forks a setsid grandchild that ignores SIGTERM: the
 * session's close leaves nothing, and so does a gateway SIGKILL followed by
 * the next gateway's start (its startup reap settles the terminal's lease).
 * Build first (`npm run build`).
 */
import { existsSync } from "node:fs";
import { TERMINAL_HOLDER_FILE } from "../../src/acpx/durable/terminals.js";
import { nativeWrapperPath } from "./durable-helpers.js";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { OutputTail, TERMINAL_RUN_PREFIX } from "../../src/acpx/connection/client-terminal.js";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { createProcessSupervisor } from "../../src/supervisor/index.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackChild,
  trackLease,
  trackPid,
  waitFor,
  say,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

/** a command whose setsid grandchild ignores SIGTERM and writes its pid to `pidfile` */
const stubbornTree = (pidfile: string): string =>
  `setsid sh -c 'trap "" TERM; exec sleep 600' & echo $! > ${pidfile}; echo started; wait`;
/** the same, with its environment scrubbed (no lease markers): only the terminal's cgroup can find it */
const scrubbedTree = (pidfile: string): string =>
  `env -i setsid sh -c 'trap "" TERM; exec sleep 600' & echo $! > ${pidfile}; wait`;

async function readPid(file: string): Promise<number> {
  let pid = 0;
  await waitFor(() => {
    try {
      pid = Number(readFileSync(file, "utf8").trim());
    } catch {
      return false;
    }
    return pid > 0;
  }, 10_000);
  trackPid(pid);
  return pid;
}

describe("OutputTail", () => {
  it("keeps the last bytes within the limit, never starting inside a character", () => {
    const t = new OutputTail(5);
    t.append("ab");
    expect([t.text(), t.truncated]).toEqual(["ab", false]);
    t.append("éé€"); // 2 + 2 + 3 bytes
    expect(Buffer.byteLength(t.text())).toBeLessThanOrEqual(5);
    expect(t.text()).toBe("é€");
    expect(t.truncated).toBe(true);
    const z = new OutputTail(0);
    z.append("x");
    expect(z.text()).toBe("");
  });
});

describe("client terminals", () => {
  const holder = nativeWrapperPath() !== null && existsSync(join(nativeWrapperPath()!, "..", TERMINAL_HOLDER_FILE));
  // the same behaviour for a durable session's terminals, which run under the terminal holder
  for (const durable of holder ? [false, true] : [false]) {
    const label = durable ? "durable: " : "";
    const durableOpt = durable ? { durable: { reattachWithinMs: 60_000 } } : {};
    it(`${label}runs a command, reports output and exit status, honours the output limit; off unless asked for`, async () => {
      const ctl = await createAcpxLifecycleController({
        stateDir: tempStateDir("term-run"),
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        clientCapabilities: { terminal: { maxOutputBytes: 8 } },
        ...durableOpt,
      });
      controllers.push(ctl);
      const h = await ctl.ensureSession({ sessionKey: "k-term-run", agentId: "main", command: agentArgv({}) });
      trackLease(h.leaseId);
      const r = JSON.parse(await say(ctl, h, "/terminal-run printf 'héllo wörld'; exit 3")) as {
        terminalId: string;
        exit: unknown;
        output: string;
        truncated: boolean;
      };
      expect(r.terminalId.startsWith(TERMINAL_RUN_PREFIX)).toBe(true);
      expect(r.exit).toMatchObject({ exitCode: 3 });
      expect(r.truncated).toBe(true);
      expect(Buffer.byteLength(r.output)).toBeLessThanOrEqual(8);
      expect("héllo wörld".endsWith(r.output)).toBe(true);
      // its lease settled with the run
      const leases = (await ctl.listLeases()).filter((l) => l.sessionKey === `supervisor:${r.terminalId}`);
      expect(leases.map((l) => l.state)).toEqual([expect.stringMatching(/closed|lost/)]);
      expect(JSON.parse(await say(ctl, h, "/whoami")).clientCapabilities).toMatchObject({ terminal: true });

      const off = await createAcpxLifecycleController({
        stateDir: tempStateDir("term-off"),
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
      });
      controllers.push(off);
      const h2 = await off.ensureSession({ sessionKey: "k-term-off", agentId: "main", command: agentArgv({}) });
      trackLease(h2.leaseId);
      expect(await say(off, h2, "/terminal-run echo hi")).toMatch(/^refused: -32601/);
    });

    it(`${label}session close ends the terminal's whole tree: a setsid grandchild that ignores SIGTERM included`, async () => {
      const stateDir = tempStateDir("term-close");
      const ctl = await createAcpxLifecycleController({
        stateDir,
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        clientCapabilities: { terminal: true },
        ...durableOpt,
      });
      controllers.push(ctl);
      const h = await ctl.ensureSession({ sessionKey: "k-term-close", agentId: "main", command: agentArgv({}) });
      trackLease(h.leaseId);
      const pidfile = join(stateDir, "grandchild.pid");
      const started = await say(ctl, h, `/terminal-start ${stubbornTree(pidfile)}`);
      const terminalId = started.replace(/^terminal /, "");
      const grandchild = await readPid(pidfile);
      expect(alive(grandchild)).toBe(true);
      expect((await ctl.sessionStatus(h)).terminals).toEqual([terminalId]);
      const lease = (await ctl.listLeases()).find((l) => l.sessionKey === `supervisor:${terminalId}`)!;
      expect(lease.state).toBe("open");
      // a durable session's terminal runs under the holder, its lease durable (docs/lifecycle-controller.md)
      expect(lease.durable !== undefined).toBe(durable);
      trackLease(lease.leaseId);
      const scrubbedFile = join(stateDir, "scrubbed.pid");
      await say(ctl, h, `/terminal-start ${scrubbedTree(scrubbedFile)}`);
      const scrubbed = await readPid(scrubbedFile);
      const report = await ctl.closeSession({ handle: h });
      expect(report.outcome).toBe("closed");
      expect(alive(grandchild)).toBe(false);
      if (ctl.containment.available) expect(alive(scrubbed)).toBe(false);
      else
        console.log(
          `[skip] env-scrubbed terminal escapee not checked: containment is off here (${ctl.containment.why})`,
        );
      expect(leaseCarriers(lease.leaseId)).toEqual([]);
      const after = (await ctl.listLeases()).find((l) => l.leaseId === lease.leaseId)!;
      expect(["closed", "lost"]).toContain(after.state);
    });
  }

  it("gateway SIGKILL, then the next gateway's start: the terminal's tree is gone and its lease settled", async () => {
    const stateDir = tempStateDir("term-crash");
    const pidfile = join(stateDir, "grandchild.pid");
    const gw = trackChild(
      spawn(
        process.execPath,
        [
          join(ROOT, "test/fixtures/acpx/conversation-gateway.mjs"),
          stateDir,
          "k-term-crash",
          JSON.stringify(agentArgv({})),
          `/terminal-start ${stubbornTree(pidfile)}`,
        ],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      ),
    );
    const lines = createInterface({ input: gw.stdout! });
    let terminalId = "";
    for await (const line of lines) {
      const ev = JSON.parse(line) as { type: string; text?: string; handle?: AcpRuntimeHandle };
      if (ev.type === "ready") trackLease(ev.handle!.leaseId);
      if (ev.type === "chunk") terminalId = ev.text!.replace(/^terminal /, "");
      if (ev.type === "result") break;
    }
    const grandchild = await readPid(pidfile);
    expect(alive(grandchild)).toBe(true);
    gw.kill("SIGKILL");
    await new Promise((r) => gw.once("exit", r));
    // the terminal is the gateway's (detached) child, not the wrapper's: it outlives the gateway
    expect(alive(grandchild)).toBe(true);
    const settled: [string, string][] = [];
    const next = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      onLeaseSettled: (l, o) => settled.push([l.sessionKey, o.via]),
    });
    controllers.push(next);
    const lease = (await next.listLeases()).find((l) => l.sessionKey === `supervisor:${terminalId}`)!;
    expect(lease.state).toBe("open");
    trackLease(lease.leaseId);
    // another supervisor's leased run on the same state dir and instance is not the controller's to reap
    const other = createProcessSupervisor({ stateDir, gatewayInstanceId: next.gatewayInstanceId, graceMs: GRACE_MS });
    const run = await other.spawn({
      mode: "child",
      argv: ["sleep", "600"],
      sessionId: "other",
      backendId: "exec",
      background: true,
    });
    trackPid(run.pid);
    await next.reapStartupOrphans();
    expect(await waitFor(() => !alive(grandchild), 5000)).toBeGreaterThanOrEqual(0);
    expect(leaseCarriers(lease.leaseId)).toEqual([]);
    const after = (await next.listLeases()).find((l) => l.leaseId === lease.leaseId)!;
    expect(["closed", "lost"]).toContain(after.state);
    expect(settled).toContainEqual([`supervisor:${terminalId}`, "reap"]);
    expect(settled).toContainEqual(["k-term-crash", "reap"]);
    expect(alive(run.pid!)).toBe(true);
    expect((await next.listLeases()).find((l) => l.sessionKey === `supervisor:${run.runId}`)?.state).toBe("open");
    await other.shutdown();
    expect(alive(run.pid!)).toBe(false);
  });
});
