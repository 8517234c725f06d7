/**
 * Shared helpers for the controller tests: temp state dirs, the fixture
 * agent's argv, /proc probes, and a safety net that SIGKILLs (only) the
 * processes these tests spawned: those carrying one of our lease ids, and
 * pids the tests registered themselves. Tests run against dist/ (build first)
 * because the wrapper is spawned as a real node process.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, afterEach } from "vitest";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { openLeaseStore, type AcpxProcessLease } from "../../src/ownership/index.js";
import { createRunLeases } from "../../src/supervisor/hold/durability.js";
import { onInterrupt } from "../helpers/interrupt-cleanup.js";
import { isAliveSync } from "../helpers/liveness.js";
import { removeStateDir } from "../helpers/state-dir-cleanup.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const AGENT = join(ROOT, "fixtures/acp-agent/agent.mjs");
export const DIST_ACPX = pathToFileURL(join(ROOT, "dist/acpx/index.js")).href;
export const GRACE_MS = 400;
export const GRANDCHILD_KINDS = ["plain", "setsid", "double-fork"] as const;
export type GrandchildKind = (typeof GRANDCHILD_KINDS)[number];

if (!existsSync(join(ROOT, "dist/acpx/wrapper.cjs"))) {
  throw new Error("dist/acpx/wrapper.cjs (the bundled wrapper) is missing: run `npm run build` before these tests");
}

const dirs: string[] = [];
/** pid -> start time when registered, so a reused pid is never signalled */
const ownPids = new Map<number, string>();
const leaseIds = new Set<string>();
const children: ChildProcess[] = [];

export function tempStateDir(label: string): string {
  const d = mkdtempSync(join(tmpdir(), `proclease-ctl-${label}-`));
  dirs.push(d);
  return d;
}

/** A state dir made elsewhere (inside a tracked temp dir, e.g. an OpenClaw plugin's `<host state dir>/proclease`): its cgroups are removed with the rest. */
export function trackStateDir(d: string): void {
  dirs.push(d);
}

export function trackLease(id: string): void {
  leaseIds.add(id);
}
export function trackPid(pid: number | undefined | null): void {
  if (!pid) return;
  const st = startTimeOf(pid);
  if (st !== null) ownPids.set(pid, st);
}

export function startTimeOf(pid: number): string | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}
export function trackChild(c: ChildProcess): ChildProcess {
  children.push(c);
  trackPid(c.pid);
  return c;
}

export function agentArgv(opts: {
  kind?: GrandchildKind;
  stubborn?: boolean;
  surviveStdinClose?: boolean;
  turn?: "quick" | "until-cancel";
  pidfile?: string;
  extra?: string[];
}): string[] {
  const a = [process.execPath, AGENT];
  if (opts.stubborn) a.push("--ignore-sigterm");
  if (opts.kind) a.push(`--grandchild=${opts.kind}`);
  if (opts.surviveStdinClose) a.push("--survive-stdin-close");
  if (opts.turn) a.push(`--turn=${opts.turn}`);
  if (opts.pidfile) a.push(`--pidfile=${opts.pidfile}`);
  a.push(...(opts.extra ?? []));
  return a;
}

export interface AgentPids {
  pid: number;
  grandchildPid: number | null;
  pgid: number | null;
}

export async function readPidfile(path: string, timeoutMs = 10_000): Promise<AgentPids> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const p = JSON.parse(readFileSync(path, "utf8")) as AgentPids;
      trackPid(p.pid);
      trackPid(p.grandchildPid);
      return p;
    } catch {
      if (Date.now() > deadline) throw new Error(`pidfile ${path} never appeared`);
      await sleep(25);
    }
  }
}

/** Alive by the tests' own /proc oracle (test/helpers/liveness.ts), not the library's rule. */
export const alive = isAliveSync;

/** pids whose environment carries OPENCLAW_ACPX_LEASE_ID=<leaseId> (zombies have no environ) */
export function leaseCarriers(leaseId: string): number[] {
  return envCarriers("OPENCLAW_ACPX_LEASE_ID", leaseId);
}

const TEST_MARKER_KEY = "PROCLEASE_TEST_MARKER";
const testMarkers = new Set<string>();

/**
 * An environment marker for processes a test spawns outside any lease (an
 * unowned look-alike, a legacy root): cleanupAll finds them and everything
 * they forked (setsid grandchildren included) by it.
 */
export function testMarkerEnv(): Record<string, string> {
  const id = `${process.pid}-${Date.now()}-${testMarkers.size}`;
  testMarkers.add(id);
  return { [TEST_MARKER_KEY]: id };
}

