// The operator's path of docs/openclaw.md (the sh block between
// `<!-- ci:openclaw-operator begin -->` and `… end -->`), run as the page
// writes it against the real gateway: OpenClaw's terminal UI, in a
// pseudo-terminal (node-pty, a dev dependency of the checkout), for the /acp
// commands that need operator.admin, and `openclaw gateway call` for the
// message and the transcript. Three substitutions, which the page names: CI's
// agent in place of `codex`, the fixture's `/count 3` in place of `hello`
// (the fixture answers a bare "hello" with nothing), and the key `/acp spawn`
// answered in place of `agent:codex:acp:<uuid>`. A line of another shape fails
// the check: a new command on the page must be taught here.
import { createRequire } from "node:module";
import { join } from "node:path";
import { waitFor } from "./gateway.mjs";
import { docBlock, shellWords } from "./setup.mjs";

const OPERATOR = "ci:openclaw-operator";
const DOC_KEY = "agent:codex:acp:<uuid>";
const stripAnsi = (s) => s.replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "").replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "");

/** The page's operator commands, each as argv. */
export function operatorCommands(root) {
  return docBlock(root, OPERATOR).map((line) => ({ line, argv: shellWords(line) }));
}

/** What a TUI command must show before CI leaves the UI (Ctrl+D), by the /acp action it sends. */
function tuiReply(message) {
  if (/^\/acp doctor\b/.test(message)) return { what: "the doctor's healthy line", re: /healthy: yes/ };
  if (/^\/acp spawn\b/.test(message))
    return { what: "the spawned session's key", re: /Spawned ACP session (agent:\S+)/ };
  if (/^\/acp close\b/.test(message)) return { what: "the close's answer", re: /Closed ACP session (agent:\S+)/ };
  throw new Error(`the docs' operator block sends a TUI message this check does not know: ${message}`);
}

/**
 * `openclaw ARGV` in a pseudo-terminal, as an operator runs it in theirs:
 * waits until the screen shows `until`, then Ctrl+D (the TUI's exit key) and
 * the exit. Resolves with the match and the screen's text.
 */
async function inTerminal(ctx, argv, until, timeoutMs = 180_000) {
  const pty = createRequire(join(ctx.root, "package.json"))("node-pty");
  const bin = join(ctx.openclawDir, "node_modules/openclaw/openclaw.mjs");
  const term = pty.spawn(process.execPath, [bin, ...argv], { env: ctx.env, cols: 400, rows: 60, name: "xterm" });
  let screen = "";
  term.onData((d) => (screen += d));
  const exited = new Promise((resolve) => term.onExit(resolve));
  try {
    const m = await waitFor(`${until.what} in the TUI`, () => until.re.exec(stripAnsi(screen)), timeoutMs, 100);
    term.write("\x04");
    const how = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 30_000))]);
    if (how === null) throw new Error("the TUI did not leave on Ctrl+D within 30 s");
    return { match: m, screen: stripAnsi(screen) };
  } finally {
    try {
      term.kill("SIGKILL");
    } catch {}
  }
}

/** The JSON object `openclaw gateway call` prints after its heading. */
function callJson(out) {
  return JSON.parse(out.slice(out.indexOf("{")));
}

/**
 * Runs the page's operator block; returns the session key it spawned. ctx:
 * { root, openclawDir, env, openclaw(argv) → { out, ms }, agent, say, check }.
 */
