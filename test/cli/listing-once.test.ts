/**
 * `proclease status` and `proclease leases` list every lease once: a settled
 * lease's row says how it ended (`ended killed`), and what each such word
 * means is said once below the list, not in a second line per lease.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { agentArgv, cleanupAll, GRACE_MS, tempStateDir, trackLease } from "../acpx/controller-helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [MAIN, ...args], { timeout: 25_000, encoding: "utf8" }, (err, stdout, stderr) =>
      err ? reject(new Error(`${args.join(" ")}: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

const count = (text: string, needle: string) => text.split(needle).length - 1;

afterAll(() => cleanupAll());

describe("status and leases name each lease once", () => {
  it("two settled leases and an open one: each settled id once, the meaning of 'killed' once", async () => {
    const stateDir = tempStateDir("cli-once");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    try {
      const ids: string[] = [];
      for (const key of ["agent:main:acp:one", "agent:main:acp:two", "agent:main:acp:open"]) {
        const h = await ctl.ensureSession({ sessionKey: key, agentId: "main", command: agentArgv({}) });
        trackLease(h.leaseId);
        ids.push(h.leaseId);
        if (key !== "agent:main:acp:open") expect((await ctl.closeSession({ handle: h })).outcome).toBe("closed");
      }
      for (const command of ["status", "leases"]) {
        const out = await cli([command, "--state-dir", stateDir, "--backend", "procfs"]);
        // the open lease is also named by its cgroup path and a memory note; each settled one only by its row
        for (const id of ids.slice(0, 2)) expect(count(out, id), `${command}: lease ${id} in\n${out}`).toBe(1);
        expect(count(out, "ended killed: its processes were ended here"), `${command}:\n${out}`).toBe(1);
      }
      const status = await cli(["status", "--state-dir", stateDir]);
      expect(status).toMatch(
        new RegExp(`${ids[0]}\\s+closed\\s+age \\S+\\s+verdict gone\\s+agent:main:acp:one\\s+ended killed`),
      );
      const leases = await cli(["leases", "--state-dir", stateDir]);
      expect(leases).toMatch(/^LEASE\s+STATE\s+VERDICT\s+ROOT\s+PGID\s+SESSION\s+STARTED\s+ENDED/m);
      expect(leases).toMatch(new RegExp(`${ids[2]}\\s+open\\s+owned\\s.*\\s-\\s*$`, "m"));
    } finally {
      await ctl.shutdown();
    }
  });
});
