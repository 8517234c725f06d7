// proclease as OpenClaw's ACP runtime backend, proven by OpenClaw's own
// session manager. Run by the Node OpenClaw needs (>= 24.16) with
// OPENCLAW_DIR naming a folder that holds node_modules/openclaw (2026.9.6)
// and node_modules/proclease (the package under test):
//
//   OPENCLAW_DIR=/tmp/oc node24 .ci/openclaw-check.mjs
//
// First OpenClaw's own plugin loader (`openclaw plugins inspect`) loads the
// plugin from the installed package with the config a user writes, and
// refuses a config its manifest's schema refuses (the install from the
// tarball, /acp doctor and chats in a real gateway are
// .ci/openclaw-real/'s). Then three gateway
// incarnations (.ci/openclaw-gateway.mjs, each its own Node process loading
// the entry package.json names, registering it in full mode and starting
// its service, as OpenClaw's gateway does) on one OpenClaw state dir:
//   1. initializeSession (persistent, oneshot); runTurn streaming through
//      onEvent; a oneshot turn (its lease closes); cancelSession mid-turn;
//      getSessionStatus; setSessionRuntimeMode and setSessionConfigOption;
//   2. after a clean stop: the manager re-ensures from its stored metadata,
//      the agent session resumes and the manager replays mode and model
//      before the turn; then this gateway is SIGKILLed mid-turn;
//   3. it reaps what gateway 2 left, the session resumes again, nothing of
//      gateway 2 runs, closeSession (after which status fails).
// Last, session visibility as OpenClaw's own checker and proclease decide it.
// Every manager call is printed with its time. At the end every lease of
// the run is settled and no process carries the run's instance id.
// OPENCLAW_STATE_DIR / OPENCLAW_HOME / OPENCLAW_CONFIG_PATH / TMPDIR point
// into one temp folder, removed at the end, and what the run added to
// OpenClaw's fixed /tmp folders (its lock files, CLI logs) is removed too.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const dir = process.env.OPENCLAW_DIR;
if (!dir) throw new Error("OPENCLAW_DIR must name the folder with node_modules/openclaw and node_modules/proclease");
const hostRequire = createRequire(join(dir, "package.json"));
// proclease's "exports" send require() to an ESM-only stub: its import entry, read from its package.json
const procleaseDir = dirname(hostRequire.resolve("proclease/package.json"));
const proclease = await import(
  pathToFileURL(
    join(procleaseDir, JSON.parse(readFileSync(join(procleaseDir, "package.json"), "utf8")).exports["."].import),
  ).href
);
const fixtureAgent = hostRequire.resolve("proclease/fixture-agent");
// openclaw exports no ./package.json: read it where npm put it
const openclawVersion = JSON.parse(readFileSync(join(dir, "node_modules/openclaw/package.json"), "utf8")).version;

