// OpenClaw's own session manager driving a turn through proclease's backend,
// against the same turn through a bare ACP connection, interleaved in one run.
//
// It needs what `npm run bench` on Node 20 does not have: OpenClaw (its
// manager requires Node >= 24.16) and an install of it. CI's openclaw step
// runs it with Node 24 and OPENCLAW_DIR naming a folder with
// node_modules/openclaw; anywhere else it is skipped, and says why
// (skipReason, read by run.mjs).
//
// The agent is the fixture (fixtures/acp-agent/agent.mjs, "/chunks N").
// - manager: getAcpSessionManager().runTurn on a session initialized with
//   this checkout's backend (dist/openclaw) registered through the SDK's
//   registerAcpRuntimeBackend; the text arrives through onEvent. Per turn
//   the manager also checks the cached handle (getStatus: the lease and
//   its tree, verified), writes the session state to its SQLite store
//   before and after, and reconciles identifiers (getStatus again).
// - bare: the agent spawned directly and the ACP SDK's client connection
//   (OpenClaw's own copy of @agentclientprotocol/sdk when it has
//   ClientSideConnection, else this package's `client()`), the updates
//   counted in its session/update handler.
// Interleaved rounds, the order alternating; the judged ratio compares each
// side's quietest round (interference only ever adds time), the median of
// per-round ratios printed beside it. Two turns: paced (the agent writes 5
// chunks, then waits 1 ms, as a model streams: what a gateway serves) and
// burst (every chunk at once: the per-update cost with nothing to hide it).
// Full run: 2 000 paced chunks and 10 000 burst chunks, 9 rounds each,
// target ≤ 1.1× for both. Quick: 5 rounds (with 3, one lucky round of one
// peer can decide the quietest ratio; conversation.bench.mjs has the case),
// guards ≤ 1.3× (paced) and ≤ 1.5× (burst), which a loaded 2-core host
// still meets when nothing regressed (under a load average of 10 from other
// work the burst read 2.3× in a quick run, the same code 1.05× on the quiet
// host).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { check, fmtMs, median, now, openclawTmpGuard, printTable } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");

/** Why this bench cannot run here (run.mjs prints it as a declared skip), or undefined. */
export function skipReason() {
  if (!process.env.OPENCLAW_DIR)
    return "needs OPENCLAW_DIR (a folder with node_modules/openclaw) and Node >= 24.16: CI's openclaw step runs it";
  const [maj, min] = process.versions.node.split(".").map(Number);
  if (maj < 24 || (maj === 24 && min < 16)) return `OpenClaw needs Node >= 24.16; this is ${process.version}`;
  return undefined;
}

async function openclaw(T) {
  // OpenClaw reads these when it loads: its state (SQLite), home, config and temp files all go to T
  Object.assign(process.env, {
    OPENCLAW_STATE_DIR: join(T, "state"),
    OPENCLAW_HOME: join(T, "home"),
    OPENCLAW_CONFIG_PATH: join(T, "openclaw.json"),
    TMPDIR: join(T, "tmp"),
  });
  for (const d of ["state", "home", "tmp"]) mkdirSync(join(T, d));
  const cfg = { acp: { backend: "proclease" }, logging: { file: join(T, "openclaw.log") } };
  writeFileSync(join(T, "openclaw.json"), JSON.stringify(cfg));
  const req = createRequire(join(process.env.OPENCLAW_DIR, "package.json"));
  const sdk = await import(pathToFileURL(req.resolve("openclaw/plugin-sdk/acp-runtime")).href);
  let acp;
  try {
    // OpenClaw's own copy of the ACP SDK (openclaw exports no ./package.json: its folder is where npm put it)
    acp = await import(
      pathToFileURL(
        createRequire(join(process.env.OPENCLAW_DIR, "node_modules/openclaw/package.json")).resolve(
          "@agentclientprotocol/sdk",
        ),
      ).href
    );
  } catch {
    acp = undefined;
  }
  return { sdk, cfg, acp };
}

async function managerPeer({ sdk, cfg }, T, argv) {
  const { createOpenClawAcpRuntime } = await import(pathToFileURL(join(root, "dist/openclaw/index.js")).href);
  const runtime = createOpenClawAcpRuntime({
    stateDir: join(T, "proclease"),
    graceMs: 300,
    maintenanceIntervalMs: 0,
    agents: { fixture: { command: argv } },
  });
  await runtime.ready;
  sdk.registerAcpRuntimeBackend({ id: runtime.backendId, runtime, healthy: () => runtime.healthy() });
  const manager = sdk.getAcpSessionManager();
  const sessionKey = "agent:main:acp:bench";
  await manager.initializeSession({ cfg, sessionKey, agent: "fixture", mode: "persistent" });
  let seq = 0;
  return {
    async turn(n) {
      const requestId = `bench-${++seq}`;
      let got = 0;
      let done;
      const t0 = now();
      await manager.runTurn({
        cfg,
        sessionKey,
        text: `/chunks ${n}`,
        mode: "prompt",
        requestId,
        admittedRunContext: { operationalRunInstance: { runId: requestId, instanceId: requestId } },
        onEvent: (e) => {
          if (e.type === "text_delta") got++;
          else if (e.type === "done") done = e;
        },
      });
      const ms = now() - t0;
      if (got !== n || done?.status !== "completed")
        throw new Error(`the manager delivered ${got} of ${n} text events, end ${JSON.stringify(done)}`);
      return ms;
    },
    async close() {
      await manager.closeSession({
        cfg,
        sessionKey,
        reason: "bench done",
        clearMeta: true,
        discardPersistentState: true,
      });
      sdk.unregisterAcpRuntimeBackend(runtime.backendId);
      await runtime.dispose();
    },
  };
}

