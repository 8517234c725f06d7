/**
 * `proclease status` on a real state dir with a live session: a controller
 * ensures a session whose adapter has a stubborn grandchild, and the CLI
 * (`node dist/cli/main.js`, as an operator runs it) must show the lease, the
 * live tree wrapper → adapter → grandchild with roles, comm and markers, and
 * the verdict with its evidence, in text and in --json; colour only on a
 * terminal and never under NO_COLOR; --watch redraws until SIGINT.
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { treePrefixes, type StatusView } from "../../src/cli/commands/status.js";
import {
  agentArgv,
  alive,
  cleanupAll,
  GRACE_MS,
  readPidfile,
  tempStateDir,
  trackLease,
  waitFor,
  type AgentPids,
} from "../acpx/controller-helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
// The wrapper and the adapter run this same Node, whose main thread names
// itself: comm is "node" up to Node 22, "MainThread" on 24, "node-MainThread" on 26.
const NODE_COMM = readFileSync("/proc/self/comm", "utf8").trim();
const NODE_COMM_RE = NODE_COMM.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
// the wrapper: the native one's comm is its installed name (acpx-wrapper-<hash>, cut to 15 bytes), the Node one's is node's
const WRAPPER_COMM_RE = `(?:acpx-wrapper-[0-9a-f]*|${NODE_COMM_RE})`;
const ANSI = /\x1b\[/;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { env: { ...process.env, ...env }, timeout: 30_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

const hasScript = (() => {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
if (!hasScript)
  console.log(
    "status.test: util-linux `script` is missing, so the terminal-colour test is skipped (it needs a pseudo-terminal)",
  );

/** Runs the CLI on a pseudo-terminal (util-linux `script`), so stdout.isTTY is true. */
function onTty(args: string[], env: Record<string, string>): Promise<Run> {
  const cmd = [process.execPath, MAIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
  return new Promise((resolve) => {
    execFile(
      "script",
      ["-qec", cmd, "/dev/null"],
      { env: { ...process.env, ...env }, timeout: 30_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

afterAll(() => cleanupAll());

describe("proclease status on a live session", () => {
  let ctl: AcpxLifecycleController;
  let h: AcpRuntimeHandle;
  let pids: AgentPids;
  let dir: string;

  const setup = async () => {
    dir = tempStateDir("cli-status");
    ctl = await createAcpxLifecycleController({ stateDir: dir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    const pidfile = join(dir, "agent.json");
    h = await ctl.ensureSession({
      sessionKey: "agent:main:acp:status",
      agentId: "main",
      command: agentArgv({ kind: "plain", stubborn: true, pidfile }),
    });
    trackLease(h.leaseId);
    pids = await readPidfile(pidfile);
    // the grandchild is `sh -c "…; exec sleep"`: wait for the exec, so its comm is settled
    const comm = () => {
      try {
        return readFileSync(`/proc/${pids.grandchildPid}/comm`, "utf8").trim();
      } catch {
        return null;
      }
    };
    if ((await waitFor(() => comm() === "sleep", 10_000)) === -1)
      throw new Error(`grandchild ${pids.grandchildPid} never exec'd sleep (comm ${comm()})`);
  };

  it("text: the lease, its tree wrapper → adapter → grandchild with markers, the verdict and its evidence; no colour when piped", async () => {
    await setup();
    try {
      const r = await cli(["status", "--state-dir", dir]);
      expect(r.code, r.stderr).toBe(0);
      const out = r.stdout;
      expect(out).not.toMatch(ANSI);
      expect(out.split("\n")[0]).toMatch(/^backend: \w+ \(identity: \w+\)$/);
      expect(out).toMatch(new RegExp(`lease ${h.leaseId}\\s+open\\s+age \\d+s`));
      expect(out).toMatch(/session\s+agent:main:acp:status/);
      expect(out).toMatch(new RegExp(`instance\\s+${h.owner.gatewayInstanceId}`));
      expect(out).toMatch(new RegExp(`root\\s+pid ${h.rootPid}\\s+pgid ${h.processGroupId}`));
      // the tree, in order: wrapper at the top, the adapter under it, the grandchild under the adapter
      const row = (pid: number) => out.split("\n").find((l) => l.trimStart().startsWith(`${pid} `));
      const wrapper = row(h.rootPid);
      const adapter = row(pids.pid);
      const grandchild = row(pids.grandchildPid!);
      expect(wrapper).toMatch(new RegExp(`\\d+s\\s+both\\s+wrapper\\s+${WRAPPER_COMM_RE}$`));
      expect(adapter).toMatch(new RegExp(`\\d+s\\s+both\\s+adapter\\s+└─ ${NODE_COMM_RE}$`));
      expect(grandchild).toMatch(/\d+s\s+both\s+└─ sleep$/);
      const lines = out.split("\n");
      expect(lines.indexOf(wrapper!)).toBeLessThan(lines.indexOf(adapter!));
      expect(lines.indexOf(adapter!)).toBeLessThan(lines.indexOf(grandchild!));
      expect(grandchild!.indexOf("└─")).toBe(adapter!.indexOf("└─") + 3);
      expect(out).toMatch(
        /verdict owned: the live root matches the lease \(\d+ matching checks\); 3 verified processes/,
      );
      for (const check of ["root-alive", "start-time", "wrapper-path", "lease-env", "command-hash"])
        expect(out).toMatch(new RegExp(`^\\s+${check}\\s+match`, "m"));
    } finally {
      await ctl.dispose();
    }
  });

  it("--json: one object with the lease, the verified processes (roles, comm, markers, ages) and the evidence", async () => {
    await setup();
    try {
      const r = await cli(["status", "--state-dir", dir, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.split("\n")).toHaveLength(2);
      const view = JSON.parse(r.stdout) as StatusView;
      expect(view.stateDir).toBe(dir);
      expect(view.leases).toHaveLength(1);
      const l = view.leases[0]!;
      expect(l.lease).toMatchObject({
        leaseId: h.leaseId,
        state: "open",
        sessionKey: "agent:main:acp:status",
        gatewayInstanceId: h.owner.gatewayInstanceId,
        rootPid: h.rootPid,
      });
      expect(l).toMatchObject({ verdict: "owned", live: "tree" });
      expect(l.ageMs).toBeGreaterThanOrEqual(0);
      expect(l.processes.map((p) => [p.pid, p.role, p.markers, p.depth])).toEqual([
        [h.rootPid, "wrapper", "match", 0],
        [pids.pid, "adapter", "match", 1],
        [pids.grandchildPid, "descendant", "match", 2],
      ]);
      expect(l.processes.map((p) => p.comm).slice(1)).toEqual([NODE_COMM, "sleep"]);
      expect(l.processes[0]!.comm).toMatch(new RegExp(`^${WRAPPER_COMM_RE}$`));
      for (const p of l.processes) {
        expect(p.startTime).toMatch(/^\d+$/);
        if (p.startedAt !== null) expect(Math.abs(p.startedAt - Date.now())).toBeLessThan(120_000);
      }
      expect(l.evidence).toContainEqual(expect.objectContaining({ check: "start-time", result: "match" }));
      // read-only: the session is untouched and still usable
      expect([h.rootPid, pids.pid, pids.grandchildPid!].every(alive)).toBe(true);
      expect(await ctl.prompt(h, "still here")).toEqual({ stopReason: "end_turn" });

      // after a close: the lease is settled, nothing is alive, status says so in both forms
      await ctl.closeSession({ handle: h });
      const after = JSON.parse((await cli(["status", "--state-dir", dir, "--json"])).stdout) as StatusView;
      expect(after.leases[0]).toMatchObject({ live: "none", processes: [], verdict: "gone" });
      expect(after.leases[0]!.lease.state).toBe("closed");
      const text = await cli(["status", "--state-dir", dir]);
      expect(text.stdout).toMatch(/settled, nothing alive \(1\):/);
      expect(text.stdout).toMatch(
        new RegExp(`${h.leaseId}\\s+closed\\s+age \\d+s\\s+verdict gone\\s+agent:main:acp:status`),
      );
    } finally {
      await ctl.dispose();
    }
  });

  it.skipIf(!hasScript)(
    `colour on a terminal, none under NO_COLOR${hasScript ? "" : " [skipped: no util-linux script for a pseudo-terminal]"}`,
    async () => {
      await setup();
      try {
        const tty = await onTty(["status", "--state-dir", dir], { NO_COLOR: "" });
        expect(tty.code, tty.stderr).toBe(0);
        expect(tty.stdout).toContain(h.leaseId);
        expect(tty.stdout).toMatch(/\x1b\[32mopen\x1b\[0m/);
        const noColor = await onTty(["status", "--state-dir", dir], { NO_COLOR: "1" });
        expect(noColor.stdout).toContain(h.leaseId);
        expect(noColor.stdout).not.toMatch(ANSI);
      } finally {
        await ctl.dispose();
      }
    },
  );

  it("--watch redraws every second until SIGINT, then exits 0; with --json one object per line", async () => {
    await setup();
    try {
      for (const json of [false, true]) {
        const child = spawn(
          process.execPath,
          [MAIN, "status", "--state-dir", dir, "--watch", ...(json ? ["--json"] : [])],
          { stdio: ["ignore", "pipe", "pipe"] },
        );
        let out = "";
        let err = "";
        child.stdout.on("data", (d: Buffer) => void (out += d.toString()));
        child.stderr.on("data", (d: Buffer) => void (err += d.toString()));
        const frames = () =>
          json ? out.split("\n").filter((l) => l.startsWith("{")).length : (out.match(/^backend: /gm) ?? []).length;
        expect(await waitFor(() => frames() >= 2, 15_000), `frames: ${out}${err}`).not.toBe(-1);
        const code = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
        child.kill("SIGINT");
        expect(await code).toBe(0);
        expect(err).toBe("");
        if (json)
          for (const l of out.trim().split("\n"))
            expect((JSON.parse(l) as StatusView).leases[0]!.lease.leaseId).toBe(h.leaseId);
        else expect(out).toMatch(/every 1 s, Ctrl-C to stop/);
      }
    } finally {
      await ctl.dispose();
    }
  });
});

describe("proclease status without leases", () => {
  it("an empty or missing state dir: says so, exits 0, creates nothing", async () => {
    const parent = tempStateDir("cli-status-empty");
    const dir = join(parent, "typo");
    const r = await cli(["status", "--state-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/no lease store under .*typo/);
    expect(JSON.parse((await cli(["status", "--state-dir", dir, "--json"])).stdout)).toMatchObject({
      leases: [],
      stateDir: dir,
    });
    expect(existsSync(dir)).toBe(false);
    expect(readdirSync(parent)).toEqual([]);
  });

  it("tree connectors: ├─ for a sibling still to come, │ under an open branch, └─ for the last", () => {
    expect(treePrefixes([0, 1, 2, 1, 2, 0])).toEqual(["", "├─ ", "│  └─ ", "└─ ", "   └─ ", ""]);
  });
});