const T0 = performance.now();
const stamp = () => `[+${String(Math.round(performance.now() - T0)).padStart(6)} ms]`;
const say = (line) => console.log(`${stamp()} ${line}`);
const fmt = (ms) => `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
let failures = 0;
function check(ok, what) {
  console.log(`${stamp()}   ${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

// OpenClaw's lock files (/tmp/openclaw-state-locks-<uid>) and CLI logs (/tmp/openclaw) ignore TMPDIR: what this run adds there goes at the end
const { openclawTmpGuard } = await import(new URL("../bench/lib.mjs", import.meta.url).href);
const outside = openclawTmpGuard();
const T = mkdtempSync(join(tmpdir(), "proclease-openclaw-check-"));
for (const d of ["state", "home", "tmp"]) mkdirSync(join(T, d));
const pluginConfig = {
  graceMs: 500,
  permissions: "allow-once",
  agents: { fixture: { command: [process.execPath, fixtureAgent, "--turn=by-text"] } },
};
// the plugin as a user configures it: loaded from the installed package, enabled, with its config
const cfg = {
  acp: { backend: "proclease" },
  logging: { file: join(T, "openclaw.log") },
  plugins: { load: { paths: [procleaseDir] }, entries: { proclease: { enabled: true, config: pluginConfig } } },
};
writeFileSync(join(T, "openclaw.json"), JSON.stringify(cfg));
const stateDir = join(T, "state", "proclease");
const env = {
  ...process.env,
  OPENCLAW_DIR: dir,
  OPENCLAW_STATE_DIR: join(T, "state"),
  OPENCLAW_HOME: join(T, "home"),
  OPENCLAW_CONFIG_PATH: join(T, "openclaw.json"),
  TMPDIR: join(T, "tmp"),
  CHECK_CFG: JSON.stringify(cfg),
};
// this process imports OpenClaw modules too (the visibility check): the same temp folders
for (const k of ["OPENCLAW_STATE_DIR", "OPENCLAW_HOME", "OPENCLAW_CONFIG_PATH", "TMPDIR"]) process.env[k] = env[k];

/** One gateway process: requests by id, events of a running turn to its listener. */
class Gateway {
  constructor(label) {
    this.label = label;
    this.seq = 0;
    this.pending = new Map();
    this.child = spawn(process.execPath, [join(HERE, "openclaw-gateway.mjs")], {
      env,
      stdio: ["pipe", "pipe", "inherit"],
    });
    this.exited = new Promise((r) => this.child.once("exit", (code, signal) => r({ code, signal })));
    this.ready = new Promise((resolve, reject) => {
      this.child.once("exit", (code, signal) =>
        reject(new Error(`${label} exited before it was ready (${signal ?? code})`)),
      );
      createInterface({ input: this.child.stdout }).on("line", (line) => {
        const m = JSON.parse(line);
        if (m.ready) return resolve(m);
        const p = this.pending.get(m.id);
        if (p === undefined) return;
        if (m.event !== undefined) return p.onEvent?.(m.event);
        this.pending.delete(m.id);
        p.resolve(m);
      });
    });
  }
  async start() {
    const r = await this.ready;
    say(
      `${this.label}: node ${r.node} (pid ${r.pid}) loaded the plugin from package.json openclaw.extensions and started it in ${fmt(r.ms)}: backend ${JSON.stringify(r.backend)} registered, healthy ${r.healthy}`,
    );
    for (const l of r.logs) say(`  plugin log: ${l}`);
    return r;
  }
  send(op, args, onEvent) {
    const id = ++this.seq;
    const done = new Promise((resolve) => this.pending.set(id, { resolve, onEvent }));
    this.child.stdin.write(`${JSON.stringify({ id, op, args })}\n`);
    return done;
  }
  /** A manager call, printed with its time and a summary of what it answered. */
  async call(op, args, summarize = () => "", onEvent) {
    const m = await this.send(op, args, onEvent);
    const what = args.sessionKey
      ? `${args.sessionKey}${args.mode ? `, ${args.mode}` : ""}${args.text ? `, ${JSON.stringify(args.text)}` : ""}`
      : "";
    if (m.ok)
      say(
        `${this.label} manager.${op}(${what}) ${fmt(m.ms)}${(() => {
          const s = summarize(m.value);
          return s ? `: ${s}` : "";
        })()}`,
      );
    else
      say(
        `${this.label} manager.${op}(${what}) ${fmt(m.ms)}: rejected ${m.error.map((e) => `${e.name}[${e.code ?? ""}${e.detailCode ? `/${e.detailCode}` : ""}]: ${e.message}`).join(" <- ")}`,
      );
    return m;
  }
  /** runTurn, collecting its onEvent stream; `onFirst` runs at the first event of the turn. */
  async turn(sessionKey, text, onFirst) {
    const events = [];
    let first = true;
    const m = await this.call(
      "runTurn",
      { sessionKey, text },
      () => "",
      (e) => {
        events.push(e);
        if (first && e.type === "text_delta" && e.stream === "thought") {
          first = false;
          onFirst?.(e);
        }
      },
    );
    const reply = events
      .filter((e) => e.type === "text_delta" && e.stream !== "thought")
      .map((e) => e.text)
      .join("");
    const done = events.find((e) => e.type === "done" || e.type === "error");
    say(
      `  onEvent: ${events.length} events (${[...new Set(events.map((e) => e.tag ?? e.type))].join(", ")}), reply ${JSON.stringify(reply.length > 160 ? `${reply.slice(0, 160)}…` : reply)}, ${JSON.stringify(done)}`,
    );
    return { m, events, reply, done };
  }
  async stop() {
    await this.call("stop", {}, (v) => `${v.stopped} service stopped (backend unregistered, live sessions closed)`);
    this.child.stdin.end();
    const e = await this.exited;
    say(`${this.label} exited (${e.signal ?? `code ${e.code}`})`);
  }
}

const P = "agent:main:acp:check-persistent";
const O = "agent:main:acp:check-oneshot";
const leases = async () => (await (await proclease.openLeaseReader(stateDir)).list()).leases;
const leaseOf = async (id) => (await leases()).find((l) => l.leaseId === id);
const alive = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};
/** pids whose environment carries KEY=VALUE (the test's own /proc read) */
function carriers(key, value) {
  const needle = Buffer.from(`${key}=${value}\0`);
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/environ`).includes(needle) && alive(Number(d))) out.push(Number(d));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}
const statusOf = (v) => v?.runtimeStatus?.details ?? {};

/** The openclaw CLI of the install under test: its exit code, its JSON output (when it printed one) and its text. */
function openclawCli(args, over = {}) {
  return new Promise((resolve) => {
    const cli = join(dir, "node_modules/openclaw/openclaw.mjs");
    const c = spawn(process.execPath, [cli, ...args], { env: { ...env, ...over }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (out += d));
    c.on("exit", (code) => {
      const at = out.startsWith("{") ? 0 : out.indexOf("\n{") + 1;
      let json = null;
      try {
        if (at > 0 || out.startsWith("{")) json = JSON.parse(out.slice(at));
      } catch {
        // not JSON: the text says why
      }
      resolve({ code, json, out });
    });
  });
}
const inspectPlugin = (configPath, over = {}) =>
  openclawCli(["plugins", "inspect", "proclease", "--runtime", "--json"], {
    OPENCLAW_CONFIG_PATH: configPath,
    ...over,
  });

/** OpenClaw's own plugin loader reads the manifest, validates the config against it, and loads the entry. */
async function loader() {
  let t = performance.now();
  const ok = await inspectPlugin(join(T, "openclaw.json"));
  const p = ok.json?.plugin ?? {};
  say(
    `openclaw plugins inspect proclease --runtime --json ${fmt(performance.now() - t)}: status ${p.status}, format ${p.format}, origin ${p.origin}, source ${p.source}`,
  );
  check(
    ok.code === 0 &&
      p.status === "loaded" &&
      p.format === "openclaw" &&
      p.source === join(procleaseDir, "dist/openclaw/plugin.js"),
    "OpenClaw's loader found the manifest, took the entry package.json names and loaded it",
  );
  check(
    p.configSchema === true && p.configJsonSchema?.required?.includes("agents"),
    "and read the plugin's config schema from openclaw.plugin.json",
  );
  const bad = structuredClone(cfg);
  bad.plugins.entries.proclease.config.agents.fixture.command = "node agent.mjs";
  writeFileSync(join(T, "bad.json"), JSON.stringify(bad));
  t = performance.now();
  const no = await inspectPlugin(join(T, "bad.json"));
  const problem = no.out.split("\n").find((l) => l.includes("plugins.entries.proclease.config")) ?? "";
  say(
    `the same with a shell string as the agent's command ${fmt(performance.now() - t)}: exit ${no.code}: ${problem.trim()}`,
  );
  check(
    no.code !== 0 && /agents\.fixture\.command.*must be array/.test(problem),
    "OpenClaw refuses a config the manifest's schema refuses (a command must be an argv)",
  );
}
const gateways = [];

