// Where a burst turn's time goes, per peer: the conversation bench's burst
// (one turn of N agent_message_chunk updates written at once, see
// conversation.bench.mjs) through one peer only, `--turns` times, printing
// wall time and this process's CPU time (user + system) per update. The
// CPU time of the gateway's own process is what a peer adds; on a shared
// host it moves far less than wall time does.
//
//   node bench/burst-profile.mjs --peer controller|bare [--turns 20] [--updates 10000] [--agent raw]
//
// --agent raw swaps the fixture agent (whose own SDK work competes with the
// client for the host's 2 cores) for one that writes the turn's lines at
// once from a prebuilt buffer: the turn's time is then the client's.
// `--peer both` interleaves the two peers in one process and prints their
// ratios; with `--baseline DIR` (another build's dist/, e.g. a copy made
// before a change) a controller from it runs beside them, for before/after
// in one process. `--profile-out FILE` (one peer) writes a V8 CPU profile of the
// timed turns (warm-up first, sampled every --interval-us, default 250);
// `node bench/burst-profile.mjs --summarize FILE.cpuprofile [--top 30]`
// prints its self time by source file and by function, in µs per update
// when given --per N (the updates the profile covers).
// Not a *.bench.mjs: run.mjs does not run it, it gates nothing.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Session } from "node:inspector/promises";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? dflt : args[i + 1];
};

if (args.includes("--as-raw-agent")) rawAgent();
else if (opt("summarize") !== undefined) summarize(opt("summarize"), Number(opt("top", 30)), Number(opt("per", 0)));
else await profile(opt("peer", "controller"), Number(opt("turns", 20)), Number(opt("updates", 10_000)));

/**
 * `--agent raw`: an agent that costs next to nothing, so a turn's time is
 * the client's: it answers initialize and session/new, and a prompt
 * "/chunks N" with N lines shaped as the fixture's (built once per N) in one
 * write, then the answer. Nothing else is spoken.
 */
