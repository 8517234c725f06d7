// The real-gateway scenario, step by step (each printed with its time):
// /acp doctor · the operator's path of docs/openclaw.md (TUI, gateway call),
// the refusal of /acp through gateway call, an agent's login failure ·
// /acp spawn (a leased tree) · a streamed multi-chunk chat ·
// /acp cancel mid-turn · two agents at once · SIGKILL of the gateway
// mid-turn, restart, resume · SIGKILL of its whole process group: the
// keeper ends the tree, setsid grandchild included; restart, resume · a config change reloading the plugin's
// service, resume · /acp close · SIGTERM: nothing left.
import { waitFor } from "./gateway.mjs";
import { alive, cgroupLeft, leaseOf, leases, markedProcesses } from "./host.mjs";
import { gatewayCallLacksAdmin, loginFailureNamesSettings, operatorPath, persistenceLineNote } from "./operator.mjs";

export const SETTLED = new Set(["closed", "lost"]);

export async function scenario(ctx) {
  const { gw, say, check, fmt } = ctx;
  let s = await gw.start();
  say(`gateway 1 (pid ${s.pid}) ready in ${fmt(s.readyMs)}, operator client connected at ${fmt(s.connectedMs)}`);

  const doctor = await gw.command("/acp doctor");
  say("/acp doctor:");
  console.log(
    doctor
      .split("\n")
      .map((l) => `    ${l}`)
      .join("\n"),
  );
  check(/registeredBackend: proclease/.test(doctor), "/acp doctor: registeredBackend is proclease");
  check(/healthy: yes/.test(doctor), "/acp doctor: the backend is healthy");

  // docs/openclaw.md's operator path as written: OpenClaw's TUI (operator.admin) and `openclaw gateway call`
  const opKey = await operatorPath({ ...ctx, agent: "second" });
  const opLease = await waitFor("the operator's session's lease to settle", () => {
    const l = leaseOf(leases(ctx.root, ctx.stateDir), opKey);
    return SETTLED.has(l?.state) && l;
  });
  check(opLease.state === "closed", `the operator's /acp close settled its lease ${opLease.state}`);
  await gatewayCallLacksAdmin({ ...ctx, agent: "second" });
  await loginFailureNamesSettings(ctx, "authy");

  const key = await spawnSession(ctx, "fixture");
  const tree = await leasedTree(ctx, key, 3);
  check(
    tree.length >= 3,
    `the session's lease marks its tree: ${tree.map((p) => `${p.pid} ${p.comm}`).join(", ")} (wrapper, adapter, setsid grandchild)`,
  );
  const who0 = await whoami(ctx, key);
  say(`agent session ${who0.sessionId} (${who0.how})`);

  await streamedTurn(ctx, key, 6, "chat.send");
  await cancelMidTurn(ctx, key);
  const key2 = await spawnSession(ctx, "second");
  await Promise.all([
    streamedTurn(ctx, key, 5, "agent fixture, at once"),
    streamedTurn(ctx, key2, 4, "agent second, at once"),
  ]);
  const l1 = leaseOf(leases(ctx.root, ctx.stateDir), key);
  const l2 = leaseOf(leases(ctx.root, ctx.stateDir), key2);
  check(
    l1.leaseId !== l2.leaseId && l1.state === "open" && l2.state === "open",
    "two agents' sessions ran at once, each on its own open lease",
  );

  persistenceLineNote(ctx);
  await gatewayKilled(ctx, key, who0, { group: false });
  await gatewayKilled(ctx, key, who0, { group: true });

  const before = (gw.log.match(/ACP runtime backend "proclease" registered/g) ?? []).length;
  const t = performance.now();
  ctx.openclaw([
    "config",
    "set",
    "plugins.entries.proclease.config",
    JSON.stringify({ ...ctx.pluginConfig, graceMs: 1500 }),
    "--strict-json",
  ]);
  await waitFor(
    "the plugin's service to restart on the new config",
    () => (gw.log.match(/ACP runtime backend "proclease" registered/g) ?? []).length > before,
    120_000,
    100,
  );
  say(`config change (graceMs) → the plugin's service restarted in ${fmt(performance.now() - t)}`);
  const who2 = await whoami(ctx, key);
  check(
    who2.sessionId === who0.sessionId && who2.how !== "new",
    `after the reload the next message streamed on the same agent session (${who2.how})`,
  );

  const closed = await gw.command(`/acp close ${key2}`);
  say(`/acp close: ${closed.split("\n")[0]}`);
  const c2 = await waitFor("the closed session's lease to settle", () => {
    const l = leaseOf(leases(ctx.root, ctx.stateDir), key2);
    return SETTLED.has(l.state) && l;
  });
  check(
    c2.state === "closed" && markedProcesses().every((p) => p.leaseId !== c2.leaseId),
    `/acp close: the lease is ${c2.state} and nothing carries it`,
  );

  await shutdown(ctx);
}

