/**
 * Helpers for the durable tests: a durable native wrapper spawned as the
 * controller spawns it (stdio [pipe, pipe, pipe, pipe], the durable argv),
 * the state dir's lock held by this test process (the flock a gateway holds),
 * a raw ACP speaker on the wrapper's stdio, and a frame client for its socket
 * (the addon's connectAttach, as the controller connects).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { Socket } from "node:net";
import { join } from "node:path";
import { loadNative } from "../../src/facts/native.js";
import { durableArgs, frame, FRAME, FrameReader, socketName } from "../../src/acpx/durable/protocol.js";
import { nativeAddonPath } from "../../src/facts/native.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { AGENT, DIST_ACPX, GRACE_MS, tempStateDir, trackChild, trackLease, waitFor } from "./controller-helpers.js";

/** The packaged native wrapper beside the addon (build/Release), or null where there is none. */
export function nativeWrapperPath(): string | null {
  const addon = nativeAddonPath();
  return process.platform === "linux" && addon !== null ? join(addon, "..", "proclease-wrapper") : null;
}

export interface DurableRig {
  stateDir: string;
  attachDir: string;
  lockPath: string;
  leaseId: string;
  instanceId: string;
  /** releases this process's flock on the state dir's lock (a gateway gone) */
  dropLock(): void;
}

/** A state dir with its attach folder and its lock file, the lock held by this process. */
export function durableRig(label: string, leaseId = `lease-${label}-${process.pid}`): DurableRig {
  const stateDir = tempStateDir(`dur-${label}`);
  const attachDir = join(stateDir, "acpx", "attach");
  mkdirSync(attachDir, { recursive: true, mode: 0o700 });
  const lockPath = join(stateDir, "gateway.lock");
  let fd: number | null = openSync(lockPath, "a+", 0o600);
  const rc = loadNative()!.lockExclusive(fd);
  if (rc !== 0) throw new Error(`the test could not take ${lockPath}'s flock (${rc})`);
  trackLease(leaseId);
  return {
    stateDir,
    attachDir,
    lockPath,
    leaseId,
    instanceId: `instance-${label}`,
    dropLock() {
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

export interface SpawnedWrapper {
  child: ChildProcess;
  /** the agent's stdout lines, parsed, as the gateway side read them */
  lines: Record<string, unknown>[];
  reports: Record<string, unknown>[];
  send(msg: unknown): void;
  /** the gateway goes: lifeline EOF, its stdio closed (as a process that dies) */
  goAway(): void;
}

/** The durable wrapper with the fixture agent (its flags `agentFlags`), window `windowMs`, journal `journalBytes`. */
export function spawnDurableWrapper(
  rig: DurableRig,
  agentFlags: string[],
  opts: { windowMs?: number; journalBytes?: number; graceMs?: number } = {},
): SpawnedWrapper {
  const w = nativeWrapperPath()!;
  const args = durableArgs(
    { reattachWithinMs: opts.windowMs ?? 30_000, journalBytes: opts.journalBytes ?? 1 << 20 },
    rig.attachDir,
    rig.lockPath,
  );
  const child = trackChild(
    spawn(w, ["--grace-ms", String(opts.graceMs ?? 400), ...args, "--", process.execPath, AGENT, ...agentFlags], {
      stdio: ["pipe", "pipe", "pipe", "pipe"],
      env: { ...process.env, OPENCLAW_ACPX_LEASE_ID: rig.leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: rig.instanceId },
    }),
  );
  const lines: Record<string, unknown>[] = [];
  const reports: Record<string, unknown>[] = [];
  lineReader(child.stdout!, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  lineReader(child.stdio[3] as NodeJS.ReadableStream, (l) => reports.push(JSON.parse(l) as Record<string, unknown>));
  child.stderr!.resume();
  for (const s of child.stdio)
    (s as { on?: (e: string, f: () => void) => void } | null)?.on?.("error", () => undefined);
  return {
    child,
    lines,
    reports,
    send: (msg) => void child.stdin!.write(`${JSON.stringify(msg)}\n`),
    goAway() {
      (child.stdio[3] as NodeJS.WritableStream & { end(): void }).end();
      for (const s of [child.stdin, child.stdout, child.stderr]) s?.destroy();
    },
  };
}

function lineReader(s: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buf = "";
  s.on("data", (d: Buffer) => {
    buf += d.toString("utf8");
    for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.trim() !== "") onLine(line);
    }
  });
}

/** initialize + session/new on a spawned wrapper's stdio; the agent's session id. */
export async function handshakeRaw(w: SpawnedWrapper): Promise<string> {
  w.send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } });
  await until(() => w.lines.some((l) => l.id === 0));
  w.send({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: "/tmp", mcpServers: [] } });
  await until(() => w.lines.some((l) => l.id === 1));
  return (w.lines.find((l) => l.id === 1)!.result as { sessionId: string }).sessionId;
}