function rawAgent() {
  const built = new Map();
  const chunks = (sessionId, n) => {
    if (!built.has(n)) {
      const lines = [];
      for (let i = 0; i < n; i++)
        lines.push(
          JSON.stringify({
            jsonrpc: "2.0",
            method: "session/update",
            params: {
              sessionId,
              update: {
                sessionUpdate: "agent_message_chunk",
                content: { type: "text", text: `chunk ${i} ` },
                _meta: { i, sentAt: performance.timeOrigin + performance.now() },
              },
            },
          }),
        );
      built.set(n, Buffer.from(lines.join("\n") + "\n"));
    }
    return built.get(n);
  };
  const answer = (id, result) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, result })}\n`);
  let rest = "";
  process.stdin.on("data", (b) => {
    const lines = (rest + b.toString("utf8")).split("\n");
    rest = lines.pop();
    for (const line of lines) {
      if (line.trim() === "") continue;
      const m = JSON.parse(line);
      if (m.id === undefined) continue;
      if (m.method === "initialize") answer(m.id, { protocolVersion: 1, agentCapabilities: {}, authMethods: [] });
      else if (m.method === "session/new") answer(m.id, { sessionId: "raw-session" });
      else if (m.method === "session/prompt") {
        const n = Number(/^\/chunks (\d+)/.exec(m.params.prompt[0].text)?.[1] ?? 0);
        process.stdout.write(chunks(m.params.sessionId, n));
        answer(m.id, { stopReason: "end_turn" });
      } else
        process.stdout.write(
          `${JSON.stringify({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } })}\n`,
        );
    }
  });
  process.stdin.on("end", () => process.exit(0));
}

async function controllerPeer(dir, argv, dist = join(root, "dist")) {
  const { createAcpxLifecycleController } = await import(pathToFileURL(join(dist, "acpx/index.js")).href);
  const ctl = await createAcpxLifecycleController({ stateDir: dir, graceMs: 300, maintenanceIntervalMs: 0 });
  const h = await ctl.ensureSession({ sessionKey: "bench:burst-profile", agentId: "main", command: argv });
  return {
    async turn(n) {
      const turn = ctl.startTurn(h, `/chunks ${n}`);
      let got = 0;
      for await (const _ of turn.events) got++;
      await turn.result;
      if (got !== n) throw new Error(`controller delivered ${got} of ${n} updates`);
    },
    async close() {
      await ctl.closeSession({ handle: h, discardPersistentState: true });
      await ctl.dispose();
    },
  };
}

async function barePeer(argv) {
  const { client, ndJsonStream } = await import("@agentclientprotocol/sdk");
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
  let got = 0;
  const conn = client({ name: "bench-bare" })
    .onNotification(
      "session/update",
      ({ params }) => void (params.update.sessionUpdate === "agent_message_chunk" && got++),
    )
    .connect(ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
  await conn.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const { sessionId } = await conn.agent.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  return {
    async turn(n) {
      got = 0;
      await conn.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `/chunks ${n}` }] });
      if (got !== n) throw new Error(`bare client got ${got} of ${n} updates`);
    },
    async close() {
      conn.close();
      child.kill("SIGKILL");
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", r)));
    },
  };
}

async function profile(peerName, turns, n) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-burst-profile-"));
  const argv =
    opt("agent", "fixture") === "raw"
      ? [process.execPath, fileURLToPath(import.meta.url), "--as-raw-agent"]
      : [process.execPath, AGENT, "--session-caps=none"];
  const baseline = opt("baseline");
  const names = peerName === "both" ? ["controller", "bare", ...(baseline ? ["baseline"] : [])] : [peerName];
  const peers = {};
  for (const name of names)
    peers[name] =
      name === "bare"
        ? await barePeer(argv)
        : await controllerPeer(join(dir, name), argv, name === "baseline" ? resolve(baseline) : undefined);
  const prof = opt("profile-out");
  if (prof !== undefined && names.length > 1) throw new Error("--profile-out profiles one peer: pass --peer");
  const inspector = prof === undefined ? null : new Session();
  const wall = Object.fromEntries(names.map((k) => [k, []]));
  const cpu = Object.fromEntries(names.map((k) => [k, []]));
  try {
    for (let i = 0; i < 3; i++) for (const name of names) await peers[name].turn(n);
    if (inspector) {
      inspector.connect();
      await inspector.post("Profiler.enable");
      await inspector.post("Profiler.setSamplingInterval", { interval: Number(opt("interval-us", 250)) });
      await inspector.post("Profiler.start");
    }
    for (let i = 0; i < turns; i++) {
      // interleaved, the order rotating each round
      for (const name of names.map((_, k) => names[(k + i) % names.length])) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await peers[name].turn(n);
        wall[name].push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpu[name].push((c.user + c.system) / 1000);
      }
    }
    if (inspector) {
      const { profile } = await inspector.post("Profiler.stop");
      writeFileSync(prof, JSON.stringify(profile));
    }
  } finally {
    for (const name of names) await peers[name].close();
    rmSync(dir, { recursive: true, force: true });
  }
  const us = (ms) => ((ms / n) * 1000).toFixed(2);
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  for (const name of names) {
    console.log(
      `${name}: ${turns} turns of ${n}: wall min ${us(Math.min(...wall[name]))} µs/update, median ${us(med(wall[name]))}; cpu min ${us(Math.min(...cpu[name]))} µs/update, median ${us(med(cpu[name]))}`,
    );
    if (args.includes("--verbose")) console.log(`  cpu µs/update: ${cpu[name].map(us).join(" ")}`);
  }
  const ratio = (a, b) => {
    const perRound = med(cpu[a].map((c, k) => c / cpu[b][k]));
    const wallRound = med(wall[a].map((w, k) => w / wall[b][k]));
    console.log(
      `${a} / ${b}: cpu median ${(med(cpu[a]) / med(cpu[b])).toFixed(3)}×, per-round median ${perRound.toFixed(3)}×; wall quietest ${(Math.min(...wall[a]) / Math.min(...wall[b])).toFixed(3)}×, per-round median ${wallRound.toFixed(3)}×`,
    );
  };
  if (names.length > 1) ratio("controller", "bare");
  if (peers.baseline) {
    ratio("baseline", "bare");
    ratio("controller", "baseline");
  }
  process.exit(0);
}

/** Self time of a .cpuprofile by file and by function. */
function summarize(file, top, per) {
  const p = JSON.parse(readFileSync(file, "utf8"));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const dt = p.timeDeltas;
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i];
    self.set(id, (self.get(id) ?? 0) + (dt[i + 1] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byFile = new Map();
  const byFn = new Map();
  const short = (url) =>
    url
      .replace(/^file:\/\//, "")
      .replace(root + "/", "")
      .replace(/.*node_modules\//, "nm/");
  for (const [id, us] of self) {
    const cf = byId.get(id).callFrame;
    const f = cf.url === "" ? `(${cf.functionName || "native"})` : short(cf.url);
    byFile.set(f, (byFile.get(f) ?? 0) + us);
    const fn = `${cf.functionName || "(anon)"} ${f}:${cf.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
  }
  const show = (title, m) => {
    console.log(`\n${title}`);
    for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      const perUpdate = per > 0 ? `${(us / per).toFixed(2).padStart(7)} µs/upd` : "";
      console.log(
        `${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(1).padStart(8)} ms ${perUpdate}  ${k}`,
      );
    }
  };
  console.log(`${file}: ${(total / 1000).toFixed(1)} ms sampled`);
  show("self time by file", byFile);
  show("self time by function", byFn);
}
