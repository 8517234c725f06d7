// A real `openclaw gateway` runs its chats through proclease. Run by the Node
// OpenClaw needs (>= 24.16), as root:
//   OPENCLAW_DIR=<folder with node_modules/openclaw> PROCLEASE_TARBALL=<.tgz> node .ci/openclaw-real/run.mjs
// The plugin is installed from the tarball and configured with the commands
// docs/openclaw.md gives (setup.mjs), the gateway is started as a process on
// a free loopback port with token auth, and driven over its WebSocket
// protocol with OpenClaw's own gateway client (gateway.mjs); the operator's
// commands of the same page (OpenClaw's TUI, `openclaw gateway call`) run
// against it as written (operator.mjs). Then the same gateway again with the
// plugin's `durable` on (durable.mjs). Every step prints its time; any
// failed check exits 1 naming it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openclawTmpGuard } from "../../bench/lib.mjs";
import { freePort, Gateway, loadGatewayClient } from "./gateway.mjs";
import { leases, markedProcesses } from "./host.mjs";
import { prepareOpenClaw, readmeCommandsMatch } from "./setup.mjs";
import { scenario } from "./scenario.mjs";
import { durablePhase } from "./durable.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const openclawDir = process.env.OPENCLAW_DIR;
const tarball = process.env.PROCLEASE_TARBALL;
if (!openclawDir || !tarball) throw new Error("set OPENCLAW_DIR and PROCLEASE_TARBALL");

const t0 = performance.now();
const fmt = (ms) => `${(ms / 1000).toFixed(2)} s`;
const say = (m) => console.log(`[${fmt(performance.now() - t0)}] ${m}`);
let failures = 0;
function check(ok, what) {
  console.log(`  ${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures += 1;
  return ok;
}

// OpenClaw writes logs and state locks under a fixed /tmp whatever TMPDIR says: removed at the end
const tmpGuard = openclawTmpGuard();
const work = mkdtempSync(join(tmpdir(), "proclease-oc-real-"));
const agentScript = join(root, "fixtures/acp-agent/agent.mjs");
const sessions = join(work, "agent-sessions");
const agent = (...flags) => ({
  command: [
    process.execPath,
    agentScript,
    "--turn=by-text",
    `--session-store=${sessions}`,
    "--stream-batch=1",
    "--stream-gap-ms=100",
    ...flags,
  ],
});
const pluginConfig = {
  graceMs: 1000,
  // authy: an agent that requires a login, spawned without a method (docs/openclaw.md "Agents that need a login")
  agents: { fixture: agent("--grandchild=setsid"), second: agent(), authy: agent("--require-auth=fixture-key") },
};

let gw;
try {
  check(
    readmeCommandsMatch(root),
    "the README's OpenClaw commands (setup and operator) are docs/openclaw.md's, line for line",
  );
  const port = await freePort();
  const oc = prepareOpenClaw({ root, openclawDir, tarball, work, pluginConfig, log: say, port });
  const GatewayClient = await loadGatewayClient(openclawDir);
  gw = new Gateway({ openclawDir, env: oc.env, port, token: oc.token, GatewayClient });
  const ctx = {
    gw,
    root,
    openclawDir,
    env: oc.env,
    stateDir: oc.procleaseStateDir,
    say,
    check,
    fmt,
    openclaw: oc.run,
    pluginConfig,
  };
  await scenario(ctx);
  await durablePhase(ctx);
} catch (err) {
  failures += 1;
  console.error(`FAIL: ${err instanceof Error ? err.stack : String(err)}`);
  if (gw?.log) console.error(`--- the gateway's log (last 4000 characters):\n${gw.log.slice(-4000)}`);
} finally {
  if (gw?.child && gw.child.exitCode === null && gw.child.signalCode === null) {
    await gw.kill("SIGTERM").catch(() => gw.child.kill("SIGKILL"));
  }
  // whatever a failed run left: processes with this run's markers, by their lease ids
  const ids = new Set();
  try {
    for (const l of leases(root, join(work, "state/proclease"))) ids.add(l.leaseId);
  } catch {}
  const left = markedProcesses().filter((p) => ids.has(p.leaseId));
  for (const p of left) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {}
  }
  if (left.length > 0) console.error(`cleanup: SIGKILLed ${left.length} leftover process(es) of this run`);
  rmSync(work, { recursive: true, force: true });
  tmpGuard.clean();
}
say(failures === 0 ? "the real gateway: every check passed" : `the real gateway: ${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
