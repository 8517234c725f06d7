/**
 * Real processes: PID reuse forced in a private PID
 * namespace, a stubborn grandchild reaped TERM → KILL, a setsid escapee found
 * by its env marker and reaped. Root-only; skipped with a printed reason
 * otherwise. Parameterised over the exact-identity backends (native, procfs).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createSignaller, getProcessFacts, loadNative } from "../../src/facts/index.js";
import type { FactsBackend, ProcessFacts } from "../../src/facts/types.js";
import { isAliveSync } from "../helpers/liveness.js";
import {
  computeCommandHash,
  explainLease,
  openLeaseStore,
  killLeaseVerification,
  killOwnedTree,
  verifyLeases,
  type AcpxProcessLease,
} from "../../src/ownership/index.js";

const TREE = fileURLToPath(new URL("../fixtures/ownership/tree.mjs", import.meta.url));
const NS_FIXTURE = fileURLToPath(new URL("../fixtures/ownership/pid-reuse-ns.mjs", import.meta.url));
const DIST = fileURLToPath(new URL("../../dist", import.meta.url));
const isRoot = process.getuid?.() === 0;
const isLinux = process.platform === "linux";
const skipReason = !isLinux
  ? "not Linux"
  : !isRoot
    ? "not root (needs root for unshare/ns_last_pid and to see every process)"
    : null;
if (skipReason) console.log(`ownership real-OS tests skipped: ${skipReason}`);

const backends: FactsBackend[] = ["procfs"];
if (isLinux && loadNative() !== null) backends.unshift("native");

const spawned: { pid: number; facts: ProcessFacts; startTime: string }[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  // kill what this test spawned and is still alive, identity-checked by start time
  for (const s of spawned.splice(0)) {
    const d = await s.facts.inspect(s.pid).catch(() => null);
    if (d && d.startTime === s.startTime && d.state !== "Z") {
      try {
        process.kill(s.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

async function startTree(
  mode: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; report: Record<string, number> }> {
  const child = spawn(process.execPath, [TREE, "wrapper", mode], {
    detached: true,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const report = await new Promise<Record<string, number>>((resolve, reject) => {
    let buf = "";
    child.stdout!.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl !== -1) resolve(JSON.parse(buf.slice(0, nl)) as Record<string, number>);
    });
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`wrapper exited early (${code})`)));
  });
  return { child, report };
}

async function track(facts: ProcessFacts, pids: number[]): Promise<void> {
  for (const pid of pids) {
    const d = await facts.inspect(pid);
    if (d) spawned.push({ pid, facts, startTime: d.startTime });
  }
}

async function leaseFor(
  stateDir: string,
  facts: ProcessFacts,
  mode: string,
): Promise<{ lease: AcpxProcessLease; report: Record<string, number> }> {
  const store = await openLeaseStore(stateDir, { durable: false });
  let lease = await store.create({
    kind: "acpx",
    gatewayInstanceId: "gw-test",
    sessionKey: `real:${mode}`,
    wrapperRoot: dirname(TREE),
    wrapperPath: TREE,
    commandHash: computeCommandHash([process.execPath, TREE, "wrapper", mode]),
  });
  const { child, report } = await startTree(mode, {
    OPENCLAW_ACPX_LEASE_ID: lease.leaseId,
    OPENCLAW_GATEWAY_INSTANCE_ID: "gw-test",
  });
  await track(facts, Object.values(report));
  const d = (await facts.inspect(child.pid!))!;
  lease = await store.update(lease.leaseId, {
    rootPid: child.pid!,
    processGroupId: report.adapter!,
    rootStartTime: d.startTime,
    ...(d.bootId ? { bootId: d.bootId } : {}),
    ...(d.pidNamespace ? { pidNamespace: d.pidNamespace } : {}),
  });
  return { lease, report };
}

/** live processes whose environment carries the lease id (a test's own cleanup and check) */
function carriersOf(leaseId: string): number[] {
  if (leaseId === "") return [];
  const marker = `OPENCLAW_ACPX_LEASE_ID=${leaseId}\0`;
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, "latin1").includes(marker) && !isZombie(pid);
      } catch {
        return false;
      }
    });
}

function isZombie(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.startsWith("Z") ?? true;
  } catch {
    return true;
  }
}