/** What the incarnations hand on: the persistent session's agent session id, its leases, gateway 2's pids. */
const run = { A1: undefined, L1: undefined, L2: undefined, killedPids: [] };

/** Gateway 1: sessions, turns, cancel, status and controls, then a clean stop. */
async function gatewayOne() {
  const g1 = new Gateway("gateway 1");
  gateways.push(g1);
  await g1.start();
  const init = await g1.call(
    "initializeSession",
    { sessionKey: P, agent: "fixture", mode: "persistent" },
    (v) => `backend ${v.handle.backend}, agent session ${v.handle.agentSessionId}, lease ${v.handle.leaseId}`,
  );
  check(
    init.ok && init.value.handle.backend === "proclease",
    'the handle carries backend "proclease" (OpenClaw finds the backend again by it)',
  );
  const A1 = (run.A1 = init.value?.handle.agentSessionId);
  const L1 = (run.L1 = init.value?.handle.leaseId);
  const once = await g1.call(
    "initializeSession",
    { sessionKey: O, agent: "fixture", mode: "oneshot" },
    (v) => `lease ${v.handle.leaseId}`,
  );
  const story = await g1.turn(P, "/story");
  check(
    story.m.ok &&
      story.reply === "permission: allow. Done." &&
      story.done?.type === "done" &&
      story.done.stopReason === "end_turn",
    "runTurn streamed the reply through onEvent (a permission answered allow-once) and ended done/end_turn",
  );
  check(
    story.events.some((e) => e.type === "tool_call" && e.title === "Write notes.txt") &&
      story.events.some((e) => e.type === "status" && e.tag === "plan"),
    "tool calls and the plan reached OpenClaw as tool_call and status events",
  );
  const oneTurn = await g1.turn(O, "hello");
  const onceLease = once.value?.handle.leaseId;
  check(
    oneTurn.reply === "ok" &&
      (await leaseOf(onceLease))?.state === "closed" &&
      carriers("OPENCLAW_ACPX_LEASE_ID", onceLease).length === 0,
    "the oneshot session closed after its turn: its lease is closed, nothing carries it",
  );
  const cancelled = await g1.turn(
    P,
    "hang",
    () => void g1.call("cancelSession", { sessionKey: P, reason: "check: cancel mid-turn" }),
  );
  check(
    cancelled.done?.type === "done" && cancelled.done.status === "cancelled",
    "cancelSession mid-turn: the turn ended done/cancelled (ACP session/cancel; nothing signalled)",
  );
  const st = await g1.call(
    "getSessionStatus",
    { sessionKey: P },
    (v) => `state ${v.state}, ${v.runtimeStatus?.summary}`,
  );
  const d1 = statusOf(st.value);
  check(
    st.ok &&
      d1.lease?.leaseId === L1 &&
      d1.lease?.state === "open" &&
      d1.tree?.verified === true &&
      d1.tree.members.length >= 2,
    "getSessionStatus: the lease (open) and its verified tree",
  );
  check(
    d1.tree?.members.every((m) => alive(m.pid)) &&
      d1.tree.members.length === carriers("OPENCLAW_ACPX_LEASE_ID", L1).length,
    "the tree's members are exactly the live processes carrying the lease",
  );
  await g1.call("setSessionRuntimeMode", { sessionKey: P, runtimeMode: "code" }, (v) => JSON.stringify(v));
  await g1.call("setSessionConfigOption", { sessionKey: P, key: "model", value: "fixture-large" }, (v) =>
    JSON.stringify(v),
  );
  const who1 = await g1.turn(P, "/whoami");
  const w1 = JSON.parse(who1.reply || "{}");
  check(
    w1.modeId === "code" && w1.model === "fixture-large" && w1.sessionId === A1,
    "the agent runs in mode code with model fixture-large",
  );
  await g1.stop();
}

