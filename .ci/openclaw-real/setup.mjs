// The install and configuration commands, taken from docs/openclaw.md (the
// sh block between `<!-- ci:openclaw-setup begin -->` and `… end -->`), so
// the doc cannot drift from what CI ran. Each line runs as the doc writes it,
// with three substitutions a reader makes too: the tarball's path, the
// plugin config's agents (CI's fixture agents instead of the doc's example
// adapter), and the agent entry run once per CI agent under its name. A line
// of any other shape fails the check: a new doc command must be taught here.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** The `openclaw …` lines of a doc block between `<!-- NAME begin -->` and `<!-- NAME end -->` of docs/openclaw.md. */
export function docBlock(root, name) {
  const doc = readFileSync(join(root, "docs/openclaw.md"), "utf8");
  const begin = `<!-- ${name} begin -->`;
  const end = `<!-- ${name} end -->`;
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`docs/openclaw.md has no ${begin} … ${end} block`);
  const lines = doc
    .slice(from + begin.length, to)
    .split("\n")
    .filter((l) => l.startsWith("openclaw "));
  if (lines.length === 0) throw new Error(`the docs' ${name} block holds no openclaw command`);
  return lines;
}

/** The doc's setup commands, each as argv (words in plain, single- or double-quoted form, as the doc writes them). */
export function docCommands(root) {
  return docBlock(root, "ci:openclaw-setup").map((line) => ({ line, argv: shellWords(line) }));
}

export function shellWords(line) {
  const words = [];
  const re = /'([^']*)'|"([^"]*)"|(\S+)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) words.push(m[1] ?? m[2] ?? m[3]);
  return words;
}

/**
 * What CI runs for one doc command. ci: { tarball, pluginConfig, agents: [names] }.
 * Returns a list of argv (without the leading "openclaw").
 */
export function substitute(argv, ci) {
  const [bin, ...rest] = argv;
  if (bin !== "openclaw") throw new Error(`not an openclaw command: ${argv.join(" ")}`);
  const words = rest.join(" ");
  if (rest[0] === "plugins" && rest[1] === "install") {
    const i = rest.findIndex((w) => w.startsWith("npm-pack:"));
    if (i < 0) throw new Error(`the doc's install names no npm-pack: tarball: ${words}`);
    return [rest.map((w, j) => (j === i ? `npm-pack:${ci.tarball}` : w))];
  }
  if (rest[0] === "config" && rest[1] === "set" && rest[2] === "plugins.entries.proclease.config") {
    const docConfig = JSON.parse(rest[3]);
    if (typeof docConfig.agents !== "object") throw new Error("the doc's plugin config names no agents");
    return [[...rest.slice(0, 3), JSON.stringify({ ...docConfig, ...ci.pluginConfig }), ...rest.slice(4)]];
  }
  const entry = /^agents\.entries\.([^.]+)\.runtime$/.exec(rest[2] ?? "");
  if (rest[0] === "config" && rest[1] === "set" && entry) {
    const docAgent = entry[1];
    const runtime = JSON.parse(rest[3]);
    if (runtime.acp?.agent !== docAgent)
      throw new Error(`the doc's agent entry ${docAgent} names another ACP agent: ${rest[3]}`);
    return ci.agents.map((name) => [
      rest[0],
      rest[1],
      `agents.entries.${name}.runtime`,
      JSON.stringify({ ...runtime, acp: { ...runtime.acp, agent: name } }),
      ...rest.slice(4),
    ]);
  }
  const verbatim = [
    ["plugins", "enable", "proclease"],
    ["config", "set", "acp.backend", "proclease"],
  ];
  if (verbatim.some((v) => v.length === rest.length && v.every((w, j) => w === rest[j]))) return [rest];
  throw new Error(`the docs' setup block has a command this check does not know: ${argv.join(" ")}`);
}

/** Runs `openclaw ARGV` with the gateway's env; returns its output and time. */
export function openclaw(openclawDir, env, argv) {
  const t0 = performance.now();
  const bin = join(openclawDir, "node_modules/openclaw/openclaw.mjs");
  const out = execFileSync(process.execPath, [bin, ...argv], {
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { out, ms: performance.now() - t0 };
}

/**
 * A fresh OpenClaw state dir with proclease installed and configured as the
 * docs say: OpenClaw's own prerequisites (gateway.mode local, a gateway
 * token, and the port when given), then the docs' commands with CI's
 * substitutions. Returns what a
 * Gateway needs. log(line) is called for each command run.
 */
export function prepareOpenClaw({ root, openclawDir, tarball, work, pluginConfig, log, port }) {
  const stateDir = join(work, "state");
  const home = join(work, "home");
  mkdirSync(home, { recursive: true });
  const token = `ci-${randomBytes(16).toString("hex")}`;
  const env = { ...process.env, OPENCLAW_STATE_DIR: stateDir, HOME: home, NO_COLOR: "1" };
  const run = (argv) => openclaw(openclawDir, env, argv);
  log(`openclaw ${run(["--version"]).out.trim()} under Node ${process.version}; state dir ${stateDir}`);
  run(["config", "set", "gateway.mode", "local"]);
  run(["config", "set", "gateway.auth.token", token]);
  // the gateway's port in its config, as on an operator's host, so `openclaw gateway call` finds it (CI picks a free one)
  if (port !== undefined) run(["config", "set", "gateway.port", String(port)]);
  log(
    `OpenClaw's own prerequisites: gateway.mode local, gateway.auth.token set${port !== undefined ? `, gateway.port ${port}` : ""}`,
  );
  const ci = { tarball, pluginConfig, agents: Object.keys(pluginConfig.agents) };
  for (const { line, argv } of docCommands(root)) {
    for (const argvRun of substitute(argv, ci)) {
      const r = run(argvRun);
      const ran = argvRun.map((w) => (/[\s"{]/.test(w) ? `'${w}'` : w)).join(" ");
      log(`docs: openclaw ${ran.length > 110 ? `${ran.slice(0, 107)}…` : ran} (${(r.ms / 1000).toFixed(2)} s)`);
    }
  }
  return { stateDir, env, token, run, procleaseStateDir: join(stateDir, "proclease") };
}

/**
 * The README's OpenClaw commands are the docs': its first sh block after "## Use it in OpenClaw" is the
 * setup block line for line, and each line of its second one (the operator's) is a line of the docs'
 * operator block, as written there (a trailing `# …` comment aside).
 */
export function readmeCommandsMatch(root) {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const from = readme.indexOf("## Use it in OpenClaw");
  const blocks = [];
  for (let at = readme.indexOf("```sh", from); at >= 0 && blocks.length < 2; at = readme.indexOf("```sh", at + 5)) {
    const body = readme.slice(at + 5, readme.indexOf("```\n", at + 5));
    blocks.push(
      body
        .split("\n")
        .filter((l) => l.startsWith("openclaw "))
        .map((l) => l.replace(/\s+#.*$/, "").trimEnd()),
    );
  }
  const [setup = [], operator = []] = blocks;
  const doc = docCommands(root).map((c) => c.line);
  const docOperator = new Set(docBlock(root, "ci:openclaw-operator"));
  return (
    setup.length === doc.length &&
    setup.every((l, i) => l === doc[i]) &&
    operator.length > 0 &&
    operator.every((l) => docOperator.has(l))
  );
}
