/**
 * `proclease demo [--grace-ms MS] [--keep | --clean]`: the whole lifecycle
 * story against real processes, in a fresh temp state dir, as a timeline with
 * pids and timings. Every step is checked; exit 0 only when all of them held.
 * The state dir is kept (its path is printed, with the commands to look at
 * it) unless --clean is given.
 *
 *  0. the conversation (demo-conversation.ts): a streamed reply as it
 *     arrives, a permission answered, a terminal whose setsid grandchild is
 *     gone after the close, a session resumed after its gateway was SIGKILLed
 *  1. ensure: lease written, wrapper spawned, ACP initialize + session/new
 *  2. prompt + cancel: the turn ends "cancelled", every process stays alive
 *  3. close: the stubborn adapter and its escaped (double-forked) grandchild are killed
 *  4. a stand-in gateway is SIGKILLed: its wrapper cleans up through the lifeline
 *  5. a gateway AND its wrapper are SIGKILLed: a new controller reaps at startup
 *
 * The demo signals only what it spawned itself (its stand-in gateways, while
 * they are its unreaped children) or verified: a pid is learned together with
 * its start time (the wrapper pid a gateway prints is checked to be that
 * gateway's child; a safety-net carrier must match the lease id AND instance
 * id by ownership's marker rule) and every signal goes through the guards and
 * an identity-checked signaller with that start time.
 *
 * The adapter is the package's scriptable ACP fixture agent
 * (fixtures/acp-agent/agent.mjs, shipped in the package's "files"), located
 * from the package root, so the demo runs from a checkout (`npm run demo`)
 * and from an installed package (`npx proclease demo`) alike.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createAcpxLifecycleController } from "../../acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../acpx/controller/types.js";
import { getProcessFacts } from "../../facts/get.js";
import { isAlive, isKernelThread, provablyGone } from "../../facts/liveness.js";
import { createSignaller } from "../../facts/signal.js";
import type { ProcessFacts, ProcessSignaller, SignalOutcome } from "../../facts/types.js";
import { signalUnreapedChild } from "../../facts/signal.js";
import { markerVerdict, MARKER_ENV_KEYS } from "../../ownership/index.js";
import { backendLine } from "../shared/backend.js";
import { flag, graceMsOption, plural, UsageError, type CliIo, type ParsedArgs } from "../shared/io.js";
import { sameProcess } from "../../facts/identity.js";
import { conversationStory, readJsonLine } from "./demo-conversation.js";

const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const AGENT = join(PACKAGE_ROOT, "fixtures", "acp-agent", "agent.mjs");
const ACPX_INDEX = join(PACKAGE_ROOT, "dist", "acpx", "index.js");

interface AgentPids {
  pid: number;
  grandchildPid: number | null;
}

export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const graceMs = graceMsOption(parsed) ?? 500;
  if (flag(parsed, "keep") && flag(parsed, "clean")) throw new UsageError("--keep and --clean contradict each other");
  const clean = flag(parsed, "clean");
  if (!packageComplete(io)) return 1;

  const stateDir = mkdtempSync(join(tmpdir(), "proclease-demo-"));
  const t0 = Date.now();
  const failures: string[] = [];
  const log = (msg: string) => io.out(`[+${String(Date.now() - t0).padStart(6)} ms] ${msg}\n`);
  const check = (ok: boolean, what: string) => {
    log(`${ok ? "ok  " : "FAIL"} ${what}`);
    if (!ok) failures.push(what);
  };
  const spawned: ChildProcess[] = [];
  const controllers: AcpxLifecycleController[] = [];
  const leaseIds: string[] = [];
  const facts = getProcessFacts();
  const signaller = createSignaller(facts);
  let instanceId: string | undefined;
  let cleaning: Promise<void> | undefined;
  /** Once, at the end or on Ctrl-C / SIGTERM: the demo never leaves behind what it spawned. */
  const cleanup = () =>
    (cleaning ??= (async () => {
      for (const c of controllers) await c.dispose().catch(() => undefined);
      for (const c of spawned) killOwnChild(c);
      // safety net: what still carries one of the demo's lease ids AND its
      // instance id (from the demo's own fresh state dir) was spawned by it
      if (instanceId !== undefined) {
        for (const id of leaseIds) await killCarriers(facts, signaller, { leaseId: id, gatewayInstanceId: instanceId });
      }
      if (clean) rmSync(stateDir, { recursive: true, force: true });
    })());
  const onSignal = (sig: NodeJS.Signals) => {
    io.err(`\ndemo interrupted (${sig}): stopping what it spawned\n`);
    void cleanup().finally(() => process.exit(sig === "SIGINT" ? 130 : 143));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  io.out(
    backendLine(facts) + `proclease demo — state dir ${stateDir}, grace ${graceMs} ms, this process ${process.pid}\n\n`,
  );

  const run: DemoRun = {
    stateDir,
    graceMs,
    log,
    check,
    facts,
    signaller,
    spawned,
    controllers,
    leaseIds,
    instanceIs: (id) => (instanceId = id),
  };
  try {
    await tellStories(run, (t) => io.out(t));
    log(`total ${Date.now() - t0} ms`);
  } catch (err) {
    failures.push(err instanceof Error ? err.message : String(err));
    io.err(`demo step failed: ${err instanceof Error ? err.message : String(err)}\n`);
  } finally {
    await cleanup();
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  }
  io.out(
    failures.length === 0
      ? "\nevery step verified.\n"
      : `\n${failures.length} step(s) failed:\n${failures.map((f) => `  - ${f}`).join("\n")}\n`,
  );
  if (!clean) io.out(lookAtIt(stateDir, leaseIds.at(-1)));
  return failures.length === 0 ? 0 : 1;
}

