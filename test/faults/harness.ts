/**
 * The fault suite's harness: a real gateway process (fixtures/gateway.mjs,
 * the built package) driven over JSON lines, and the faults a real host
 * throws, made for real: a size-limited tmpfs (root) and a pids cgroup
 * (host-faults.ts), a descriptor limit (prlimit), another uid (setpriv, with
 * worldReadablePackage below). Every fault a test makes is undone in its
 * teardown, and every process a test starts is ended by it (by pid and start
 * time).
 * A fault the machine cannot make is reported by `skipReason`, for the test
 * to skip with that reason in its name, printed.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isAliveSync } from "../helpers/liveness.js";
import { detectContainment } from "../../src/containment/index.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const GATEWAY = join(ROOT, "test/faults/fixtures/gateway.mjs");
export const AGENT = join(ROOT, "fixtures/acp-agent/agent.mjs");
export const DIST = pathToFileURL(join(ROOT, "dist/index.js")).href;
export const IS_ROOT = typeof process.getuid === "function" && process.getuid() === 0;

if (!existsSync(join(ROOT, "dist/index.js")))
  throw new Error("dist/ is missing: run `npm run build` before the fault suite");

export function agentArgv(...flags: string[]): string[] {
  return [process.execPath, AGENT, ...flags];
}

export interface CallError {
  name: string;
  message: string;
  code?: string;
  failure?: string;
  resource?: string;
  limit?: string;
  readAt?: string;
  path?: string;
  cause?: CallError;
}

export class Gateway {
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (v: { ok: boolean; value?: unknown; error?: CallError }) => void }
  >();
  stderr = "";
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  pid = 0;
  private readonly ready: Promise<void>;

  constructor(readonly child: ChildProcess) {
    let buf = "";
    let readyResolve!: () => void;
    this.ready = new Promise((r) => (readyResolve = r));
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (c: string) => {
      buf += c;
      let nl;
      while ((nl = buf.indexOf("\n")) !== -1) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let msg: { id: number; ok: boolean; value?: { pid?: number }; error?: CallError };
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if (msg.id === 0) {
          this.pid = msg.value!.pid!;
          readyResolve();
          continue;
        }
        this.waiting.get(msg.id)?.resolve(msg);
        this.waiting.delete(msg.id);
      }
    });
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (c: string) => (this.stderr += c));
    this.exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
    void this.exited.then(() => {
      for (const w of this.waiting.values())
        w.resolve({
          ok: false,
          error: { name: "GatewayDied", message: `the gateway died; stderr: ${this.stderr.slice(-2000)}` },
        });
      this.waiting.clear();
    });
  }

  async start(timeoutMs = 60_000): Promise<this> {
    const t = setTimeout(() => undefined, 0);
    clearTimeout(t);
    await Promise.race([
      this.ready,
      this.exited.then((e) => {
        throw new Error(`the gateway exited before it was ready (${JSON.stringify(e)}): ${this.stderr.slice(-2000)}`);
      }),
      new Promise((_, rej) => setTimeout(() => rej(new Error("the gateway did not start")), timeoutMs).unref()),
    ]);
    return this;
  }

  /** Sends one request; resolves with its answer (an error answer is a value, not a throw). */
  request(
    op: string,
    args: Record<string, unknown> = {},
    timeoutMs = 90_000,
  ): Promise<{ ok: boolean; value?: unknown; error?: CallError }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no answer to ${op} within ${timeoutMs} ms; stderr: ${this.stderr.slice(-1000)}`)),
        timeoutMs,
      );
      timer.unref();
      this.waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
      });
      this.child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    });
  }

  /** A request that must succeed. */
  async call<T = unknown>(op: string, args: Record<string, unknown> = {}, timeoutMs?: number): Promise<T> {
    const r = await this.request(op, args, timeoutMs);
    if (!r.ok) throw new Error(`${op} failed: ${r.error?.name}: ${r.error?.message}`);
    return r.value as T;
  }

  /** The gateway process is alive and answers. */
  async lives(): Promise<boolean> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return false;
    const r = await this.request("ping", {}, 30_000).catch(() => null);
    return r?.ok === true;
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

const gateways: Gateway[] = [];

/**
 * The two ways a gateway reads facts, signals and writes lease files: through
 * the addon, and with it disabled, where the portable paths fail at other
 * steps. A fault that depends on the way runs both.
 */
export const ADDON_WAYS = [
  { how: "the addon", env: {}, native: true },
  { how: "no addon (PROCLEASE_DISABLE_NATIVE=1)", env: { PROCLEASE_DISABLE_NATIVE: "1" }, native: false },
] as const;
export type AddonWay = (typeof ADDON_WAYS)[number];

/**
 * Starts a gateway: `prefix` runs before node (prlimit …, setpriv …); `dist`
 * another copy of the package; `way` one of ADDON_WAYS, checked once it
 * answers (a stale or missing addon must not turn one way into the other).
 */
export async function startGateway(
  opts: {
    prefix?: string[];
    dist?: string;
    gatewayScript?: string;
    env?: NodeJS.ProcessEnv;
    cwd?: string;
    way?: AddonWay;
  } = {},
): Promise<Gateway> {
  const argv = [...(opts.prefix ?? []), process.execPath, opts.gatewayScript ?? GATEWAY, opts.dist ?? DIST];
  const env = { ...(opts.env ?? process.env), ...opts.way?.env };
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: ["pipe", "pipe", "pipe"],
    env,
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
  });
  const g = new Gateway(child);
  gateways.push(g);
  await g.start();
  if (opts.way !== undefined) {
    const { native } = await g.call<{ native: boolean }>("ping");
    if (native !== opts.way.native)
      throw new Error(
        `the gateway was to run with ${opts.way.how}, but the addon ${native ? "loaded" : "did not load"}`,
      );
  }
  return g;
}

export function killGateways(): void {
  for (const g of gateways.splice(0)) g.kill();
}

// ------------------------------------------------------------------ state

const dirs: string[] = [];
export function tempDir(label: string): string {
  const d = mkdtempSync(join(tmpdir(), `proclease-faults-${label}-`));
  dirs.push(d);
  return d;
}
export function removeTempDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** Every lease file under the state dir, parsed: a file that does not parse (truncated, empty, corrupt) is returned as such. */
export function leaseFiles(stateDir: string): {
  file: string;
  lease?: { leaseId: string; state: string; rootPid: number; cgroup?: { path: string } };
  corrupt?: string;
}[] {
  const out: ReturnType<typeof leaseFiles> = [];
  const base = join(stateDir, "acpx", "leases");
  for (const sub of ["", "archive", "quarantine"]) {
    const dir = join(base, sub);
    if (!existsSync(dir)) continue;
    for (const n of readdirSync(dir)) {
      const file = join(dir, n);
      if (sub !== "quarantine" && !n.endsWith(".json")) continue;
      if (sub === "quarantine") {
        out.push({ file, corrupt: "quarantined" });
        continue;
      }
      try {
        out.push({ file, lease: JSON.parse(readFileSync(file, "utf8")) });
      } catch (e) {
        out.push({ file, corrupt: (e as Error).message });
      }
    }
  }
  return out;
}

/** Temp files a write left behind in the lease folders. */
export function tempFiles(stateDir: string): string[] {
  const base = join(stateDir, "acpx", "leases");
  const out: string[] = [];
  for (const sub of ["", "archive"]) {
    const dir = join(base, sub);
    if (existsSync(dir)) for (const n of readdirSync(dir)) if (n.startsWith(".tmp-")) out.push(join(dir, n));
  }
  return out;
}

// ------------------------------------------------------------------ processes

/** Live pids whose environment carries KEY=value (the lease markers), by the one liveness rule. */
export function carriersOf(key: string, value: string): number[] {
  const want = `${key}=${value}`;
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, "latin1");
      if (env.split("\0").includes(want) && isAliveSync(Number(name))) out.push(Number(name));
    } catch {
      // gone, or unreadable
    }
  }
  return out;
}

export function instanceCarriers(instanceId: string): number[] {
  return carriersOf("OPENCLAW_GATEWAY_INSTANCE_ID", instanceId);
}

/** Live pids whose argv contains `marker` (escapees that cleared their environment). */
export function argvCarriers(marker: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0").includes(marker) && isAliveSync(Number(name)))
        out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

export function startTimeOf(pid: number): string | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

/** SIGKILLs pids that still carry the given instance id (the test's own processes only). */
export function killInstance(instanceId: string | undefined): void {
  if (!instanceId) return;
  for (const pid of instanceCarriers(instanceId)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 20_000, stepMs = 25): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

// ------------------------------------------------------------------ another uid

/**
 * A copy of the package a process of another uid can read (a checkout may
 * sit in a 0700 folder): dist, the addon, the fixture agent and the runtime
 * dependencies, in a fresh 0755 folder.
 */
export function worldReadablePackage(): { dir: string; dist: string; gateway: string; agent: string } {
  const dir = mkdtempSync(join(tmpdir(), "proclease-faults-pkg-"));
  dirs.push(dir);
  chmodSync(dir, 0o755);
  for (const p of [
    "dist",
    "build/Release/proclease.node",
    "fixtures",
    "package.json",
    "test/faults/fixtures/gateway.mjs",
  ]) {
    if (existsSync(join(ROOT, p))) cpSync(join(ROOT, p), join(dir, p), { recursive: true });
  }
  for (const dep of ["@agentclientprotocol/sdk", "zod", "node-gyp-build"]) {
    cpSync(join(ROOT, "node_modules", dep), join(dir, "node_modules", dep), { recursive: true });
  }
  spawnSync("chmod", ["-R", "a+rX", dir]);
  return {
    dir,
    dist: pathToFileURL(join(dir, "dist/index.js")).href,
    gateway: join(dir, "test/faults/fixtures/gateway.mjs"),
    agent: join(dir, "fixtures/acp-agent/agent.mjs"),
  };
}

/** Where this host puts lease cgroups (detected the way a gateway does), or null without containment. */
export const CONTAINMENT = await detectContainment();
const CGROUP_ROOT = CONTAINMENT.available ? CONTAINMENT.root : null;

/** The folders under the proclease cgroup root (instance folders and their lease cgroups). */
export function cgroupFolders(root: string | null = CGROUP_ROOT): string[] {
  if (root === null) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    let ents;
    try {
      ents = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents) {
      if (!e.isDirectory()) continue;
      out.push(join(d, e.name));
      walk(join(d, e.name));
    }
  };
  walk(root);
  return out;
}

export function alive(pid: number): boolean {
  return isAliveSync(pid);
}
