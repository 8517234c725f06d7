/**
 * The wrapper tests' shared harness: the two wrapper kinds (the Node bundle
 * and the native executable), spawning one with the test as its gateway,
 * reading /proc independently of src/facts (lease carriers, stat), orphans
 * carrying lease markers, and the hooks that clean up after each test.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { client as acpClient, ndJsonStream, type ClientConnection } from "@agentclientprotocol/sdk";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, describe, it } from "vitest";
import { createReportReader, wrapperArgs, type WrapperReport } from "../../src/acpx/wrapper/protocol.js";
import { loadNative, nativeAddonPath } from "../../src/facts/native.js";
import { NATIVE_WRAPPER_FILE } from "../../src/acpx/launch/install-wrapper.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
// the bundle the controller runs (scripts/bundle-wrapper.mjs), not tsc's per-file output
export const WRAPPER = join(root, "dist/acpx/wrapper.cjs");
export const AGENT = join(root, "fixtures/acp-agent/agent.mjs");
export const GATEWAY = join(root, "test/fixtures/acpx/gateway.mjs");
export const PROBE = join(root, "test/fixtures/acpx/group-probe.mjs");
export const LINUX = process.platform === "linux";
export const SUBREAPER = LINUX && loadNative() !== null;
export const NOT_LINUX = LINUX ? "" : " (skipped: the wrapper's real-process tests read /proc, Linux only)";
export const NO_SUBREAPER = SUBREAPER ? "" : " (skipped: needs Linux and the native addon for PR_SET_CHILD_SUBREAPER)";
if (!LINUX) console.log(`[wrapper tests]${NOT_LINUX}`);
else if (!SUBREAPER) console.log(`[wrapper tests]${NO_SUBREAPER}`);

/**
 * Both wrappers keep one contract, so the real-process tests run against
 * each: the Node one (node dist/acpx/wrapper.cjs) and the native executable
 * built beside the addon (native/wrapper_linux.c, Linux only).
 */
const addonPath = LINUX ? nativeAddonPath() : null;
const NATIVE_WRAPPER = addonPath === null ? null : join(dirname(addonPath), NATIVE_WRAPPER_FILE);
const HAS_NATIVE = NATIVE_WRAPPER !== null && existsSync(NATIVE_WRAPPER);
const NO_NATIVE = HAS_NATIVE ? "" : " (skipped: no native wrapper built beside the addon; run `npx node-gyp rebuild`)";
export interface WrapperKindCase {
  name: "node" | "native";
  /** the wrapper's path for the stand-in gateway */
  path: string;
  /** what is spawned: [file, ...args before the wrapper's own] */
  argv: readonly string[];
}
export const KINDS: WrapperKindCase[] = [
  { name: "node", path: WRAPPER, argv: [process.execPath, WRAPPER] },
  { name: "native", path: NATIVE_WRAPPER ?? "", argv: [NATIVE_WRAPPER ?? ""] },
];
/** the wrapper the current describe block runs (set in its beforeEach) */
let current: WrapperKindCase = KINDS[0]!;
const skipKind = (k: WrapperKindCase): boolean => !LINUX || (k.name === "native" && !HAS_NATIVE);
const kindNote = (k: WrapperKindCase): string => (k.name === "native" ? NO_NATIVE : "") || NOT_LINUX;

export const tmp = mkdtempSync(join(tmpdir(), "proclease-wrapper-"));
export const leases: string[] = [];
export const spawned: ChildProcess[] = [];
let seq = 0;

export function newLease(): string {
  const id = `wrapper-test-${process.pid}-${Date.now()}-${++seq}`;
  leases.push(id);
  return id;
}

/** pids whose environment carries OPENCLAW_ACPX_LEASE_ID=lease (zombies have none). */
export function leaseCarriers(lease: string): number[] {
  const needle = Buffer.from(`OPENCLAW_ACPX_LEASE_ID=${lease}\0`);
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const env = readFileSync(`/proc/${d}/environ`);
      if (env.indexOf(needle) !== -1) out.push(Number(d));
    } catch {
      // gone or unreadable
    }
  }
  return out;
}

export function stat(pid: number): { state: string; ppid: number; pgid: number; sid: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { state: f[0]!, ppid: Number(f[1]), pgid: Number(f[2]), sid: Number(f[3]) };
  } catch {
    return null;
  }
}

export async function waitFor<T>(
  what: string,
  fn: () => T | undefined | null | false,
  timeoutMs = 10_000,
  everyMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function readPidfile(path: string): { pid: number; grandchildPid: number | null } | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as { pid: number; grandchildPid: number | null };
  } catch {
    return null;
  }
}

/** Collects newline-delimited JSON from a stream. */
export function jsonLines(stream: Readable): { lines: Record<string, unknown>[] } {
  const acc = { lines: [] as Record<string, unknown>[] };
  let pending = "";
  stream.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8");
    let nl;
    while ((nl = pending.indexOf("\n")) !== -1) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        acc.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not ours
      }
    }
  });
  return acc;
}

