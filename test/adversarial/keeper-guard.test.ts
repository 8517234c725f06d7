/**
 * The keeper holds against an agent of the gateway's uid (issue 46, findings
 * 15 and 16):
 * - an agent SIGKILLs the keeper, then the gateway dies: a new keeper was
 *   started with a warning, and it ends the gateway's session, terminal and
 *   supervisor run and settles their leases;
 * - an agent SIGSTOPs the keeper: the gateway resumes it, and it does the same;
 * - a secret removed from an adapter with envRemove is not in the keeper's
 *   environment (it runs with PATH and the PROCLEASE_* switches only);
 * - the keeper is not dumpable, and a gateway that calls
 *   makeProcessNonDumpable() is not either: run as uid 65534, another
 *   process of that uid cannot read their /proc/<pid>/environ.
 * Real processes; build first (`npm run build`).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { keeperPid } from "../../src/ownership/keeper/keeper.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  environOf,
  leaseCarriers,
  ROOT,
  tempStateDir,
  trackChild,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const GRACE_MS = 500;

/** Live keeper processes serving `stateDir`, by their command line (its config names the state dir). */
function keepersOf(stateDir: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
      if (argv.some((a) => a.endsWith("keeper-main.cjs")) && argv.some((a) => a.includes(JSON.stringify(stateDir))))
        if (alive(Number(d))) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

interface Started {
  gateway: number;
  keeper: number | null;
  handle: AcpRuntimeHandle;
  agent: { pid: number; grandchildPid: number | null };
  terminalChild: number;
  terminalLease: string | null;
  run: { root: number; grandchild: number; leaseId: string | null };
}

async function startGateway(stateDir: string): Promise<{ s: Started; gw: ChildProcess; stderr: () => string }> {
  const gw = trackChild(
    spawn(process.execPath, [join(ROOT, "test/fixtures/adversarial/keeper-gateway.mjs"), stateDir, String(GRACE_MS)], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    }),
  );
  let err = "";
  gw.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<never>((_, reject) =>
    gw.once("exit", (code) => reject(new Error(`the stand-in gateway exited early (code ${code}): ${err}`))),
  );
  const first = (async () => {
    for await (const line of createInterface({ input: gw.stdout! })) return JSON.parse(line) as Started;
    throw new Error("the stand-in gateway printed nothing");
  })();
  const s = await Promise.race([first, exited]);
  for (const id of [s.handle.leaseId, s.terminalLease, s.run.leaseId]) if (id) trackLease(id);
  for (const pid of [s.keeper, s.agent.pid, s.agent.grandchildPid, s.terminalChild, s.run.root, s.run.grandchild])
    trackPid(pid);
  return { s, gw, stderr: () => err };
}

/** SIGKILLs the stand-in gateway: `keeper` ends its session, terminal and run (every process gone, every lease settled, no carrier left) and exits. */
async function gatewayDeathEndsAll(stateDir: string, s: Started, keeper: number): Promise<void> {
  const pids = [s.handle.rootPid, s.agent.pid, s.agent.grandchildPid!, s.terminalChild, s.run.root, s.run.grandchild];
  const leaseIds = [s.handle.leaseId, s.terminalLease!, s.run.leaseId!];
  process.kill(s.gateway, "SIGKILL");
  expect(
    await waitFor(() => !pids.some(alive), 30_000, 10),
    `still alive: ${JSON.stringify(pids.filter(alive))}`,
  ).not.toBe(-1);
  expect(await waitFor(() => !alive(keeper), 15_000), "the keeper exits once it settled").not.toBe(-1);
  const store = await openLeaseStore(stateDir);
  for (const id of leaseIds) expect(["closed", "lost"], `lease ${id}`).toContain((await store.get(id))?.state);
  for (const id of leaseIds) expect(leaseCarriers(id), `carriers of ${id}`).toEqual([]);
}

describe("a keeper killed while its gateway lives", () => {
  it("is started again with a warning, and the new one ends what the gateway started when the gateway dies", async () => {
    const stateDir = tempStateDir("keeper-restart-kill");
    const { s, stderr } = await startGateway(stateDir);
    expect(s.keeper).not.toBeNull();
    process.kill(s.keeper!, "SIGKILL");
    let next: number | undefined;
    const restarted = await waitFor(() => {
      next = keepersOf(stateDir).find((p) => p !== s.keeper);
      return next !== undefined;
    }, 15_000);
    expect(restarted, "a new keeper for the state dir").not.toBe(-1);
    trackPid(next);
    expect(await waitFor(() => /the keeper died while its gateway lives/.test(stderr()), 5000)).not.toBe(-1);

    await gatewayDeathEndsAll(stateDir, s, next!);
  });
});