export async function operatorPath(ctx) {
  const { say, check } = ctx;
  let key;
  for (const { line, argv } of operatorCommands(ctx.root)) {
    const rest = argv.slice(1).map((w) =>
      w
        .replace(/^\/acp spawn codex /, `/acp spawn ${ctx.agent} `)
        .replaceAll(DOC_KEY, key ?? DOC_KEY)
        .replace('"message":"hello"', '"message":"/count 3"'),
    );
    if (rest.some((w) => w.includes(DOC_KEY))) throw new Error(`${line}: no session key yet (/acp spawn comes first)`);
    const t = performance.now();
    if (rest[0] === "tui" && rest[1] === "--message" && rest.length === 3) {
      const { match } = await inTerminal(ctx, rest, tuiReply(rest[2]));
      if (/^\/acp spawn\b/.test(rest[2])) key = match[1];
      say(
        `docs: openclaw tui --message "${rest[2]}" → ${match[0]} (${ctx.fmt(performance.now() - t)}, left with Ctrl+D)`,
      );
    } else if (rest[0] === "gateway" && rest[1] === "call" && rest[2] === "chat.send" && rest[3] === "--params") {
      const r = callJson(ctx.openclaw(rest).out);
      check(r.status === "started", `docs: openclaw gateway call chat.send → ${JSON.stringify(r)}`);
    } else if (rest[0] === "gateway" && rest[1] === "call" && rest[2] === "chat.history" && rest[3] === "--params") {
      const sent = JSON.parse(rest[4]);
      // the page: "run it again until it is there"
      const reply = await waitFor(
        "the agent's reply in chat.history",
        () =>
          callJson(ctx.openclaw(rest).out).messages?.find(
            (m) => m.role === "assistant" && m.idempotencyKey === "hello-1",
          ),
        60_000,
        1000,
      );
      const text = typeof reply.content === "string" ? reply.content : reply.content.map((b) => b.text ?? "").join("");
      check(
        text.trim() === "1 2 3",
        `docs: openclaw gateway call chat.history → the agent's reply "${text.trim()}" (${sent.sessionKey})`,
      );
    } else {
      throw new Error(`the docs' operator block has a command this check does not know: ${line}`);
    }
  }
  if (key === undefined) throw new Error("the docs' operator block spawned no session");
  return key;
}

/** The page's claim: `openclaw gateway call` lacks operator.admin, so /acp spawn through it is refused, in these words. */
export async function gatewayCallLacksAdmin(ctx) {
  const idem = `ci-no-admin-${Date.now()}`;
  ctx.openclaw([
    "gateway",
    "call",
    "chat.send",
    "--params",
    JSON.stringify({
      sessionKey: "agent:main:main",
      message: `/acp spawn ${ctx.agent} --mode persistent --bind off`,
      idempotencyKey: idem,
    }),
  ]);
  const history = [
    "gateway",
    "call",
    "chat.history",
    "--params",
    JSON.stringify({ sessionKey: "agent:main:main", limit: 6 }),
  ];
  const reply = await waitFor(
    "the refusal in agent:main:main's history",
    () =>
      callJson(ctx.openclaw(history).out).messages?.find(
        (m) => m.role === "assistant" && JSON.stringify(m.content).includes("operator.admin"),
      ),
    60_000,
    1000,
  );
  const text = typeof reply.content === "string" ? reply.content : reply.content.map((b) => b.text ?? "").join("");
  ctx.check(
    text.includes("This /acp action requires operator.admin on the internal channel."),
    `openclaw gateway call chat.send of /acp spawn is refused as the page says: "${text.trim()}"`,
  );
}

/**
 * An agent that requires a login, spawned without a method: the reply names
 * the plugin setting and where the key goes (docs/openclaw.md "Agents that
 * need a login"), and the failed ensure leaves nothing running.
 */
export async function loginFailureNamesSettings(ctx, agent) {
  const reply = await ctx.gw.command(`/acp spawn ${agent} --mode persistent --bind off`);
  ctx.say(`/acp spawn ${agent} (an agent that requires a login): ${reply.split("\n")[0].slice(0, 300)}`);
  for (const [what, text] of [
    ["the plugin setting", `plugins.entries.proclease.config.agents.${agent}.authMethod`],
    ["where the key goes", `give the agent its key in its environment: agents.${agent}.env`],
    ["the methods offered", '"fixture-key"'],
  ])
    ctx.check(reply.includes(text), `the login failure names ${what}: ${text}`);
}

/** OpenClaw's own error line after each ACP turn (docs/openclaw.md, last section): counted, so a fixed OpenClaw is noticed. */
export function persistenceLineNote(ctx) {
  const n = (
    ctx.gw.log.match(/terminal session persistence failed[^\n]*Terminal write owner changed before commit/g) ?? []
  ).length;
  ctx.say(
    n > 0
      ? `OpenClaw logged "terminal session persistence failed … Terminal write owner changed before commit" ${n} time(s) in this incarnation, about one per ACP turn; its own, as docs/openclaw.md shows, and every reply above was read from the transcript`
      : `OpenClaw logged no "Terminal write owner changed before commit" line after this incarnation's ACP turns: update the last section of docs/openclaw.md`,
  );
}