/** Gateway 2: a clean restart (the manager re-ensures from its metadata and replays its controls), then a SIGKILL mid-turn. */
async function gatewayTwo() {
  const { A1, L1 } = run;
  const g2 = new Gateway("gateway 2");
  gateways.push(g2);
  await g2.start();
  check(
    (await leaseOf(L1))?.state === "closed",
    `gateway 1's lease ${L1} is ${(await leaseOf(L1))?.state}: its service stop closed the session through the lease`,
  );
  const st2 = await g2.call(
    "getSessionStatus",
    { sessionKey: P },
    (v) => `state ${v.state}, ${v.runtimeStatus?.summary}`,
  );
  const d2 = statusOf(st2.value);
  const L2 = (run.L2 = d2.lease?.leaseId);
  check(
    st2.ok && d2.resumed === true && st2.value.runtimeStatus.agentSessionId === A1 && L2 !== L1,
    "the manager re-ensured from its stored metadata: same agent session (resumed), a new lease",
  );
  // the new agent process resumed the session with its defaults (it keeps no session store here): mode ask
  check(d2.modes?.current === "ask", `before the next turn the agent's mode is its default (${d2.modes?.current})`);
  const who2 = await g2.turn(P, "/whoami");
  const w2 = JSON.parse(who2.reply || "{}");
  check(
    w2.sessionId === A1 && w2.how === "resume" && w2.modeId === "code" && w2.model === "fixture-large",
    "a new agent process took the session back (session/resume) and the manager replayed mode code and model fixture-large before the turn",
  );
  // the turn never answers: its gateway dies in it
  void g2.turn(P, "hang", () => {
    run.killedPids = carriers("OPENCLAW_ACPX_LEASE_ID", L2);
    say(`SIGKILL → gateway 2 (pid ${g2.child.pid}) mid-turn; lease ${L2} is carried by ${run.killedPids.join(", ")}`);
    g2.child.kill("SIGKILL");
  });
  const ex = await g2.exited;
  say(`gateway 2 exited (${ex.signal ?? ex.code})`);
}