/** The fixture agent and the compiled package the demo runs; false (said on stderr) when one is missing. */
function packageComplete(io: CliIo): boolean {
  if (!existsSync(AGENT)) {
    io.err(
      `the demo's ACP fixture agent is missing from this package: ${AGENT} (it ships in fixtures/; reinstall proclease)\n`,
    );
    return false;
  }
  if (!existsSync(ACPX_INDEX)) {
    io.err(`the compiled package is missing (${ACPX_INDEX}); run \`npm run build\` first\n`);
    return false;
  }
  return true;
}

/** Steps 0 to 5 in order (the header lists them), a blank line between stories. */
async function tellStories(r: DemoRun, out: (text: string) => void): Promise<void> {
  const { stateDir, graceMs, log, check, spawned, controllers, leaseIds } = r;
  // ---------------------------------------------------------------- 0
  await conversationStory({
    stateDir,
    graceMs,
    agent: AGENT,
    acpxIndex: ACPX_INDEX,
    log,
    check,
    alive,
    spawned,
    controllers,
    leaseIds,
    out,
  });
  out("\n");
  // ---------------------------------------------------------------- 1-3
  await storyClose(r);
  // ---------------------------------------------------------------- 4
  out("\n");
  await storyGatewayKilled(r);
  // ---------------------------------------------------------------- 5
  out("\n");
  await storyStartupReap(r);
}

/** What every step of the demo shares: where it runs, how it reports, and what it must stop at the end. */
interface DemoRun {
  stateDir: string;
  graceMs: number;
  log: (msg: string) => void;
  check: (ok: boolean, what: string) => void;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  spawned: ChildProcess[];
  controllers: AcpxLifecycleController[];
  leaseIds: string[];
  /** the demo's gateway instance id, once a controller made it */
  instanceIs: (id: string) => void;
}