/** Spawns the wrapper directly (the test is its gateway), with the lifeline on fd 3. */
export function spawnWrapper(
  command: string[],
  opts: {
    lease?: string;
    graceMs?: number;
    raw?: string[];
    instance?: string | null;
    env?: Record<string, string>;
  } = {},
) {
  const args =
    opts.raw ?? wrapperArgs(WRAPPER, command, opts.graceMs === undefined ? {} : { graceMs: opts.graceMs }).slice(1);
  const [file, ...pre] = current.argv as [string, ...string[]];
  const child = spawn(file, [...pre, ...args], {
    stdio: ["pipe", "pipe", "pipe", "pipe"],
    env: {
      ...markerEnv(opts.lease ?? newLease(), opts.instance === undefined ? INSTANCE : opts.instance),
      ...opts.env,
    },
  });
  spawned.push(child);
  const reports: WrapperReport[] = [];
  const reader = createReportReader((r) => reports.push(r));
  const lifeline = child.stdio[3] as Readable;
  lifeline.on("data", (c: Buffer) => reader.push(c));
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on("exit", (code, signal) => res({ code, signal })),
  );
  // "exit" can come before the pipes are drained; what was written is all read once "close" comes
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on("close", (code, signal) => res({ code, signal })),
  );
  return {
    child,
    reports,
    exited,
    closed,
    out: () => stdout,
    err: () => stderr,
    report: <T extends WrapperReport["type"]>(type: T) =>
      waitFor(
        `a "${type}" report`,
        () => reports.find((r) => r.type === type) as Extract<WrapperReport, { type: T }> | undefined,
      ),
  };
}

export const INSTANCE = "wrapper-test";

// a real cgroup2 directory for the lease-cgroup test, decided without the code under test
const probe = LINUX ? await probeCgroup2() : null;
export const cgroup = probe !== null && probe.writable ? probe : null;
export const cgroupNote = probe === null ? NOT_LINUX : containmentSkipNote(probe);

/** The test's environment with the lease markers set (instance null: the key removed). */
export function markerEnv(lease: string, instance: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OPENCLAW_ACPX_LEASE_ID: lease };
  if (instance === null) delete env.OPENCLAW_GATEWAY_INSTANCE_ID;
  else env.OPENCLAW_GATEWAY_INSTANCE_ID = instance;
  return env;
}

/**
 * A `sleep` carrying the given markers, orphaned at once (its shell exits),
 * so it is outside every wrapper's tree: only a marker scan can find it.
 * Killed by killLeaseCarriers after each test.
 */
export async function markedOrphan(lease: string, instance: string | null): Promise<number> {
  const sh = spawn("sh", ["-c", "sleep 600 >/dev/null 2>&1 & echo $!"], {
    stdio: ["ignore", "pipe", "ignore"],
    env: markerEnv(lease, instance),
  });
  let out = "";
  sh.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  await new Promise((r) => sh.once("exit", r));
  const pid = Number(out.trim());
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`no pid from the orphan's shell: ${JSON.stringify(out)}`);
  await waitFor(`orphan ${pid} re-parented away from its shell`, () => stat(pid)?.ppid !== sh.pid);
  return pid;
}

export function liveNotZombie(pid: number): boolean {
  const s = stat(pid);
  return s !== null && s.state !== "Z";
}

export function killLeaseCarriers(): void {
  for (const lease of leases) {
    for (const pid of leaseCarriers(lease)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
}

/** The next number for a unique file or cgroup name in this test file. */
export function nextSeq(): number {
  return ++seq;
}

/** Whether the wrapper of kind k is a subreaper: the native one always on Linux, the Node one only with the addon. */
export const subreaperFor = (k: WrapperKindCase): boolean => k.name === "native" || SUBREAPER;

/**
 * A describe block per wrapper kind (title with $name), its tests spawning
 * that kind (spawnWrapper reads it); a kind this host cannot run is one
 * skipped test that says why.
 */
export function describeEachKind(title: string, body: (k: WrapperKindCase) => void): void {
  describe.each(KINDS)(title, (k) => {
    beforeEach(() => void (current = k));
    if (skipKind(k)) {
      console.log(`[wrapper tests] ${k.name}${kindNote(k)}`);
      return void it.skip(`all of it${kindNote(k)}`, () => undefined);
    }
    body(k);
  });
}

/**
 * The hooks every wrapper test file needs: the bundle rebuilt when a source
 * it loads is newer, and every process a test started (and every lease
 * carrier) killed after it.
 */
export function useWrapperHarness(): void {
  beforeAll(() => {
    // The wrapper runs from dist: rebuild when any source it loads is newer.
    const newest = Math.max(
      ...["src/acpx/wrapper", "src/ownership", "src/facts"].flatMap((d) =>
        readdirSync(join(root, d))
          .filter((f) => f.endsWith(".ts"))
          .map((f) => statSync(join(root, d, f)).mtimeMs),
      ),
    );
    if (!existsSync(WRAPPER) || statSync(WRAPPER).mtimeMs < newest) {
      const r = spawnSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
      if (!existsSync(WRAPPER)) throw new Error(`build failed (tsc exit ${r.status}); ${WRAPPER} missing`);
    }
  }, 120_000);

  afterEach(() => {
    for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    killLeaseCarriers();
  });

  afterAll(() => {
    killLeaseCarriers();
    rmSync(tmp, { recursive: true, force: true });
  });
}

/** An SDK client over the wrapper's stdio: ACP passes through it untouched. */
export function acpOver(w: { child: ChildProcess }): ClientConnection {
  const app = acpClient({ name: "wrapper-test" });
  return app.connect(
    ndJsonStream(
      Writable.toWeb(w.child.stdin!) as WritableStream<Uint8Array>,
      Readable.toWeb(w.child.stdout!) as ReadableStream<Uint8Array>,
    ),
  );
}