/** Gateway 3: after the SIGKILL it reaps what gateway 2 left; the session resumes; closeSession. */
async function gatewayThree() {
  const { A1, L2, killedPids } = run;
  const g3 = new Gateway("gateway 3");
  gateways.push(g3);
  await g3.start();
  const l2 = await leaseOf(L2);
  check(
    ["closed", "lost"].includes(l2?.state),
    `gateway 2's lease ${L2} is settled (${l2?.state}): the new gateway's startup reap took it`,
  );
  check(
    killedPids.length >= 2 && killedPids.every((p) => !alive(p)) && carriers("OPENCLAW_ACPX_LEASE_ID", L2).length === 0,
    `nothing of gateway 2 runs: ${killedPids.join(", ")} are gone and no process carries its lease`,
  );
  const who3 = await g3.turn(P, "/whoami");
  const w3 = JSON.parse(who3.reply || "{}");
  check(w3.sessionId === A1 && w3.how === "resume", "the persistent session resumed again in gateway 3");
  const closed = await g3.call(
    "closeSession",
    { sessionKey: P, reason: "check done", clearMeta: true, discardPersistentState: true },
    (v) => JSON.stringify(v),
  );
  check(
    closed.ok && closed.value.runtimeClosed === true && closed.value.metaCleared === true,
    "closeSession closed the runtime and cleared the metadata",
  );
  const after = await g3.call("getSessionStatus", { sessionKey: P });
  check(!after.ok && after.error[0].code === "ACP_SESSION_INIT_FAILED", "after closeSession, getSessionStatus fails");
  await g3.stop();
}

/** The end: every lease settled, nothing of the run alive. */
async function theEnd() {
  const all = await leases();
  const states = all.reduce((m, l) => ({ ...m, [l.state]: (m[l.state] ?? 0) + 1 }), {});
  check(
    all.length > 0 && all.every((l) => l.state === "closed" || l.state === "lost"),
    `every lease of the run settled: ${JSON.stringify(states)}`,
  );
  const instance = await proclease.readGatewayInstanceId(stateDir);
  check(
    carriers("OPENCLAW_GATEWAY_INSTANCE_ID", instance).length === 0,
    `no process carries the run's instance id ${instance}`,
  );
}

