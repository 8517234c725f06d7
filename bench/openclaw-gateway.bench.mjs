// A chat turn in a real `openclaw gateway`: chat.send → the first text delta
// and → done, through proclease, against the same agent behind a bare peer
// backend (bench/openclaw-direct: the test-only plugin that spawns the agent
// with the ACP SDK, no lease), interleaved in one gateway run.
//
// Two fresh OpenClaw gateways run side by side on loopback for the whole
// run: one with proclease installed from the packed tarball by the docs'
// commands (as .ci/openclaw-real does), agent "leased"; one with only the
// peer (bench/openclaw-direct, linked) as its ACP backend, agent "bare".
// OpenClaw's /acp spawn opens a session on the gateway's acp.backend, so one
// gateway per backend. Both agents are the fixture with the same flags, each
// a persistent session opened with /acp spawn. The
// client is OpenClaw's GatewayClient; times are taken on the client, from
// the chat.send request to the gateway's `agent` frames of the run (the acp
// stream's first text_delta, then done), so both sides pay the gateway's own
// routing, transcript and broadcast.
// The turn: "/count 10", the agent pacing its chunks 10 ms apart, as a
// model streams. Rounds alternate which side goes first; the judged figures
// are medians. Full: 15 rounds, targets turn ≤ 1.1× and first delta ≤ 1.1×
// the peer's + 10 ms. Quick: 5 rounds, guards turn ≤ 1.5× and first delta ≤
// 1.5× + 50 ms (a loaded 2-core host moves single turns by tens of ms).
//
// It needs OPENCLAW_DIR (node_modules/openclaw), PROCLEASE_TARBALL and Node
// >= 24.16: CI's openclaw step runs it; elsewhere it is skipped, saying why.
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, Gateway, loadGatewayClient, waitFor } from "../.ci/openclaw-real/gateway.mjs";
import { leases } from "../.ci/openclaw-real/host.mjs";
import { openclaw, prepareOpenClaw } from "../.ci/openclaw-real/setup.mjs";
import { check, fmtMs, median, openclawTmpGuard, printTable } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

export function skipReason() {
  if (!process.env.OPENCLAW_DIR || !process.env.PROCLEASE_TARBALL)
    return "needs OPENCLAW_DIR (node_modules/openclaw) and PROCLEASE_TARBALL (the packed proclease): CI's openclaw step runs it";
  const [maj, min] = process.versions.node.split(".").map(Number);
  if (maj < 24 || (maj === 24 && min < 16)) return `OpenClaw needs Node >= 24.16; this is ${process.version}`;
  return undefined;
}

/** /acp spawn of an agent on a gateway; its session key, checked to be on `backend`. */
async function spawnOn(gw, agent, backend) {
  const reply = await gw.command(`/acp spawn ${agent} --mode persistent --bind off`);
  const m = /Spawned ACP session (\S+) \(persistent, backend (\S+)\)/.exec(reply);
  if (!m || m[2] !== backend) throw new Error(`/acp spawn ${agent} on backend ${backend}: ${reply}`);
  return m[1];
}

/**
 * The peer's gateway: a fresh OpenClaw with only bench/openclaw-direct
 * (linked), its backend selected, the agent "bare" on it: the same
 * prerequisites and command shapes as proclease's (setup.mjs).
 */
function preparePeer(work, agent, log) {
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  const token = `bench-${randomBytes(16).toString("hex")}`;
  const env = { ...process.env, OPENCLAW_STATE_DIR: join(work, "state"), HOME: home, NO_COLOR: "1" };
  const run = (argv) => openclaw(process.env.OPENCLAW_DIR, env, argv);
  run(["config", "set", "gateway.mode", "local"]);
  run(["config", "set", "gateway.auth.token", token]);
  run(["plugins", "install", "-l", join(here, "openclaw-direct"), "--force", "--accept-capabilities"]);
  run([
    "config",
    "set",
    "plugins.entries.direct-acp.config",
    JSON.stringify({ agents: { bare: agent } }),
    "--strict-json",
  ]);
  run(["plugins", "enable", "direct-acp"]);
  run(["config", "set", "acp.backend", "direct"]);
  run([
    "config",
    "set",
    "agents.entries.bare.runtime",
    JSON.stringify({ type: "acp", acp: { agent: "bare", backend: "direct", mode: "persistent" } }),
    "--strict-json",
  ]);
  log("the peer's gateway: bench/openclaw-direct linked, acp.backend direct, agent bare");
  return { env, token };
}