export function promptMsg(id: number, sessionId: string, text: string): unknown {
  return { jsonrpc: "2.0", id, method: "session/prompt", params: { sessionId, prompt: [{ type: "text", text }] } };
}

/** The text of an agent_message_chunk line, or undefined. */
export function chunkText(l: Record<string, unknown>): string | undefined {
  const u = (l.params as { update?: { sessionUpdate?: string; content?: { text?: string } } } | undefined)?.update;
  return l.method === "session/update" && u?.sessionUpdate === "agent_message_chunk" ? u.content?.text : undefined;
}

export async function until(cond: () => boolean, ms = 15_000): Promise<void> {
  if ((await waitFor(cond, ms)) === -1) throw new Error("a condition of the test never held");
}

/** One connection to a durable wrapper's socket, through the addon, with its frames sorted. */
export interface FrameClient {
  peer: { pid: number; uid: number };
  sock: Socket;
  frames: { type: string; text: string }[];
  closed: boolean;
  send(type: number, payload: Buffer | string): void;
  /** the agent's stdout lines received so far ("O" frames joined, parsed) */
  lines(): Record<string, unknown>[];
}

export function connectFrames(rig: Pick<DurableRig, "attachDir" | "leaseId">): FrameClient {
  const r = loadNative()!.connectAttach!(rig.attachDir, socketName(rig.leaseId));
  if (typeof r === "number") throw new Error(`connectAttach failed: errno ${-r}`);
  const sock = new Socket({ fd: r.fd, readable: true, writable: true });
  const c: FrameClient = {
    peer: { pid: r.pid, uid: r.uid },
    sock,
    frames: [],
    closed: false,
    send: (type, payload) => void sock.write(frame(type, payload)),
    lines() {
      const text = c.frames
        .filter((f) => f.type === "O")
        .map((f) => f.text)
        .join("");
      return text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    },
  };
  const reader = new FrameReader((type, payload) =>
    c.frames.push({ type: String.fromCharCode(type), text: payload.toString("utf8") }),
  );
  sock.on("data", (d: Buffer) => reader.push(d));
  sock.on("error", () => undefined);
  sock.on("close", () => (c.closed = true));
  return c;
}

/** Connects and authenticates as `rig`'s gateway (its lease and instance). */
export function attachAs(rig: DurableRig, lease = rig.leaseId, instance = rig.instanceId): FrameClient {
  const c = connectFrames(rig);
  c.send(FRAME.auth, `${lease}\n${instance}`);
  return c;
}

export { FRAME };

/** A stand-in gateway in its own process (test/fixtures/acpx/durable-gateway.mjs) and the JSON lines it printed. */
export interface FixtureGateway {
  child: ChildProcess;
  events: { type: string; handle?: AcpRuntimeHandle; text?: string }[];
}

const GATEWAY_FIXTURE = join(import.meta.dirname, "..", "fixtures", "acpx", "durable-gateway.mjs");

/** Starts the stand-in gateway with `cfg` (its GW_CONFIG, the state dir's dist and grace filled in); `ownGroup`: a process group of its own. */
export function startFixtureGateway(cfg: Record<string, unknown>, ownGroup = false): FixtureGateway {
  const child = trackChild(
    spawn(process.execPath, [GATEWAY_FIXTURE], {
      stdio: ["ignore", "pipe", "inherit"],
      detached: ownGroup,
      env: { ...process.env, GW_CONFIG: JSON.stringify({ distAcpx: DIST_ACPX, graceMs: GRACE_MS, ...cfg }) },
    }),
  );
  const g: FixtureGateway = { child, events: [] };
  let buf = "";
  child.stdout!.on("data", (c: Buffer) => {
    buf += c.toString("utf8");
    for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
      g.events.push(JSON.parse(buf.slice(0, nl)) as FixtureGateway["events"][number]);
      buf = buf.slice(nl + 1);
    }
  });
  return g;
}