/** Steps 1-3: a session whose turn is cancelled (nothing signalled), reused, then closed: its stubborn tree killed. */
async function storyClose(d: DemoRun): Promise<void> {
  const { stateDir, log, check, graceMs, controllers, leaseIds } = d;
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  d.instanceIs(ctl.gatewayInstanceId);
  log(`controller up: gateway instance ${ctl.gatewayInstanceId}`);
  const pidfile = join(stateDir, "agent-1.json");
  let t = Date.now();
  const h = await ctl.ensureSession({
    sessionKey: "agent:main:acp:demo",
    agentId: "main",
    command: agentArgv([
      "--ignore-sigterm",
      "--grandchild=double-fork",
      "--survive-stdin-close",
      "--turn=until-cancel",
      `--pidfile=${pidfile}`,
    ]),
  });
  leaseIds.push(h.leaseId);
  const p1 = await readPidfile(pidfile);
  log(`ensureSession ${Date.now() - t} ms: lease ${h.leaseId}, ACP session ${h.acpSessionId}`);
  log(
    `  wrapper ${h.rootPid} → adapter ${p1.pid} (pgid ${h.processGroupId}, ignores SIGTERM) → double-forked grandchild ${p1.grandchildPid} (ignores SIGTERM)`,
  );
  const tree1 = [h.rootPid, p1.pid, p1.grandchildPid ?? 0];

  t = Date.now();
  const turn = ctl.prompt(h, "work until cancelled");
  await sleep(300);
  await ctl.cancelTurn(h);
  const res = await turn;
  log(`prompt → cancelTurn after 300 ms → stopReason "${res.stopReason}" (${Date.now() - t} ms)`);
  check(res.stopReason === "cancelled", "the turn ended cancelled");
  check(
    (await liveOf(tree1)).length === tree1.length,
    `cancel signalled nothing: ${tree1.map((p) => `${p} alive`).join(", ")}`,
  );
  const again = ctl.prompt(h, "next turn");
  await sleep(100);
  await ctl.cancelTurn(h);
  check((await again).stopReason === "cancelled", "the session is reusable: a second turn ran and was cancelled");

  t = Date.now();
  const closed = await ctl.closeSession({ handle: h, reason: "demo close" });
  log(`closeSession ${Date.now() - t} ms: verdict ${closed.verdict}, lease ${closed.leaseState}`);
  for (const m of closed.kill?.members ?? []) log(`  pid ${m.pid}: ${m.outcome}`);
  check(
    closed.outcome === "closed" && (await liveOf(tree1)).length === 0,
    "close killed the wrapper, the stubborn adapter and the escaped grandchild",
  );
  // one gateway per state dir: this controller gives the dir (its lock) to the stand-in gateways below
  await ctl.dispose();
  controllers.splice(controllers.indexOf(ctl), 1);
}

/** Step 4: a stand-in gateway SIGKILLed: its wrapper sees the lifeline EOF and cleans up within the grace. */
async function storyGatewayKilled(d: DemoRun): Promise<void> {
  const { stateDir, graceMs, log, check, facts, spawned, leaseIds } = d;
  const pid2 = join(stateDir, "agent-2.json");
  const gw = startGateway(
    stateDir,
    graceMs,
    agentArgv(["--ignore-sigterm", "--grandchild=setsid", "--survive-stdin-close", `--pidfile=${pid2}`]),
  );
  spawned.push(gw);
  const h2 = await readHandle(gw);
  leaseIds.push(h2.leaseId);
  const p2 = await readPidfile(pid2);
  const tree2 = [h2.rootPid, p2.pid, p2.grandchildPid ?? 0];
  log(
    `stand-in gateway ${gw.pid} ensured a session: wrapper ${h2.rootPid} → adapter ${p2.pid} → setsid grandchild ${p2.grandchildPid}`,
  );
  killOwnChild(gw);
  const gwGone = exited(gw);
  const t = Date.now();
  log(`SIGKILL → gateway ${gw.pid}; its wrapper sees the lifeline EOF`);
  const gone2 = await waitFor(
    async () => (await liveOf(tree2)).length === 0 && (await leaseCarriers(facts, markersOf(h2))).length === 0,
    graceMs + 5000,
  );
  log(`  tree gone ${gone2 ? `after ${Date.now() - t} ms` : "NOT within the deadline"} (grace ${graceMs} ms)`);
  check(
    gone2 && Date.now() - t <= graceMs + 1000,
    "the wrapper cleaned up within grace + 1 s, no process carries the lease id",
  );

  await gwGone; // its state dir lock goes with it
}