export async function run({ quick }) {
  const rounds = quick ? 5 : 15;
  const tmpGuard = openclawTmpGuard();
  const work = mkdtempSync(join(tmpdir(), "proclease-oc-bench-"));
  const agent = {
    command: [
      process.execPath,
      join(root, "fixtures/acp-agent/agent.mjs"),
      "--turn=by-text",
      "--stream-batch=1",
      "--stream-gap-ms=10",
    ],
  };
  const log = (m) => console.log(`  ${m}`);
  const gws = {};
  try {
    const oc = prepareOpenClaw({
      root,
      openclawDir: process.env.OPENCLAW_DIR,
      tarball: process.env.PROCLEASE_TARBALL,
      work: join(work, "leased"),
      pluginConfig: { agents: { leased: agent } },
      log,
    });
    const peer = preparePeer(join(work, "bare"), agent, log);
    const GatewayClient = await loadGatewayClient(process.env.OPENCLAW_DIR);
    gws.leased = new Gateway({
      openclawDir: process.env.OPENCLAW_DIR,
      env: oc.env,
      port: await freePort(),
      token: oc.token,
      GatewayClient,
    });
    gws.bare = new Gateway({
      openclawDir: process.env.OPENCLAW_DIR,
      env: peer.env,
      port: await freePort(),
      token: peer.token,
      GatewayClient,
    });
    await Promise.all([gws.leased.start(), gws.bare.start()]);
    const keys = {
      leased: await spawnOn(gws.leased, "leased", "proclease"),
      bare: await spawnOn(gws.bare, "bare", "direct"),
    };
    log(
      `leased: ${keys.leased} (backend proclease); bare: ${keys.bare} (backend direct); both gateways run throughout`,
    );
    const turn = async (side) => {
      const gw = gws[side];
      const { runId, sentAt } = await gw.send(keys[side], "/count 10");
      const done = await waitFor(
        `${side}: done`,
        () => gw.acpEvents(runId).find((e) => e.payload.data.eventType === "done"),
        120_000,
        1,
      );
      const first = gw.acpEvents(runId).find((e) => e.payload.data.eventType === "text_delta");
      await waitFor(`${side}: the chat's final frame`, () => gw.chatEnd(runId), 60_000, 5);
      return { first: first.at - sentAt, done: done.at - sentAt };
    };
    for (const side of ["leased", "bare"]) await turn(side); // warm-up: each side's first turn loads its code paths
    const res = { leased: [], bare: [] };
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? ["leased", "bare"] : ["bare", "leased"];
      for (const side of order) res[side].push(await turn(side));
    }
    // the bare side ran on its own backend: proclease leased the "leased" agent's session, nothing else
    const sessionsLeased = leases(root, oc.procleaseStateDir).map((l) => l.sessionKey);
    if (sessionsLeased.length !== 1 || !sessionsLeased[0].endsWith(keys.leased))
      throw new Error(`the sessions proclease leased: ${sessionsLeased.join(", ")}`);
    const med = (side, k) => median(res[side].map((r) => r[k]));
    const rows = ["first", "done"].map((k) => ({
      "chat.send →": k === "first" ? "first delta" : "done",
      proclease: fmtMs(med("leased", k)),
      "bare peer": fmtMs(med("bare", k)),
      ratio: `${(med("leased", k) / med("bare", k)).toFixed(3)}×`,
    }));
    printTable(`a real openclaw gateway, ${rounds} interleaved rounds, "/count 10" paced 10 ms (medians)`, rows);
    const turnTarget = quick ? 1.5 : 1.1;
    const slack = quick ? 50 : 10;
    const firstRatio = med("leased", "first") / (turnTarget * med("bare", "first") + slack);
    return [
      check(
        "real gateway turn (chat.send → done), proclease / bare peer",
        med("leased", "done") / med("bare", "done"),
        "<=",
        turnTarget,
      ),
      check(`real gateway first delta, proclease / (${turnTarget}× bare peer + ${slack} ms)`, firstRatio, "<=", 1),
    ];
  } catch (err) {
    for (const [side, gw] of Object.entries(gws))
      if (gw.log) console.error(`--- the ${side} gateway's log (last 4000 characters):\n${gw.log.slice(-4000)}`);
    throw err;
  } finally {
    for (const gw of Object.values(gws))
      if (gw.child && gw.child.exitCode === null) await gw.kill("SIGTERM").catch(() => gw.child.kill("SIGKILL"));
    rmSync(work, { recursive: true, force: true });
    tmpGuard.clean();
  }
}