export async function spawnSession(ctx, agent) {
  const t = performance.now();
  const reply = await ctx.gw.command(`/acp spawn ${agent} --mode persistent --bind off`);
  const m = /Spawned ACP session (\S+)/.exec(reply);
  if (!m) throw new Error(`/acp spawn ${agent}: ${reply}`);
  ctx.say(`/acp spawn ${agent} → ${m[1]} in ${ctx.fmt(performance.now() - t)}`);
  return m[1];
}

/** The processes carrying the session's lease id, once at least n of them run. */
async function leasedTree(ctx, key, n) {
  const lease = leaseOf(leases(ctx.root, ctx.stateDir), key);
  if (!lease) throw new Error(`no lease records the session ${key}`);
  ctx.check(
    lease.state === "open" && lease.verdict === "owned",
    `its lease ${lease.leaseId} is open and verifies as owned (root pid ${lease.rootPid})`,
  );
  return waitFor(
    `${n} processes carrying lease ${lease.leaseId}`,
    () => {
      const mine = markedProcesses().filter((p) => p.leaseId === lease.leaseId);
      return mine.length >= n && mine;
    },
    30_000,
  );
}

export async function whoami(ctx, key) {
  const { runId } = await ctx.gw.send(key, "/agent-session");
  const end = await waitFor("the /agent-session reply", () => ctx.gw.chatEnd(runId), 120_000);
  const text = await replyText(ctx, key, runId, end);
  return JSON.parse(text.slice(text.indexOf("{"), text.lastIndexOf("}") + 1));
}

/** The run's reply as the transcript keeps it (the assistant message recorded under the run's id). */
async function replyText(ctx, key, runId, end) {
  if (end.payload.state !== "final")
    throw new Error(`the run ended ${end.payload.state}: ${end.payload.errorMessage ?? ""}`);
  const msg = await waitFor(
    `the transcript's reply of run ${runId}`,
    async () => {
      const h = await ctx.gw.history(key);
      return h.messages.find((x) => x.role === "assistant" && x.idempotencyKey === runId);
    },
    60_000,
    200,
  );
  return typeof msg.content === "string" ? msg.content : msg.content.map((b) => b.text ?? "").join("");
}

/** chat.send of "/count n": n text deltas in order, done, and the transcript's reply "1 2 … n ". */
export async function streamedTurn(ctx, key, n, label) {
  const { gw, check, fmt } = ctx;
  const { runId, sentAt } = await gw.send(key, `/count ${n}`);
  const done = await waitFor(
    `${label}: done`,
    () => gw.acpEvents(runId).find((e) => e.payload.data.eventType === "done"),
    120_000,
  );
  const deltas = gw
    .acpEvents(runId)
    .filter((e) => e.payload.data.eventType === "text_delta" && e.payload.data.stream === "output");
  const seqs = deltas.map((e) => e.payload.seq);
  const end = await waitFor(`${label}: the chat's final frame`, () => gw.chatEnd(runId), 60_000);
  const text = await replyText(ctx, key, runId, end);
  const want = Array.from({ length: n }, (_, i) => `${i + 1} `).join("");
  ctx.say(
    `${label}: first delta ${fmt(deltas[0].at - sentAt)}, done ${fmt(done.at - sentAt)} (${done.payload.data.stopReason}), ${deltas.length} deltas`,
  );
  check(
    deltas.length === n && seqs.every((v, i) => i === 0 || v > seqs[i - 1]),
    `${label}: ${n} text deltas streamed in order (seq ${seqs.join(",")})`,
  );
  check(
    done.payload.data.stopReason === "end_turn" && text.trim() === want.trim(),
    `${label}: ended done end_turn with the reply "${text.trim()}"`,
  );
}