/** Step 5: wrapper and gateway SIGKILLed, the escapees outlive both; a new controller's startup reap ends them. */
async function storyStartupReap(d: DemoRun): Promise<void> {
  const { stateDir, graceMs, log, check, facts, signaller, spawned, controllers, leaseIds } = d;
  const pid3 = join(stateDir, "agent-3.json");
  // no keeper (as if it was killed too): a keeper would end the escapees at once (docs/ownership.md "The keeper")
  const gw3 = startGateway(
    stateDir,
    graceMs,
    agentArgv(["--ignore-sigterm", "--grandchild=double-fork", "--survive-stdin-close", `--pidfile=${pid3}`]),
    "off",
  );
  spawned.push(gw3);
  const h3 = await readHandle(gw3);
  leaseIds.push(h3.leaseId);
  const p3 = await readPidfile(pid3);
  log(
    `stand-in gateway ${gw3.pid}: wrapper ${h3.rootPid} → adapter ${p3.pid} → double-forked grandchild ${p3.grandchildPid}`,
  );
  // the wrapper pid came from the gateway's stdout: signalled only once it is
  // verified as that gateway's child, with the start time seen then
  const wrapper3 = await childOf(facts, h3.rootPid, gw3);
  if (wrapper3 === null)
    throw new Error(`pid ${h3.rootPid} (printed by gateway ${gw3.pid}) is not that gateway's child; not signalled`);
  const killed3 = await signalVerified(signaller, h3.rootPid, wrapper3, "SIGKILL");
  check(killed3 === "signalled", `SIGKILL reached the verified wrapper ${h3.rootPid} (${killed3})`);
  killOwnChild(gw3);
  log(`SIGKILL → wrapper ${h3.rootPid} and gateway ${gw3.pid} (started without a keeper): nobody is left to clean up`);
  await waitFor(async () => !(await alive(h3.rootPid)), 3000);
  await sleep(200);
  const orphans = await liveOf([p3.pid, p3.grandchildPid ?? 0]);
  log(`  orphans still running: ${orphans.join(", ") || "(none)"}`);
  check(orphans.length > 0, "the escaped processes outlived gateway and wrapper (the case startup reaping exists for)");
  await exited(gw3); // the new controller takes the state dir lock the dead gateway held
  const ctl2 = await createAcpxLifecycleController({ stateDir, graceMs, maintenanceIntervalMs: 0 });
  controllers.push(ctl2);
  const rep = await ctl2.reapStartupOrphans();
  log(
    `new controller, reapStartupOrphans: ${rep.examined} lease(s) examined, ${plural(rep.snapshots, "snapshot")}, ${rep.elapsedMs} ms`,
  );
  for (const e of rep.entries) {
    log(
      `  lease ${e.leaseId}: ${e.verdict} → ${e.action} (${e.stateBefore}→${e.stateAfter})${e.kill ? `; ${e.kill.members.map((m) => `${m.pid}:${m.outcome}`).join(" ")}` : ""}`,
    );
  }
  check(
    (await liveOf(orphans)).length === 0 && (await leaseCarriers(facts, markersOf(h3))).length === 0,
    `startup reaping left no process carrying lease ${h3.leaseId}`,
  );
  check(
    (await ctl2.listLeases()).every((l) => l.state === "closed" || l.state === "lost"),
    "every lease is settled (closed or lost)",
  );
}

/** How this very binary was started, so the printed commands work when pasted: `npx proclease` or `node <path>`. */
function selfCommand(): string {
  const script = process.argv[1] ?? "";
  if (basename(script) === "proclease") return "npx proclease";
  const rel = relative(process.cwd(), script);
  return `node ${rel.startsWith("..") || rel === "" ? script : rel}`;
}

function lookAtIt(stateDir: string, leaseId: string | undefined): string {
  const cmd = selfCommand();
  const dir = /^[\w./-]+$/.test(stateDir) ? stateDir : JSON.stringify(stateDir);
  return (
    `\nthe state dir is kept at ${dir} (--clean deletes it); look at it with:\n` +
    `  ${cmd} status --state-dir ${dir}\n` +
    `  ${cmd} leases --state-dir ${dir}\n` +
    `  ${cmd} explain ${leaseId ?? "<leaseId>"} --state-dir ${dir}\n`
  );
}

function agentArgv(flags: string[]): string[] {
  return [process.execPath, AGENT, ...flags];
}

/** A separate node process playing the gateway: ensures one session, prints the handle, idles. */
function startGateway(stateDir: string, graceMs: number, command: string[], keeper: "on" | "off" = "on"): ChildProcess {
  const code = `
    const { createAcpxLifecycleController } = await import(${JSON.stringify(pathToFileURL(ACPX_INDEX).href)});
    const cfg = JSON.parse(process.env.PROCLEASE_DEMO_GATEWAY);
    const ctl = await createAcpxLifecycleController({ stateDir: cfg.stateDir, graceMs: cfg.graceMs, maintenanceIntervalMs: 0, keeper: cfg.keeper });
    const h = await ctl.ensureSession({ sessionKey: "agent:main:acp:gateway-" + process.pid, agentId: "main", command: cfg.command });
    process.stdout.write(JSON.stringify(h) + "\\n");
    setInterval(() => {}, 1 << 30);
  `;
  return spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, PROCLEASE_DEMO_GATEWAY: JSON.stringify({ stateDir, graceMs, command, keeper }) },
  });
}

function readHandle(c: ChildProcess): Promise<AcpRuntimeHandle> {
  return readJsonLine<AcpRuntimeHandle>(c);
}

