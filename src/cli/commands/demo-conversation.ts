/**
 * The demo's first act: the conversation on real processes, before the
 * lifecycle story (demo.ts). Every step is checked like the others.
 *
 *  a. a streamed turn: each update printed as it arrives, a tool call that
 *     asks permission, the permission answered by the gateway's hook
 *  b. a client terminal whose command forks a setsid grandchild that ignores
 *     SIGTERM: gone after the session's close, its lease settled
 *  c. a stand-in gateway SIGKILLed mid-turn; a new controller on the same
 *     state dir reaps what it left and takes the agent session back
 *     (session/resume): the agent reports the same session id
 *
 * The demo signals only its own unreaped children (the stand-in gateway);
 * everything else ends through the controller.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../acpx/controller/types.js";
import { signalUnreapedChild } from "../../facts/signal.js";

export interface DemoContext {
  stateDir: string;
  graceMs: number;
  agent: string;
  acpxIndex: string;
  log(msg: string): void;
  check(ok: boolean, what: string): void;
  alive(pid: number): Promise<boolean>;
  /** processes and controllers the demo's cleanup must end */
  spawned: ChildProcess[];
  controllers: AcpxLifecycleController[];
  leaseIds: string[];
  out(text: string): void;
}

const KEY = "agent:main:acp:conversation";

/** One line per update, as it arrives; message chunks run together on one line. */
function describeUpdate(u: SessionUpdate): string | null {
  switch (u.sessionUpdate) {
    case "agent_message_chunk":
      return u.content.type === "text" ? u.content.text : `[${u.content.type}]`;
    case "agent_thought_chunk":
      return `  thought: ${u.content.type === "text" ? u.content.text : u.content.type}`;
    case "plan":
      return `  plan: ${u.entries.map((e) => `${e.content} (${e.status})`).join("; ")}`;
    case "tool_call":
      return `  tool call ${u.toolCallId}: ${u.title} (${u.status ?? "pending"})`;
    case "tool_call_update":
      return `  tool call ${u.toolCallId}: ${u.status ?? "updated"}`;
    case "usage_update":
      return `  usage: ${u.used} of ${u.size} tokens of context`;
    default:
      return null;
  }
}

export async function conversationStory(c: DemoContext): Promise<void> {
  const store = join(c.stateDir, "agent-sessions");
  const argv = [process.execPath, c.agent, "--turn=by-text", `--session-store=${store}`];
  const ctl = await createAcpxLifecycleController({
    stateDir: c.stateDir,
    graceMs: c.graceMs,
    maintenanceIntervalMs: 0,
    clientCapabilities: { terminal: true },
    onPermissionRequest: (req) => {
      const allow = req.options.find((o) => o.kind === "allow_once");
      c.log(`  permission asked for "${req.toolCall.title}": answered ${allow ? allow.name : "cancelled"}`);
      return allow ? { outcome: "selected", optionId: allow.optionId } : { outcome: "cancelled" };
    },
  });
  c.controllers.push(ctl);
  const h = await ctl.ensureSession({ sessionKey: KEY, agentId: "main", command: argv });
  c.leaseIds.push(h.leaseId);
  c.log(`conversation: lease ${h.leaseId}, ACP session ${h.acpSessionId} (agent ${h.agentInfo?.name ?? "?"})`);

  // a. the streamed turn
  const turn = ctl.startTurn(h, "/story");
  let reply = "";
  for await (const u of turn.events) {
    const line = describeUpdate(u);
    if (line === null) continue;
    if (u.sessionUpdate === "agent_message_chunk") {
      reply += line;
      c.log(`  reply so far: ${reply}`);
    } else c.log(line);
  }
  const r = await turn.result;
  c.check(
    reply === "permission: allow. Done." && r.stopReason === "end_turn",
    `the streamed reply arrived whole ("${reply}", ${r.stopReason}), the permission answered "allow"`,
  );

  // b. a terminal whose grandchild escapes into its own session and ignores SIGTERM
  const pidfile = join(c.stateDir, "terminal-grandchild.pid");
  const cmd = `setsid sh -c 'trap "" TERM; exec sleep 600' & echo $! > ${pidfile}; wait`;
  const started = await say(ctl, h, `/terminal-start ${cmd}`);
  const grandchild = await readPid(pidfile);
  c.log(`  the agent ran a terminal (${started}): its setsid grandchild ${grandchild} ignores SIGTERM`);
  c.check(await c.alive(grandchild), `the terminal's grandchild ${grandchild} is running`);
  const closed = await ctl.closeSession({ handle: h, reason: "demo: conversation over" });
  c.log(`closeSession: ${closed.outcome}; ACP session/close sent first, then the terminal's tree and the adapter's`);
  const terminalLeases = (await ctl.listLeases()).filter((l) => l.sessionKey.startsWith("supervisor:acp-terminal-"));
  c.check(
    !(await c.alive(grandchild)) && terminalLeases.every((l) => l.state === "closed" || l.state === "lost"),
    `after the close the terminal's grandchild ${grandchild} is gone and its lease settled`,
  );
  await ctl.dispose();
  c.controllers.splice(c.controllers.indexOf(ctl), 1);

  // c. a gateway killed mid-turn, the session taken back by the next one
  await resumeAfterKill(c, argv, store, h.acpSessionId);
}