describe("a keeper stopped while its gateway lives", () => {
  it("is resumed (SIGCONT from its gateway), and ends what the gateway started when the gateway dies", async () => {
    const stateDir = tempStateDir("keeper-stopped");
    const { s } = await startGateway(stateDir);
    expect(s.keeper).not.toBeNull();
    const state = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0];
    process.kill(s.keeper!, "SIGSTOP");
    expect(await waitFor(() => state(s.keeper!) === "T", 5000, 1), "the keeper stopped").not.toBe(-1);
    expect(await waitFor(() => state(s.keeper!) !== "T", 5000, 10), "the keeper resumed").not.toBe(-1);

    await gatewayDeathEndsAll(stateDir, s, s.keeper!);
  });
});

describe("the keeper's environment", () => {
  it("holds no secret of the gateway's: a key removed with envRemove is neither in the adapter's nor in the keeper's", async () => {
    const secretKey = "ACME_TEST_API_KEY";
    const saved = process.env[secretKey];
    process.env[secretKey] = "sk-keeper-must-not-see-this";
    try {
      const stateDir = tempStateDir("keeper-env");
      const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
      controllers.push(ctl);
      const h = await ctl.ensureSession({
        sessionKey: "k-env",
        agentId: "main",
        command: agentArgv({}),
        envRemove: [secretKey],
      });
      trackLease(h.leaseId);
      const keeper = keeperPid(stateDir);
      expect(keeper).toBeDefined();
      trackPid(keeper);
      expect(environOf(h.rootPid).has(secretKey)).toBe(false);
      const env = environOf(keeper!);
      expect(env.has(secretKey), "the secret is in the keeper's environ").toBe(false);
      expect([...env.keys()].filter((k) => k !== "PATH" && !k.startsWith("PROCLEASE_"))).toEqual([]);
    } finally {
      if (saved === undefined) delete process.env[secretKey];
      else process.env[secretKey] = saved;
    }
  });
});

const NOBODY = 65534;
/** why the non-dumpable test cannot run here, or null */
function nobodyCannotRun(): string | null {
  if (process.platform !== "linux") return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return "not root: no other uid to run the gateway as";
  const probe = spawnSync(
    process.execPath,
    ["-e", `require("node:fs").accessSync(${JSON.stringify(join(ROOT, "dist/ownership/keeper-main.cjs"))})`],
    { uid: NOBODY, gid: NOBODY, cwd: "/", timeout: 15_000 },
  );
  return probe.status === 0 ? null : `uid ${NOBODY} cannot read this checkout's dist/ (a 0700 folder)`;
}
const CANNOT = nobodyCannotRun();
if (CANNOT !== null) console.log(`[keeper-guard] non-dumpable test skipped: ${CANNOT}`);

/** Whether a process of uid 65534 can read `/proc/<pid>/environ`. */
function nobodyReadsEnviron(pid: number): boolean {
  const r = spawnSync("cat", [`/proc/${pid}/environ`], { uid: NOBODY, gid: NOBODY, cwd: "/", stdio: "ignore" });
  return r.status === 0;
}

/** The uid the kernel shows as the owner of /proc/<pid>/environ: root for a non-dumpable process, whatever its own uid. */
const procOwner = (pid: number): number => statSync(`/proc/${pid}/environ`).uid;