/** The bare peer's connection: OpenClaw's SDK copy's ClientSideConnection when it has one, else this package's client(). */
async function connect(acp, child, onUpdate) {
  const stream = (m) => m.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  if (acp?.ClientSideConnection) {
    const conn = new acp.ClientSideConnection(
      () => ({
        sessionUpdate: async (p) => onUpdate(p.update),
        requestPermission: async () => ({ outcome: { outcome: "cancelled" } }),
      }),
      stream(acp),
    );
    return {
      kind: "OpenClaw's @agentclientprotocol/sdk ClientSideConnection",
      request: (method, params) =>
        method === "initialize"
          ? conn.initialize(params)
          : method === "session/new"
            ? conn.newSession(params)
            : conn.prompt(params),
      close: () => undefined,
    };
  }
  const own = await import("@agentclientprotocol/sdk");
  const conn = own
    .client({ name: "bench-bare" })
    .onNotification("session/update", ({ params }) => onUpdate(params.update))
    .connect(stream(own));
  return {
    kind: "this package's @agentclientprotocol/sdk client()",
    request: (method, params) => conn.agent.request(method, params),
    close: () => conn.close(),
  };
}

async function barePeer(acp, argv) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  let got = 0;
  const conn = await connect(acp, child, () => got++);
  await conn.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const { sessionId } = await conn.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  return {
    kind: conn.kind,
    async turn(n) {
      got = 0;
      const t0 = now();
      await conn.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `/chunks ${n}` }] });
      const ms = now() - t0;
      if (got !== n) throw new Error(`the bare connection got ${got} of ${n} updates`);
      return ms;
    },
    async close() {
      conn.close();
      child.kill("SIGKILL");
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", r)));
    },
  };
}

/** Interleaved rounds (order alternating), the first a warm-up. */
async function rounds(peers, n, count) {
  const times = { manager: [], bare: [] };
  for (let r = 0; r <= count; r++) {
    for (const name of r % 2 === 0 ? ["manager", "bare"] : ["bare", "manager"]) {
      const ms = await peers[name].turn(n);
      if (r > 0) times[name].push(ms);
    }
  }
  return times;
}

async function measure(oc, T, label, argv, n, count) {
  const peers = { manager: await managerPeer(oc, join(T, label), argv), bare: await barePeer(oc.acp, argv) };
  let times;
  try {
    times = await rounds(peers, n, count);
  } finally {
    await peers.manager.close();
    await peers.bare.close();
  }
  const qm = Math.min(...times.manager);
  const qb = Math.min(...times.bare);
  const perRound = times.manager.map((m, i) => m / times.bare[i]);
  printTable(`a ${label} turn of ${n} agent_message_chunk updates (${count} interleaved rounds)`, [
    {
      peer: "OpenClaw's manager → proclease backend (lease, wrapper, onEvent)",
      quietest: fmtMs(qm),
      median: fmtMs(median(times.manager)),
      "per update": fmtMs(qm / n),
    },
    {
      peer: `bare ACP connection (${peers.bare.kind})`,
      quietest: fmtMs(qb),
      median: fmtMs(median(times.bare)),
      "per update": fmtMs(qb / n),
    },
    {
      peer: "ratio",
      quietest: `${(qm / qb).toFixed(3)}×`,
      median: `per-round median ${median(perRound).toFixed(3)}×`,
      "per update": `+${fmtMs((qm - qb) / n)} per update`,
    },
  ]);
  return qm / qb;
}

export async function run({ quick }) {
  const why = skipReason();
  if (why !== undefined) throw new Error(`openclaw bench cannot run here: ${why}`);
  const T = mkdtempSync(join(tmpdir(), "proclease-bench-openclaw-"));
  const outside = openclawTmpGuard();
  const checks = [];
  try {
    const oc = await openclaw(T);
    const count = quick ? 5 : 9;
    const paced = await measure(
      oc,
      T,
      "paced",
      [process.execPath, AGENT, "--session-caps=resume,close,config,modes", "--stream-batch=5", "--stream-gap-ms=1"],
      2_000,
      count,
    );
    const burst = await measure(
      oc,
      T,
      "burst",
      [process.execPath, AGENT, "--session-caps=resume,close,config,modes"],
      10_000,
      count,
    );
    checks.push(
      check(
        `a paced turn, OpenClaw's manager through proclease vs a bare ACP connection${quick ? " (quick guard)" : ""}`,
        paced,
        "<=",
        quick ? 1.3 : 1.1,
      ),
    );
    checks.push(
      check(
        `a burst turn of 10 000 updates, the same peers${quick ? " (quick guard)" : ""}`,
        burst,
        "<=",
        quick ? 1.5 : 1.1,
      ),
    );
  } finally {
    rmSync(T, { recursive: true, force: true });
    // OpenClaw's own exit handler writes a quarantine database under its state
    // dir as the process exits; exit handlers run in the order they were
    // added, so this one, added last, removes the folder after it
    process.once("exit", () => {
      rmSync(T, { recursive: true, force: true });
      outside.clean();
    });
  }
  return checks;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { printChecks } = await import("./lib.mjs");
  printChecks(await run({ quick: process.argv.includes("--quick") }));
  process.exit(0);
}