async function resumeAfterKill(c: DemoContext, argv: string[], store: string, acpSessionId: string): Promise<void> {
  c.out("\n");
  const gw = startConversationGateway(c, argv);
  c.spawned.push(gw);
  const first = await readJsonLine<AcpRuntimeHandle>(gw);
  c.leaseIds.push(first.leaseId);
  c.check(
    first.resumed && first.acpSessionId === acpSessionId,
    `a stand-in gateway ${gw.pid} took the closed session back (${first.acpSessionId}, resumed: ${first.resumed})`,
  );
  // mid-turn: the agent has the prompt (its session store says so) when the gateway dies
  await waitForHistory(store, first.acpSessionId, "hang");
  signalUnreapedChild(gw, "SIGKILL");
  await new Promise<void>((res) =>
    gw.exitCode !== null || gw.signalCode !== null ? res() : gw.once("exit", () => res()),
  );
  c.log(`SIGKILL → gateway ${gw.pid} in the middle of a turn; its wrapper ends the adapter's tree`);
  const ctl = await createAcpxLifecycleController({
    stateDir: c.stateDir,
    graceMs: c.graceMs,
    maintenanceIntervalMs: 0,
  });
  c.controllers.push(ctl);
  const rep = await ctl.reapStartupOrphans();
  c.log(
    `new controller, reapStartupOrphans: ${rep.entries.map((e) => `${e.leaseId} ${e.stateBefore}→${e.stateAfter}`).join(", ") || "nothing to do"}`,
  );
  const h = await ctl.ensureSession({ sessionKey: KEY, agentId: "main", command: argv });
  c.leaseIds.push(h.leaseId);
  const who = JSON.parse(await say(ctl, h, "/whoami")) as { sessionId: string; how: string; pid: number };
  c.log(
    `ensureSession: lease ${h.leaseId}, resumed ${h.resumed}; the agent (pid ${who.pid}) says: session ${who.sessionId}, opened by ${who.how}`,
  );
  c.check(
    h.resumed && who.sessionId === acpSessionId && who.how === "resume",
    "the next gateway resumed the same agent session (session/resume)",
  );
  const closed = await ctl.closeSession({ handle: h });
  c.check(closed.outcome === "closed", "the resumed session closed, its tree killed");
  await ctl.dispose();
  c.controllers.splice(c.controllers.indexOf(ctl), 1);
}

async function say(ctl: AcpxLifecycleController, h: AcpRuntimeHandle, prompt: string): Promise<string> {
  let text = "";
  const turn = ctl.startTurn(h, prompt);
  for await (const u of turn.events)
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") text += u.content.text;
  await turn.result;
  return text;
}

/** A separate node process playing the gateway: ensures the session, one turn, then a turn it never finishes. */
function startConversationGateway(c: DemoContext, command: string[]): ChildProcess {
  const code = `
    const { createAcpxLifecycleController } = await import(${JSON.stringify(pathToFileURL(c.acpxIndex).href)});
    const cfg = JSON.parse(process.env.PROCLEASE_DEMO_GATEWAY);
    const ctl = await createAcpxLifecycleController({ stateDir: cfg.stateDir, graceMs: cfg.graceMs, maintenanceIntervalMs: 0 });
    const h = await ctl.ensureSession({ sessionKey: cfg.key, agentId: "main", command: cfg.command });
    await ctl.prompt(h, "remember: the sky is blue");
    process.stdout.write(JSON.stringify(h) + "\\n");
    ctl.startTurn(h, "hang");
    setInterval(() => {}, 1 << 30);
  `;
  return spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      PROCLEASE_DEMO_GATEWAY: JSON.stringify({ stateDir: c.stateDir, graceMs: c.graceMs, command, key: KEY }),
    },
  });
}

/**
 * How long a stand-in gateway may take to print its handle. Under emulation
 * (CI runs the demo on arm64 Node under qemu-user) its Node start and
 * ensureSession took 13-16 s on a loaded host, and a 20 s bound failed once;
 * a working gateway answers long before, so the bound only ends a stuck one.
 */
const GATEWAY_LINE_MS = 60_000;

/** The first JSON line a stand-in gateway prints (its handle). */
export function readJsonLine<T>(c: ChildProcess): Promise<T> {
  return new Promise((res, rej) => {
    let buf = "";
    const timer = setTimeout(
      () => rej(new Error(`the stand-in gateway printed nothing within ${GATEWAY_LINE_MS / 1000} s`)),
      GATEWAY_LINE_MS,
    );
    c.stdout!.on("data", (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf("\n");
      if (nl !== -1) {
        clearTimeout(timer);
        res(JSON.parse(buf.slice(0, nl)) as T);
      }
    });
    c.once("exit", (code) => {
      clearTimeout(timer);
      rej(new Error(`the stand-in gateway exited early (code ${code})`));
    });
  });
}

async function readPid(file: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const pid = Number(readFileSync(file, "utf8").trim());
      if (pid > 0) return pid;
    } catch {
      // not written yet
    }
    if (Date.now() > deadline) throw new Error(`the terminal never wrote ${file}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function waitForHistory(store: string, sessionId: string, text: string): Promise<void> {
  const file = join(store, `${encodeURIComponent(sessionId)}.json`);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      const s = JSON.parse(readFileSync(file, "utf8")) as { history: { text: string }[] };
      if (s.history.some((e) => e.text === text)) return;
    } catch {
      // being written
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`the agent never received the "${text}" turn`);
}
