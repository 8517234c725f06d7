// A chat turn in a real `openclaw gateway`: chat.send → the first text delta
// and → done, through proclease, against the same agent behind a bare peer
// backend (bench/openclaw-direct: the test-only plugin that spawns the agent
// with the ACP SDK, no lease), interleaved in one gateway run.
//
// Both plugins are installed in one fresh OpenClaw: proclease from the
// packed tarball with the docs' commands (as .ci/openclaw-real does), the
// peer linked from bench/openclaw-direct. Agent "leased" runs on backend
// proclease, agent "bare" on backend direct; both the fixture agent with the
// same flags, each a persistent session spawned with /acp spawn. The
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
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, Gateway, loadGatewayClient, waitFor } from "../.ci/openclaw-real/gateway.mjs";
import { prepareOpenClaw } from "../.ci/openclaw-real/setup.mjs";
import { check, fmtMs, median, openclawTmpGuard, printTable } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

export function skipReason() {
  if (!process.env.OPENCLAW_DIR || !process.env.PROCLEASE_TARBALL) return "needs OPENCLAW_DIR (node_modules/openclaw) and PROCLEASE_TARBALL (the packed proclease): CI's openclaw step runs it";
  const [maj, min] = process.versions.node.split(".").map(Number);
  if (maj < 24 || (maj === 24 && min < 16)) return `OpenClaw needs Node >= 24.16; this is ${process.version}`;
  return undefined;
}

export async function run({ quick }) {
  const rounds = quick ? 5 : 15;
  const tmpGuard = openclawTmpGuard();
  const work = mkdtempSync(join(tmpdir(), "proclease-oc-bench-"));
  const agent = { command: [process.execPath, join(root, "fixtures/acp-agent/agent.mjs"), "--turn=by-text", "--stream-batch=1", "--stream-gap-ms=10"] };
  const log = (m) => console.log(`  ${m}`);
  let gw;
  try {
    const oc = prepareOpenClaw({ root, openclawDir: process.env.OPENCLAW_DIR, tarball: process.env.PROCLEASE_TARBALL, work, pluginConfig: { agents: { leased: agent } }, log });
    oc.run(["plugins", "install", "-l", join(here, "openclaw-direct"), "--force", "--accept-capabilities"]);
    oc.run(["config", "set", "plugins.entries.direct-acp.config", JSON.stringify({ agents: { bare: agent } }), "--strict-json"]);
    oc.run(["plugins", "enable", "direct-acp"]);
    oc.run(["config", "set", "agents.entries.bare.runtime", JSON.stringify({ type: "acp", acp: { agent: "bare", backend: "direct", mode: "persistent" } }), "--strict-json"]);
    log("the peer: bench/openclaw-direct linked, agent bare on backend direct");
    gw = new Gateway({ openclawDir: process.env.OPENCLAW_DIR, env: oc.env, port: await freePort(), token: oc.token, GatewayClient: await loadGatewayClient(process.env.OPENCLAW_DIR) });
    await gw.start();
    const keys = {};
    for (const side of ["leased", "bare"]) {
      const reply = await gw.command(`/acp spawn ${side} --mode persistent --bind off`);
      const m = /Spawned ACP session (\S+) \(persistent, backend (\S+)\)/.exec(reply);
      if (!m) throw new Error(`/acp spawn ${side}: ${reply}`);
      keys[side] = m[1];
      log(`${side}: ${m[1]} on backend ${m[2]}`);
    }
    const turn = async (side) => {
      const { runId, sentAt } = await gw.send(keys[side], "/count 10");
      const done = await waitFor(`${side}: done`, () => gw.acpEvents(runId).find((e) => e.payload.data.eventType === "done"), 120_000, 1);
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
    const med = (side, k) => median(res[side].map((r) => r[k]));
    const rows = ["first", "done"].map((k) => ({ "chat.send →": k === "first" ? "first delta" : "done", proclease: fmtMs(med("leased", k)), "bare peer": fmtMs(med("bare", k)), ratio: `${(med("leased", k) / med("bare", k)).toFixed(3)}×` }));
    printTable(`a real openclaw gateway, ${rounds} interleaved rounds, "/count 10" paced 10 ms (medians)`, rows);
    const turnTarget = quick ? 1.5 : 1.1;
    const slack = quick ? 50 : 10;
    const firstRatio = med("leased", "first") / (turnTarget * med("bare", "first") + slack);
    return [
      check("real gateway turn (chat.send → done), proclease / bare peer", med("leased", "done") / med("bare", "done"), "<=", turnTarget),
      check(`real gateway first delta, proclease / (${turnTarget}× bare peer + ${slack} ms)`, firstRatio, "<=", 1),
    ];
  } finally {
    if (gw?.child && gw.child.exitCode === null) await gw.kill("SIGTERM").catch(() => gw.child.kill("SIGKILL"));
    rmSync(work, { recursive: true, force: true });
    tmpGuard.clean();
  }
}
