/**
 * The lease operator commands, run as an operator runs them
 * (`node dist/cli/main.js …`), against a real session in a temp state dir:
 * leases (state + live verdict), explain (evidence table + what cleanup would
 * do), reap (dry run, and never a session a live gateway holds), and demo.
 */
import { execFile } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openLeaseStore } from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  cleanupAll,
  GRACE_MS,
  leaseCarriers,
  spawnSupervisorStyleRun,
  tempStateDir,
  orphanByKillingGatewayAndWrapper,
  trackLease,
} from "../acpx/controller-helpers.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
/** `timeoutMs` is a kill switch for a hung CLI, not a performance bound: the demo runs a whole story of real processes. */
function cli(args: string[], env: Record<string, string> = {}, timeoutMs = 25_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { env: { ...process.env, ...env }, timeout: timeoutMs, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

afterAll(() => cleanupAll());

/** `explain --json`: the dry run's outcome for one lease (its action, code, target, wouldKill, stateAfter) with the lease. */
async function explainJson(leaseId: string, dir: string): Promise<Record<string, unknown> & { wouldKill?: number[] }> {
  const r = await cli(["explain", leaseId, "--state-dir", dir, "--json"]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown> & { wouldKill?: number[] };
}

describe("proclease leases / explain / reap", () => {
  it("an empty state dir: no lease store, nothing to explain", async () => {
    const dir = tempStateDir("cli-empty");
    const r = await cli(["leases", "--state-dir", dir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/no lease store/);
    const viaEnv = await cli(["leases", "--json"], { PROCLEASE_STATE_DIR: dir });
    expect(JSON.parse(viaEnv.stdout)).toMatchObject({ stateDir: dir, leases: [] });
    const e = await cli(["explain", "no-such-lease", "--state-dir", dir]);
    expect(e.code).toBe(1);
    expect(e.stderr).toMatch(/no lease "no-such-lease"/);
    expect((await cli(["explain", "--state-dir", dir])).code).toBe(2);
  });

  it("shows a live session's lease, explains it by id and by pid, and reap leaves it alone", async () => {
    expect(existsSync(MAIN)).toBe(true);
    const dir = tempStateDir("cli-live");
    const ctl = await createAcpxLifecycleController({ stateDir: dir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    try {
      const h = await ctl.ensureSession({
        sessionKey: "agent:main:acp:cli",
        agentId: "main",
        command: agentArgv({ kind: "plain" }),
      });
      trackLease(h.leaseId);

      const json = JSON.parse((await cli(["leases", "--state-dir", dir, "--json"])).stdout) as {
        leases: { leaseId: string; state: string; verdict: string }[];
      };
      expect(json.leases).toEqual([expect.objectContaining({ leaseId: h.leaseId, state: "open", verdict: "owned" })]);
      const human = await cli(["leases", "--state-dir", dir]);
      expect(human.stdout).toMatch(new RegExp(`${h.leaseId}\\s+open\\s+owned\\s+${h.rootPid}`));

      const byId = await cli(["explain", h.leaseId, "--state-dir", dir]);
      expect(byId.code).toBe(0);
      expect(byId.stdout).toMatch(/root-alive\s+match/);
      expect(byId.stdout).toMatch(/start-time\s+match/);
      expect(byId.stdout).toMatch(/wrapper-path\s+match/);
      expect(byId.stdout).toMatch(/verdict: owned/);
      // a live gateway holds the state dir: explain says what reap would do (with --force: leave it, attached to its live parent)
      expect(await explainJson(h.leaseId, dir)).toMatchObject({
        found: true,
        action: "skipped-live",
        code: "attached-to-live-parent",
        stateAfter: "open",
      });
      const byPid = await cli(["explain", String(h.rootPid), "--state-dir", dir]);
      expect(byPid.stdout).toContain(`lease ${h.leaseId}`);
      const stranger = await cli(["explain", String(process.pid), "--state-dir", dir]);
      expect(stranger.code).toBe(1);
      expect(stranger.stderr).toMatch(/not named by any open or closing lease.*cleanup would never signal it/);

      const dry = await cli(["reap", "--dry-run", "--state-dir", dir]);
      expect(dry.code).toBe(0);
      expect(dry.stdout).toMatch(/a gateway \(pid \d+\) holds this state dir: reap would refuse without --force/);
      expect(dry.stdout).toMatch(/dry run: examined 1 open\/closing lease of instance/);
      // a dry run says only what would happen: no state transition, no past-tense action
      expect(dry.stdout).toMatch(/LEASE\s+ROOT\s+VERDICT\s+WOULD/);
      expect(dry.stdout).toMatch(
        new RegExp(`${h.leaseId}\\s+${h.rootPid}\\s+owned\\s+skip it\\s+open \\(unchanged\\)`),
      );
      expect(dry.stdout).not.toMatch(/→|skipped-live/);
      // one gateway per state dir: a real reap refuses while the gateway holds it…
      const refused = await cli(["reap", "--state-dir", dir, "--json"]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(new RegExp(`a gateway \\(pid ${process.pid}\\) holds`));
      // …and with --force it leaves alone what the live gateway is using
      const real = await cli(["reap", "--force", "--state-dir", dir, "--json"]);
      const rep = JSON.parse(real.stdout) as { snapshots: number; entries: { action: string }[] };
      expect(rep.entries.map((e) => e.action)).toEqual(["skipped-live"]);
      expect(rep.snapshots).toBe(1);
      expect(alive(h.rootPid)).toBe(true);
      expect(await ctl.prompt(h, "still usable")).toEqual({ stopReason: "end_turn" });

      await ctl.closeSession({ handle: h });
      const after = await cli(["explain", h.leaseId, "--state-dir", dir]);
      expect(after.stdout).toMatch(/state closed/);
      expect(after.stdout).toMatch(/verdict: gone/);
      expect(await explainJson(h.leaseId, dir)).toMatchObject({
        found: true,
        action: "left-alone",
        code: "already-settled",
        stateAfter: "closed",
        settledAs: "killed",
      });
    } finally {
      await ctl.dispose();
    }
  });
});

describe("explain / reap when the wrapper is gone, and when its pid does not match", () => {
  interface ReapJson {
    entries: {
      leaseId: string;
      verdict: string;
      action: string;
      stateAfter: string;
      kill?: { results: { pid: number }[] } | null;
    }[];
  }

  it("gone wrapper with escaped processes: explain lists the remnants, reap reaps them and closes the lease", async () => {
    const dir = tempStateDir("cli-remnants");
    const { h, pids } = await orphanByKillingGatewayAndWrapper(dir);
    expect(alive(pids.grandchildPid!)).toBe(true);

    const ex = await cli(["explain", h.leaseId, "--state-dir", dir]);
    expect(ex.code).toBe(0);
    expect(ex.stdout).toMatch(/verdict: gone/);
    const plan = await explainJson(h.leaseId, dir);
    expect(plan).toMatchObject({
      found: true,
      verdict: "gone",
      action: "killed-remnants",
      target: "remnants",
      code: "would-kill",
      stateAfter: "closed",
    });
    expect(plan.wouldKill).toContain(pids.grandchildPid);
    expect(alive(pids.grandchildPid!)).toBe(true); // explain is read-only

    const rep = JSON.parse(
      (await cli(["reap", "--state-dir", dir, "--json", "--grace-ms", String(GRACE_MS)])).stdout,
    ) as ReapJson;
    const entry = rep.entries.find((e) => e.leaseId === h.leaseId)!;
    expect(entry).toMatchObject({ verdict: "gone", action: "killed-remnants", stateAfter: "closed" });
    expect(entry.kill!.results.map((m) => m.pid)).toContain(pids.grandchildPid);
    expect(alive(pids.grandchildPid!)).toBe(false);
    expect(leaseCarriers(h.leaseId)).toEqual([]);
  });

  it("a root whose start time does not match: no remnants, explain promises no signal, reap marks it lost and signals nothing", async () => {
    const dir = tempStateDir("cli-mismatch");
    // uncontained: the faked reuse below would be overruled by the lease's cgroup, which the kernel keeps (containment.test.ts)
    const ctl = await createAcpxLifecycleController({
      stateDir: dir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      containment: "off",
    });
    try {
      const h = await ctl.ensureSession({
        sessionKey: "agent:main:acp:mm",
        agentId: "main",
        command: agentArgv({ kind: "plain" }),
      });
      trackLease(h.leaseId);
      const carriers = leaseCarriers(h.leaseId);
      expect(carriers).toContain(h.rootPid);
      // as if the recorded pid had been reused: same pid, another start time
      await (await openLeaseStore(dir)).update(h.leaseId, { rootStartTime: "1" });

      const ex = await cli(["explain", h.leaseId, "--state-dir", dir]);
      expect(ex.stdout).toMatch(/start-time\s+mismatch/);
      expect(ex.stdout).toMatch(/verdict: mismatch/);
      // no remnants, no signal: the lease would go to lost as not ours
      const plan = await explainJson(h.leaseId, dir);
      expect(plan).toMatchObject({
        found: true,
        verdict: "mismatch",
        action: "marked-lost",
        code: "not-ours",
        settledAs: "not-ours",
        stateAfter: "lost",
        target: null,
      });
      expect(plan.wouldKill).toBeUndefined();

      await ctl.dispose(); // the gateway lets go of the state dir (its session keeps running)
      const rep = JSON.parse(
        (await cli(["reap", "--state-dir", dir, "--json", "--grace-ms", String(GRACE_MS)])).stdout,
      ) as ReapJson;
      const entry = rep.entries.find((e) => e.leaseId === h.leaseId)!;
      expect(entry).toMatchObject({ verdict: "mismatch", action: "marked-lost", stateAfter: "lost" });
      expect(entry.kill ?? null).toBeNull(); // no kill ran
      // every process carrying the lease markers is still running: nothing was signalled
      expect(carriers.every(alive)).toBe(true);
    } finally {
      await ctl.dispose();
    }
  });
});

describe("a process-supervisor run in the same store", () => {
  it("reap examines it through the same lifecycle, and leaves it alone while its gateway (the root's parent) is alive; explain says so", async () => {
    const dir = tempStateDir("cli-supervisor");
    const { lease, pid } = await spawnSupervisorStyleRun(dir, "x");
    const rep = JSON.parse(
      (await cli(["reap", "--state-dir", dir, "--json", "--grace-ms", String(GRACE_MS)])).stdout,
    ) as {
      examined: number;
      entries: { leaseId: string; action: string; stateAfter: string }[];
    };
    expect(rep).toMatchObject({
      examined: 1,
      entries: [expect.objectContaining({ leaseId: lease.leaseId, action: "skipped-live", stateAfter: "open" })],
    });
    expect(alive(pid)).toBe(true);
    const ex = await cli(["explain", lease.leaseId, "--state-dir", dir]);
    expect(ex.code).toBe(0);
    expect(ex.stdout).toMatch(/verdict: owned/);
    expect(await explainJson(lease.leaseId, dir)).toMatchObject({
      found: true,
      lease: { kind: "supervisor" },
      action: "skipped-live",
      code: "attached-to-live-parent",
    });
    const listed = JSON.parse((await cli(["leases", "--state-dir", dir, "--json"])).stdout) as {
      leases: { leaseId: string; state: string }[];
    };
    expect(listed.leases).toEqual([expect.objectContaining({ leaseId: lease.leaseId, state: "open" })]);
  });
});

describe("proclease demo", () => {
  it("runs the whole story and verifies every step (exit 0); keeps its state dir and prints the commands to look at it", async () => {
    const r = await cli(["demo", "--grace-ms", "400"], {}, 110_000);
    expect(r.stderr).toBe("");
    expect(r.stdout).toMatch(/every step verified\./);
    expect(r.stdout).not.toMatch(/FAIL/);
    expect(r.stdout).toMatch(/\b1 snapshot\b/);
    // the conversation act: streamed reply, permission, terminal grandchild gone, resume after SIGKILL
    expect(r.stdout).toMatch(/reply so far: permission: allow\. Done\./);
    expect(r.stdout).toMatch(/permission asked for "Write notes\.txt": answered Allow once/);
    expect(r.stdout).toMatch(/ok {3}after the close the terminal's grandchild \d+ is gone and its lease settled/);
    expect(r.stdout).toMatch(/ok {3}the next gateway resumed the same agent session \(session\/resume\)/);
    expect(r.code).toBe(0);
    const kept = /the state dir is kept at (\S+) \(--clean deletes it\)/.exec(r.stdout);
    expect(kept).not.toBeNull();
    const dir = kept![1]!;
    try {
      expect(existsSync(join(dir, "acpx", "leases"))).toBe(true);
      const cmds = r.stdout
        .slice(kept!.index)
        .split("\n")
        .slice(1, 4)
        .map((l) => l.trim());
      expect(cmds[0]).toMatch(new RegExp(`^node \\S*main\\.js status --state-dir ${dir}$`));
      expect(cmds[1]).toMatch(new RegExp(`^node \\S*main\\.js leases --state-dir ${dir}$`));
      expect(cmds[2]).toMatch(new RegExp(`^node \\S*main\\.js explain [0-9a-f-]{36} --state-dir ${dir}$`));
      // the printed commands work: the status of the kept dir shows the demo's seven settled leases
      // (three sessions and a terminal in the conversation act, three sessions in the lifecycle story)
      const status = JSON.parse((await cli(["status", "--state-dir", dir, "--json"])).stdout) as {
        leases: { lease: { state: string } }[];
      };
      expect(status.leases).toHaveLength(7);
      expect(status.leases.every((l) => l.lease.state === "closed" || l.lease.state === "lost")).toBe(true);
      const explained = await cli([...cmds[2]!.split(" ").slice(2)]);
      expect(explained.code, explained.stderr).toBe(0);
      expect(explained.stdout).toMatch(/verdict: /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);

  it("--clean deletes the state dir; --keep with --clean is a usage error", async () => {
    const both = await cli(["demo", "--keep", "--clean"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--keep and --clean/);
    const r = await cli(["demo", "--grace-ms", "400", "--clean"], {}, 110_000);
    expect(r.code, r.stderr).toBe(0);
    const dir = /state dir (\S+),/.exec(r.stdout)![1]!;
    expect(existsSync(dir)).toBe(false);
    expect(r.stdout).not.toMatch(/state dir is kept/);
  }, 150_000);
});