describe.skipIf(CANNOT !== null)(
  `the keeper, and a gateway that asks, are not dumpable${CANNOT === null ? "" : ` (skipped: ${CANNOT})`}`,
  () => {
    it(`run as uid ${NOBODY}: another process of that uid cannot read their environ`, async () => {
      const stateDir = tempStateDir("keeper-dumpable");
      chownSync(stateDir, NOBODY, NOBODY);
      const dist = (p: string) => JSON.stringify(pathToFileURL(join(ROOT, "dist", p)).href);
      const code = `
      const { acquireKeeper, keeperPid } = await import(${dist("ownership/keeper/keeper.js")});
      const { makeProcessNonDumpable } = await import(${dist("index.js")});
      acquireKeeper({ stateDir: ${JSON.stringify(stateDir)}, gatewayInstanceId: "dumpable-test", graceMs: 100 });
      const r = makeProcessNonDumpable();
      process.stdout.write(JSON.stringify({ gateway: process.pid, keeper: keeperPid(${JSON.stringify(stateDir)}), r }) + "\\n");
      setInterval(() => {}, 1 << 30);
    `;
      const gw = trackChild(
        spawn(process.execPath, ["--input-type=module", "-e", code], {
          uid: NOBODY,
          gid: NOBODY,
          cwd: "/",
          stdio: ["ignore", "pipe", "inherit"],
          env: { ...process.env, ACME_SECRET: "sk-nobody" },
        }),
      );
      let line = "";
      for await (const l of createInterface({ input: gw.stdout! })) {
        line = l;
        break;
      }
      const out = JSON.parse(line) as { gateway: number; keeper: number; r: { applied: boolean } };
      trackPid(out.keeper);
      expect(out.r).toEqual({ applied: true });
      // a keeper that made itself non-dumpable: its /proc is root's, though it runs as 65534
      expect(await waitFor(() => procOwner(out.keeper) === 0, 10_000), "the keeper's /proc owned by root").not.toBe(-1);
      expect(readFileSync(`/proc/${out.keeper}/status`, "utf8")).toMatch(new RegExp(`\\nUid:\\s+${NOBODY}\\s`));
      expect(nobodyReadsEnviron(out.keeper)).toBe(false);
      expect(procOwner(out.gateway)).toBe(0);
      expect(nobodyReadsEnviron(out.gateway)).toBe(false);

      // the keeper still does its job for a non-dumpable gateway: its death is seen and it exits
      gw.kill("SIGKILL");
      expect(await waitFor(() => !alive(out.keeper), 15_000)).not.toBe(-1);
    });

    it(`run as uid ${NOBODY}, a non-dumpable gateway's session closes "closed": its own keeper, unreadable to it, never holds a close open`, async () => {
      const stateDir = tempStateDir("keeper-dumpable-close");
      chownSync(stateDir, NOBODY, NOBODY);
      const code = `
      const { createAcpxLifecycleController, makeProcessNonDumpable } = await import(${JSON.stringify(pathToFileURL(join(ROOT, "dist/index.js")).href)});
      const applied = makeProcessNonDumpable();
      const ctl = await createAcpxLifecycleController({ stateDir: ${JSON.stringify(stateDir)}, graceMs: 200, maintenanceIntervalMs: 0 });
      const h = await ctl.ensureSession({ sessionKey: "k", agentId: "main", command: ${JSON.stringify(agentArgv({}))} });
      const turn = await ctl.prompt(h, "hello");
      // the keeper started with the session: once it made itself non-dumpable, this process (its uid) can no longer read its environ
      const { keeperPid } = await import(${JSON.stringify(pathToFileURL(join(ROOT, "dist/ownership/keeper/keeper.js")).href)});
      const { readFileSync } = await import("node:fs");
      const unreadable = () => { try { readFileSync("/proc/" + keeperPid(${JSON.stringify(stateDir)}) + "/environ"); return false; } catch { return true; } };
      while (!unreadable()) await new Promise((r) => setTimeout(r, 20));
      const close = await ctl.closeSession({ handle: h });
      process.stdout.write(JSON.stringify({ applied, rootPid: h.rootPid, leaseId: h.leaseId, turn, outcome: close.outcome, detail: close.detail }) + "\\n");
      await ctl.dispose();
    `;
      const gw = trackChild(
        spawn(process.execPath, ["--input-type=module", "-e", code], {
          uid: NOBODY,
          gid: NOBODY,
          cwd: "/",
          stdio: ["ignore", "pipe", "inherit"],
        }),
      );
      let line = "";
      for await (const l of createInterface({ input: gw.stdout! })) {
        line = l;
        break;
      }
      const out = JSON.parse(line) as {
        applied: unknown;
        rootPid: number;
        leaseId: string;
        turn: unknown;
        outcome: string;
        detail: string;
      };
      trackLease(out.leaseId);
      expect(out.applied).toEqual({ applied: true });
      expect(out.turn).toEqual({ stopReason: "end_turn" });
      expect([out.outcome, out.detail]).toEqual(["closed", expect.any(String)]);
      expect(alive(out.rootPid)).toBe(false);
    });
  },
);