async function waitFor<T>(probe: () => Promise<T | null>, ms = 5000): Promise<T | null> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null || Date.now() >= end) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Gone by the tests' own /proc oracle (test/helpers/liveness.ts), or its pid
 * now names another process (a start time in the backend's unit that differs).
 */
async function waitGone(facts: ProcessFacts, pid: number, startTime: string, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!isAliveSync(pid)) return true;
    const d = await facts.inspect(pid);
    if (d !== null && d.startTime !== startTime) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

describe.skipIf(skipReason !== null)(`real processes${skipReason !== null ? ` (skipped: ${skipReason})` : ""}`, () => {
  it("forced PID reuse in a private PID namespace: verification refuses the impostor, the production reap and a stale-tree reaper leave it alone", () => {
    expect(existsSync(join(DIST, "index.js")), "dist/ missing: run `npm run build` first (npm test does)").toBe(true);
    for (const backend of backends) {
      const out = execFileSync(
        "unshare",
        ["--pid", "--fork", "--mount-proc", process.execPath, NS_FIXTURE, DIST, backend],
        {
          encoding: "utf8",
          timeout: 25_000,
        },
      );
      const r = JSON.parse(out.trim().split("\n").pop()!) as Record<string, unknown>;
      expect(r.error, String(r.error)).toBeUndefined();
      expect(r.self).toBe(1); // really in a fresh namespace
      expect(r.verdictBefore).toBe("owned");
      expect(r.impostor, "the impostor got the dead root's pid").toBe(r.victim);
      expect(r.verdictAfter).toBe("mismatch");
      expect(r.treeAfter).toBe(false);
      expect(r.failedCheck).toBe("start-time");
      // production path: a reused root pid has no remnants, so nothing at all is handed to the signaller,
      // though the impostor and a bystander both carry the lease's markers under our uid
      expect(r.remnantsAfter).toBeNull();
      expect(r.prodTarget).toBeNull();
      expect(r.prodCalls).toBe(0);
      expect(r.bystanderAlive).toBe(true);
      expect(r.kill).toEqual(["identity-mismatch"]);
      expect(r.termSent).toBe(0);
      expect(r.killSent).toBe(0);
      expect(r.impostorAlive).toBe(true);
    }
  });

  for (const backend of backends) {
    describe(`backend ${backend}`, () => {
      const facts = () => getProcessFacts({ backend });
      const signaller = () => createSignaller(facts(), backend === "native" ? loadNative() : null);

      it("a stubborn grandchild that ignores SIGTERM is reaped TERM → KILL", async () => {
        const dir = await mkdtemp(join(tmpdir(), "own-real-"));
        try {
          const f = facts();
          const { lease, report } = await leaseFor(dir, f, "stubborn");
          const v = await explainLease(lease, f, { gatewayInstanceId: "gw-test" });
          expect(v.verdict, JSON.stringify(v.evidence)).toBe("owned");
          const pids = v.tree!.members.map((m) => m.pid);
          expect(pids).toEqual([report.grandchild, report.adapter, report.wrapper]);
          expect(v.evidence.filter((e) => e.result === "match").map((e) => e.check)).toEqual(
            expect.arrayContaining([
              "start-time",
              "wrapper-path",
              "lease-env",
              "command-hash",
              "process-group",
              "boot-id",
              "pid-namespace",
            ]),
          );
          const r = await killOwnedTree(v.tree!, { facts: f, signaller: signaller(), graceMs: 600, pollMs: 25 });
          expect(r.results.map((x) => [x.pid, x.outcome])).toEqual([
            [report.grandchild, "killed"],
            [report.adapter, "exited-after-term"],
            [report.wrapper, "exited-after-term"],
          ]);
          expect(r.termSent).toBe(3);
          expect(r.killSent).toBe(1);
          for (const m of v.tree!.members) expect(await waitGone(f, m.pid, m.startTime)).toBe(true);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      });

      it("wrapper SIGKILLed: explainLease says gone with remnants, killLeaseVerification leaves nothing alive", async () => {
        const dir = await mkdtemp(join(tmpdir(), "own-real-"));
        try {
          const f = facts();
          const { lease, report } = await leaseFor(dir, f, "stubborn");
          const adapter = (await f.inspect(report.adapter!))!;
          const grandchild = (await f.inspect(report.grandchild!))!;
          process.kill(report.wrapper!, "SIGKILL");
          expect(await waitGone(f, report.wrapper!, lease.rootStartTime!)).toBe(true);
          // the adapter is re-parented away from the dead wrapper: only its env markers tie it to the lease now
          expect(
            await waitFor(async () => ((await f.inspect(adapter.pid))?.ppid !== report.wrapper ? true : null)),
          ).toBe(true);
          const v = await explainLease(lease, f, { gatewayInstanceId: "gw-test" });
          expect(v.verdict, JSON.stringify(v.evidence)).toBe("gone");
          expect(v.tree).toBeNull();
          expect(
            v.remnants?.members.map((m) => m.pid),
            JSON.stringify(v.evidence),
          ).toEqual([grandchild.pid, adapter.pid]);
          expect(v.remnants!.members.map((m) => m.startTime)).toEqual([grandchild.startTime, adapter.startTime]);
          expect(v.evidence.filter((e) => e.check.startsWith("remnant-")).map((e) => [e.check, e.result])).toEqual([
            ["remnant-env", "match"],
            ["remnant-start", "match"],
          ]);
          const r = await killLeaseVerification(v, { facts: f, signaller: signaller(), graceMs: 600, pollMs: 25 });
          expect(r.target).toBe("remnants");
          expect(r.report!.results.map((x) => [x.pid, x.outcome])).toEqual([
            [grandchild.pid, "killed"],
            [adapter.pid, "exited-after-term"],
          ]);
          expect(await waitGone(f, grandchild.pid, grandchild.startTime)).toBe(true);
          expect(await waitGone(f, adapter.pid, adapter.startTime)).toBe(true);
          // nothing left that carries the lease's markers
          expect((await explainLease(lease, f, { gatewayInstanceId: "gw-test" })).remnants).toBeNull();
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      });

      it("a relay whose every link forks the next, detached, as it is TERMed is killed to its last link: each remnant kill is followed by one more verification", async () => {
        const dir = await mkdtemp(join(tmpdir(), "own-real-"));
        let leaseId = "";
        try {
          const f = facts();
          const { lease } = await leaseFor(dir, f, "relay");
          leaseId = lease.leaseId;
          const v = await explainLease(lease, f, { gatewayInstanceId: "gw-test" });
          expect(v.verdict, JSON.stringify(v.evidence)).toBe("owned");
          await killLeaseVerification(v, { facts: f, signaller: signaller(), graceMs: 600, pollMs: 25 });
          // the last link ignores SIGTERM: only a verification after the kill that made it finds it
          const left = await waitFor(async () => (carriersOf(leaseId).length === 0 ? true : null), 3000);
          expect(left, `alive with the lease's markers: ${carriersOf(leaseId).join(" ")}`).toBe(true);
        } finally {
          for (const pid of carriersOf(leaseId)) process.kill(pid, "SIGKILL");
          await rm(dir, { recursive: true, force: true });
        }
      });

      it("a setsid escapee (double fork) is found by its env marker and reaped", async () => {
        const dir = await mkdtemp(join(tmpdir(), "own-real-"));
        try {
          const f = facts();
          const { lease, report } = await leaseFor(dir, f, "escapee");
          // wait for the launcher to exit so the escapee is re-parented away from our tree
          expect(await waitGone(f, report.launcher!, (await f.inspect(report.launcher!))?.startTime ?? "")).toBe(true);
          // a dying launcher can vanish from inspect a moment before the kernel re-parents its child: poll for that too
          const esc = (await waitFor(async () => {
            const d = await f.inspect(report.escapee!);
            return d && d.ppid !== report.launcher ? d : null;
          }))!;
          expect(esc.pgid).toBe(report.escapee); // its own session and group
          expect([report.adapter, report.launcher, report.wrapper]).not.toContain(esc.ppid); // no parent link to us
          const [v] = await verifyLeases([lease], f, { gatewayInstanceId: "gw-test" });
          expect(v!.verdict, JSON.stringify(v!.evidence)).toBe("owned");
          expect(v!.evidence.find((e) => e.check === "env-marker")?.result, JSON.stringify(v!.evidence)).toBe("match");
          const pids = v!.tree!.members.map((m) => m.pid);
          expect(pids).toContain(report.escapee);
          expect(pids[pids.length - 1]).toBe(report.wrapper);
          const r = await killOwnedTree(v!.tree!, { facts: f, signaller: signaller(), graceMs: 2000 });
          expect(r.results.find((x) => x.pid === report.escapee)?.outcome).toBe("exited-after-term");
          expect(r.killSent).toBe(0);
          expect(await waitGone(f, esc.pid, esc.startTime)).toBe(true);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      });
    });
  }
});