/**
 * Session visibility as OpenClaw's own checker decides it (plugin-sdk
 * session-visibility) and as proclease's canSeeSessionRow does, for the
 * rows where they differ: proclease's levels nest (self ⊆ tree ⊆ agent ⊆
 * all) and its sandbox clamp only narrows. The README's "Use it in
 * OpenClaw" states these differences; this is the check behind them.
 */
async function visibility() {
  const vis = await import(pathToFileURL(hostRequire.resolve("openclaw/plugin-sdk/session-visibility")).href);
  const requesterSessionKey = "agent:main:main";
  const child = { key: "agent:codex:acp:child", agentId: "codex", spawnedBy: requesterSessionKey };
  const cfg = { tools: { agentToAgent: { enabled: false } } };
  const theirs = (level) =>
    vis
      .createSessionVisibilityRowChecker({
        action: "history",
        requesterSessionKey,
        visibility: level,
        a2aPolicy: vis.createAgentToAgentPolicy(cfg),
      })
      .check(child);
  const ours = (level) =>
    proclease.canSeeSessionRow({ requesterSessionKey, row: child, visibility: level, a2aPolicy: { enabled: false } });
  say(
    "session visibility of a cross-agent ACP child the requester spawned (agent-to-agent off), OpenClaw's checker vs proclease's:",
  );
  for (const level of ["self", "tree", "agent", "all"])
    say(
      `  ${level.padEnd(5)} OpenClaw ${theirs(level).allowed ? "visible" : `hidden (${theirs(level).error})`}; proclease ${ours(level) ? "visible" : "hidden"}`,
    );
  check(
    theirs("tree").allowed && !theirs("agent").allowed,
    "OpenClaw: `tree` shows the child and the wider `agent` hides it",
  );
  check(
    ours("tree") && ours("agent") && ours("all") && !ours("self"),
    "proclease: every level from `tree` up shows it (self ⊆ tree ⊆ agent ⊆ all)",
  );
  const clampTheirs = vis.resolveEffectiveSessionToolsVisibility({
    cfg: { tools: { sessions: { visibility: "self" } } },
    sandboxed: true,
  });
  const clampOurs = proclease.resolveSessionVisibility(
    { tools: { sessions: { visibility: "self" } } },
    { sandboxed: true },
  );
  say(`  a sandboxed requester set to self: OpenClaw ${clampTheirs}, proclease ${clampOurs}`);
  check(
    clampTheirs === "tree" && clampOurs === "self",
    "the sandbox clamp: OpenClaw widens self to tree, proclease only narrows",
  );
  const unsetTheirs = vis.resolveSessionToolsVisibility({});
  const unsetOurs = proclease.resolveSessionVisibility({});
  say(`  no tools.sessions.visibility: OpenClaw ${unsetTheirs}, proclease ${unsetOurs}`);
  check(unsetTheirs === "all" && unsetOurs === "tree", "unset: OpenClaw all, proclease tree");
}

say(
  `openclaw ${openclawVersion} under node ${process.version}; OpenClaw state ${join(T, "state")}, config ${join(T, "openclaw.json")}`,
);
try {
  await loader();
  await gatewayOne();
  await gatewayTwo();
  await gatewayThree();
  await theEnd();
  await visibility();
} catch (e) {
  failures++;
  console.error(`${stamp()} FAIL: ${e?.stack ?? e}`);
} finally {
  for (const g of gateways) if (g.child.exitCode === null && g.child.signalCode === null) g.child.kill("SIGKILL");
  await Promise.all(gateways.map((g) => g.exited));
  rmSync(T, { recursive: true, force: true });
  outside.clean();
}
// OpenClaw's own exit handler writes into its state dir as this process exits: the folders go once more after it
process.once("exit", () => {
  rmSync(T, { recursive: true, force: true });
  outside.clean();
});
console.log(
  failures === 0
    ? `${stamp()} openclaw check: every step verified.`
    : `${stamp()} openclaw check: ${failures} check(s) FAILED`,
);
process.exit(failures === 0 ? 0 : 1);