async function readPidfile(path: string): Promise<AgentPids> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return JSON.parse(readFileSync(path, "utf8")) as AgentPids;
    } catch {
      if (Date.now() > deadline) throw new Error(`the fixture agent never wrote ${path}`);
      await sleep(25);
    }
  }
}

/**
 * Not provably gone, by the library's one liveness rule (facts/liveness.ts,
 * through the facts backend on every platform): a zombie or an exiting
 * process is gone, and facts that cannot tell count as alive, so the demo
 * never claims "gone" on a guess.
 */
async function alive(pid: number): Promise<boolean> {
  return pid > 0 && !(await provablyGone(getProcessFacts(), { pid }));
}

/** The pids of `pids` still alive (see alive). */
async function liveOf(pids: readonly number[]): Promise<number[]> {
  const up = await Promise.all(pids.map(alive));
  return pids.filter((_, i) => up[i]);
}

/**
 * The demo's proof of "nothing left": every live process of this uid started
 * since the demo began whose environment carries this lease's markers, asked
 * through the facts backend like the library itself would. A process whose
 * environment cannot be read counts as a carrier: the proof must not pass on
 * "unknown". Liveness is the library's one rule (a process inside exit(2) is
 * gone, though its environment already reads as unreadable), and only this
 * uid is searched: everything the demo spawns runs as this uid, while other
 * users' processes on a busy host may well be unreadable.
 */
async function leaseCarriers(
  facts: ProcessFacts,
  lease: { leaseId: string; gatewayInstanceId: string },
): Promise<number[]> {
  const since = Number((await facts.inspect(process.pid))?.startTime ?? 0);
  const uid = typeof process.getuid === "function" ? process.getuid() : null;
  const out: number[] = [];
  for (const p of (await facts.snapshot()).processes.values()) {
    if (
      !isAlive(p) ||
      isKernelThread(p) ||
      p.pid === process.pid ||
      (uid !== null && p.uid !== uid) ||
      !(Number(p.startTime) >= since)
    )
      continue;
    const d = await facts.inspect(p.pid, { envKeys: MARKER_ENV_KEYS }).catch(() => null);
    if (d !== null && sameProcess(d, p) && isAlive(d) && markerVerdict(d, lease) !== "mismatch") out.push(p.pid);
  }
  return out;
}

function exited(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => c.once("exit", () => resolve()));
}

/** SIGKILL to a child the demo spawned, only while it is unreaped (its pid cannot have been reused) and the guard allows it. */
function killOwnChild(c: ChildProcess): void {
  signalUnreapedChild(c, "SIGKILL");
}

/**
 * The start time of `pid` when it is a child of `parent` (the demo's own
 * unreaped child, so the parent link cannot point at a reused pid); null
 * otherwise.
 */
async function childOf(facts: ProcessFacts, pid: number, parent: ChildProcess): Promise<string | null> {
  if (parent.pid === undefined || parent.exitCode !== null || parent.signalCode !== null) return null;
  const d = await facts.inspect(pid).catch(() => null);
  return d !== null && d.ppid === parent.pid ? d.startTime : null;
}

/** Identity-checked signal (the signaller asks the guards) to a pid the demo verified, with the start time it recorded then. */
async function signalVerified(
  signaller: ProcessSignaller,
  pid: number,
  startTime: string,
  sig: NodeJS.Signals,
): Promise<SignalOutcome> {
  return signaller.signal(pid, startTime, sig).catch((): SignalOutcome => "unknown");
}

/** SIGKILL to each process the marker rule proves carries this lease (lease id AND instance id), identity-checked. */
async function killCarriers(
  facts: ProcessFacts,
  signaller: ProcessSignaller,
  lease: { leaseId: string; gatewayInstanceId: string },
): Promise<void> {
  for (const pid of await leaseCarriers(facts, lease)) {
    const d = await facts.inspect(pid, { envKeys: MARKER_ENV_KEYS }).catch(() => null);
    if (d === null || markerVerdict(d, lease) !== "match") continue;
    await signalVerified(signaller, pid, d.startTime, "SIGKILL");
  }
}

function markersOf(h: AcpRuntimeHandle): { leaseId: string; gatewayInstanceId: string } {
  return { leaseId: h.leaseId, gatewayInstanceId: h.owner.gatewayInstanceId };
}

async function waitFor(cond: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return true;
    await sleep(20);
  }
  return cond();
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