async function cancelMidTurn(ctx, key) {
  const { gw, check, fmt } = ctx;
  const { runId } = await gw.send(key, "hang");
  await waitFor("the hanging turn's first event", () => gw.acpEvents(runId).length > 0, 120_000);
  const t = performance.now();
  const reply = await gw.command(`/acp cancel ${key}`);
  const done = await waitFor(
    "the cancelled turn to end",
    () => gw.acpEvents(runId).find((e) => e.payload.data.eventType === "done") ?? gw.chatEnd(runId),
    60_000,
  );
  ctx.say(
    `/acp cancel mid-turn: "${reply.split("\n")[0]}"; the turn ended ${done.payload.data?.stopReason ?? done.payload.state} in ${fmt(performance.now() - t)}`,
  );
  check(
    (done.payload.data?.stopReason ?? done.payload.state) !== "end_turn",
    "/acp cancel ended the turn before it finished",
  );
  await streamedTurn(ctx, key, 2, "after the cancel, the same session");
}

/** SIGKILL (the gateway, or its whole process group) mid-turn, then a restart: the old tree gone, the lease settled, the session resumed. */
async function gatewayKilled(ctx, key, who0, { group }) {
  const { gw, say, check, fmt } = ctx;
  const what = group ? "the gateway's process group" : "the gateway";
  const lease = leaseOf(leases(ctx.root, ctx.stateDir), key);
  const tree = await leasedTree(ctx, key, 3);
  const { runId } = await gw.send(key, "hang");
  await waitFor("the turn's first event", () => gw.acpEvents(runId).length > 0, 120_000);
  const t = performance.now();
  await gw.kill("SIGKILL", { group });
  say(`SIGKILL to ${what} mid-turn (tree: ${tree.map((p) => `${p.pid} ${p.comm}`).join(", ")})`);
  // alone: the wrapper sees its lifeline close and ends the tree; with its group (the wrapper killed too): the
  // gateway's keeper, in a session of its own, ends the lease's tree (the setsid grandchild included)
  const ender = group ? "the gateway's keeper" : "the wrapper";
  const gone = await waitFor(`${ender} to end the tree`, () => tree.every((p) => !alive(p.pid)), 30_000).then(
    () => true,
    () => false,
  );
  const left = tree.filter((p) => alive(p.pid));
  check(
    gone,
    `${ender} ended the whole tree before any restart${gone ? `, ${fmt(performance.now() - t)} after the kill` : `: still running ${left.map((p) => `${p.pid} ${p.comm}`).join(", ")}`}`,
  );
  const s = await gw.start();
  say(`gateway ${gw.incarnation} (pid ${s.pid}) ready in ${fmt(s.readyMs)}`);
  await waitFor("the earlier tree to be gone after the startup reap", () => tree.every((p) => !alive(p.pid)), 60_000);
  const settled = leases(ctx.root, ctx.stateDir).find((l) => l.leaseId === lease.leaseId);
  check(
    SETTLED.has(settled.state) && !cgroupLeft(settled),
    `${what} SIGKILLed: the earlier tree is gone, its lease ${settled.state} (${settled.settledAs ?? "no cause recorded"}), its cgroup removed`,
  );
  const who = await whoami(ctx, key);
  check(
    who.sessionId === who0.sessionId && who.how !== "new",
    `the next message on ${key} streamed with the agent session resumed (${who.how}, ${who.sessionId})`,
  );
}

async function shutdown(ctx) {
  const { gw, say, check, fmt } = ctx;
  const before = leases(ctx.root, ctx.stateDir);
  const t = performance.now();
  const how = await gw.kill("SIGTERM");
  say(`SIGTERM: the gateway exited (${how.code ?? how.signal}) in ${fmt(performance.now() - t)}`);
  const ids = new Set(before.map((l) => l.leaseId));
  const after = leases(ctx.root, ctx.stateDir);
  const unsettled = after.filter((l) => !SETTLED.has(l.state));
  const carriers = markedProcesses().filter((p) => ids.has(p.leaseId));
  const cgroups = after.filter(cgroupLeft);
  check(
    unsettled.length === 0,
    `no lease is open or closing (${after.length} leases: ${[...new Set(after.map((l) => l.state))].join(", ")})`,
  );
  check(
    carriers.length === 0,
    `no process carries a lease marker of this gateway${carriers.length ? `: ${carriers.map((p) => p.pid).join(", ")}` : ""}`,
  );
  check(
    cgroups.length === 0,
    `no lease cgroup folder is left${cgroups.length ? `: ${cgroups.map((l) => l.cgroup.path).join(", ")}` : ""}`,
  );
}