function envCarriers(key: string, value: string): number[] {
  const needle = Buffer.from(`${key}=${value}\0`);
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/environ`).indexOf(needle) !== -1 && alive(Number(d))) out.push(Number(d));
    } catch {
      // gone or unreadable
    }
  }
  return out;
}

export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs: number, stepMs = 20): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if (await cond()) return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs) return -1;
    await sleep(stepMs);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A stand-in gateway: a separate node process that creates a controller on
 * `stateDir`, ensures one session with `command`, prints the handle as one
 * JSON line and then idles until killed. Its keeper is off: the tests that
 * use it are about what the wrapper and the NEXT gateway's startup reap do
 * (a gateway whose keeper died with it); the keeper's own tests are
 * test/adversarial/keeper-*.
 */
export function spawnGateway(
  stateDir: string,
  command: string[],
  graceMs = GRACE_MS,
  containment: "auto" | "off" = "auto",
): ChildProcess {
  const code = `
    const { createAcpxLifecycleController } = await import(${JSON.stringify(DIST_ACPX)});
    const cfg = JSON.parse(process.env.GW_CONFIG);
    const ctl = await createAcpxLifecycleController({ stateDir: cfg.stateDir, graceMs: cfg.graceMs, maintenanceIntervalMs: 0, containment: cfg.containment, keeper: "off" });
    const h = await ctl.ensureSession({ sessionKey: "agent:main:acp:gw", agentId: "main", command: cfg.command });
    process.stdout.write(JSON.stringify(h) + "\\n");
    setInterval(() => {}, 1 << 30);
  `;
  const c = spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, GW_CONFIG: JSON.stringify({ stateDir, graceMs, command, containment }) },
  });
  return trackChild(c);
}

export function readJsonLine<T>(c: ChildProcess, timeoutMs = 15_000): Promise<T> {
  return new Promise((resolvePromise, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error("no JSON line from the stand-in gateway")), timeoutMs);
    c.stdout!.on("data", (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf("\n");
      if (nl !== -1) {
        clearTimeout(timer);
        resolvePromise(JSON.parse(buf.slice(0, nl)) as T);
      }
    });
    c.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`stand-in gateway exited early (code ${code})`));
    });
  });
}

/**
 * The hooks every controller test file needs: after each test, dispose the
 * controllers it pushed onto the returned list, then kill what it spawned.
 */
export function disposeAfterEach(): AcpxLifecycleController[] {
  const controllers: AcpxLifecycleController[] = [];
  afterEach(async () => {
    for (const c of controllers.splice(0)) await c.dispose();
    cleanupAll();
  });
  afterAll(() => cleanupAll());
  return controllers;
}

/** Kill everything these tests spawned (by our lease ids and registered pids); remove temp dirs. */
export function cleanupAll(): void {
  const victims = new Set<number>();
  for (const [pid, st] of ownPids) if (startTimeOf(pid) === st) victims.add(pid);
  for (const id of leaseIds) for (const p of leaseCarriers(id)) victims.add(p);
  for (const id of testMarkers) for (const p of envCarriers(TEST_MARKER_KEY, id)) victims.add(p);
  for (const c of children) if (c.exitCode === null && c.signalCode === null && c.pid) victims.add(c.pid);
  for (const pid of victims) {
    if (pid <= 1 || pid === process.pid || !alive(pid)) continue;
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  ownPids.clear();
  // with the cgroups its leases left on the host (test/helpers/state-dir-cleanup.ts); the last made first, so
  // a state dir inside another is read before its parent is removed
  for (const d of dirs.splice(0).reverse()) removeStateDir(d);
}

// an interrupted run kills what these tests tracked and removes their state dirs too (test/helpers/interrupt-setup.ts)
onInterrupt(cleanupAll);

/**
 * A run leased by the process supervisor's own lease code into this state
 * dir's store (sessionKey "supervisor:<runId>", markers in the child's
 * environment, live identity recorded after the spawn), for a real idle
 * process in its own process group.
 */
export async function spawnSupervisorStyleRun(
  stateDir: string,
  runId: string,
): Promise<{ lease: AcpxProcessLease; pid: number }> {
  const runs = createRunLeases({ stateDir, graceMs: GRACE_MS });
  const argv = [process.execPath, "-e", "setInterval(() => {}, 1 << 30)"];
  const { leaseId, env } = await runs.open(runId, argv);
  trackLease(leaseId);
  const child = trackChild(
    spawn(argv[0]!, argv.slice(1), { detached: true, stdio: "ignore", env: { ...process.env, ...env } }),
  );
  await runs.attach(leaseId, child.pid!);
  const lease = await (await openLeaseStore(stateDir)).get(leaseId);
  if (!lease || lease.rootStartTime === undefined)
    throw new Error(`the supervisor-style run (pid ${child.pid}) was gone right after its spawn`);
  return { lease, pid: child.pid! };
}

/**
 * A stand-in gateway ensures a session whose adapter double-forks a stubborn
 * grandchild; then the wrapper (first, so no parent-death cleanup can run)
 * and the gateway are SIGKILLed. What is left is exactly the startup-reaping
 * case: a lease whose root is gone and escapees that still carry its markers.
 */
export async function orphanByKillingGatewayAndWrapper(
  stateDir: string,
): Promise<{ h: AcpRuntimeHandle; pids: AgentPids }> {
  const pidfile = join(stateDir, "agent.json");
  const gw = spawnGateway(
    stateDir,
    agentArgv({ kind: "double-fork", stubborn: true, surviveStdinClose: true, pidfile }),
  );
  const h = await readJsonLine<AcpRuntimeHandle>(gw);
  trackLease(h.leaseId);
  const pids = await readPidfile(pidfile);
  process.kill(h.rootPid, "SIGKILL");
  gw.kill("SIGKILL");
  if ((await waitFor(() => !alive(h.rootPid), 5000)) === -1) throw new Error(`wrapper ${h.rootPid} survived SIGKILL`);
  return { h, pids };
}

/** A live process's whole environment, from /proc (tests only: they read what an adapter really got). */
export function environOf(pid: number): Map<string, string> {
  const env = new Map<string, string>();
  for (const kv of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const i = kv.indexOf("=");
    if (i > 0) env.set(kv.slice(0, i), kv.slice(i + 1));
  }
  return env;
}

/** One streamed turn; the text of its agent_message_chunk updates, once the turn ended. */
export async function say(ctl: AcpxLifecycleController, h: AcpRuntimeHandle, prompt: string): Promise<string> {
  const out: string[] = [];
  const turn = ctl.startTurn(h, prompt);
  for await (const u of turn.events) {
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") out.push(u.content.text);
  }
  await turn.result;
  return out.join("");
}
