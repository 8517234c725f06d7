/**
 * The ACPX wrapper: a tini-sized supervisor between the gateway and one ACP
 * adapter. It decides no session policy; it only keeps the adapter's process
 * tree from outliving the gateway.
 *
 *   node <wrapperPath> [--grace-ms N] -- <adapter argv...>
 *   stdio [pipe, pipe, pipe, pipe]; env OPENCLAW_ACPX_LEASE_ID, OPENCLAW_GATEWAY_INSTANCE_ID
 *
 * | event                              | what the wrapper does                                        |
 * |------------------------------------|--------------------------------------------------------------|
 * | start                              | (Linux+addon) becomes a child subreaper and arms             |
 * |                                    | PR_SET_PDEATHSIG=SIGUSR2; inside a lease cgroup, takes its   |
 * |                                    | own cgroup namespace; spawns the adapter detached (own       |
 * |                                    | session + group, pgid == pid) with the wrapper's own fds     |
 * |                                    | 0/1/2 (no copying); reports "started" on fd 3                |
 * | spawn fails                        | reports "spawn-error", exits 127 (ENOENT) / 126 (other)      |
 * | SIGTERM / SIGINT / SIGHUP          | forwarded to the adapter's group; the wrapper keeps running  |
 * | adapter exits                      | reports "exit"; sweeps what is left of its tree (reason      |
 * |                                    | "signal" after a forwarded signal, else "adapter-exit");     |
 * |                                    | exits with the adapter's code, or 128 + signal number        |
 * | lifeline EOF or SIGUSR2 (pdeath)   | parent gone: SIGTERM to the group and every descendant,      |
 * |                                    | grace (--grace-ms, default 3000), SIGKILL what is left,      |
 * |                                    | reports "cleanup" (reason "parent-gone"), then exits         |
 * | adopted orphan exits (SIGCHLD)     | waits on it (WNOHANG, never on the adapter's pid)            |
 *
 * Caveat: PR_SET_PDEATHSIG follows the parent *thread* that spawned the
 * wrapper. A gateway that spawns it from a worker thread which later ends
 * would trigger a cleanup while the gateway lives; spawn from the main thread.
 *
 * Report format and constants: ./protocol.ts. Module runs on import, so a
 * generated stub under <stateDir>/acpx/wrappers/ can simply require it. What
 * runs is dist/acpx/wrapper.cjs, this module and its imports bundled into one
 * CommonJS file at `npm run build` (scripts/bundle-wrapper.mjs): one file
 * read, no ESM loader, no zod, no ACP SDK. Everything the start does not need
 * (facts backend, signaller; off Linux the addon) is created on first use.
 *
 * Guarantees by platform:
 * - Linux with the addon: subreaper (double-fork/setsid escapees re-parent
 *   here and are found by parent links), pdeathsig as a second parent-death
 *   signal, race-free per-pid signals (pidfd).
 * - Linux without the addon: lifeline only; escapees found by the lease id
 *   AND instance id in their environment (procfs); per-pid signals have an
 *   inspect→kill window.
 * - macOS: lifeline only; escapees found by the same two markers where the
 *   environment is readable.
 * - without OPENCLAW_GATEWAY_INSTANCE_ID (or the lease id) in the wrapper's
 *   own environment no escapee is found by marker at all.
 * - facts backend "none": only the adapter's group is signalled (provably
 *   ours while the adapter is unreaped); nothing is signalled per pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeSync } from "node:fs";
import { constants } from "node:os";
import { enterCgroup, isInCgroup } from "../../containment/enter.js";
import { factsFaultOfCode } from "../../facts/errno.js";
import { getProcessFacts } from "../../facts/get.js";
import { loadNative } from "../../facts/native.js";
import { createNoneFacts } from "../../facts/none.js";
import { createSignaller } from "../../facts/signal.js";
import type { NativeBinding } from "../../facts/native-binding.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { signalAdapterGroup } from "./adapter-group.js";
import { startAdoptedReaper, type AdoptedReaper } from "./adopted.js";
import { parseWrapperArgs, type WrapperArgs } from "./args.js";
import { cleanupTree } from "./cleanup.js";
import { openLifeline, type Lifeline } from "./lifeline.js";
import { takeEndRecordWriter } from "./end-record.js";
import {
  CGROUP_ENV_KEY,
  CGROUP_MOVE_FAILED,
  CGROUP_REQUIRED_ENV_KEY,
  EXIT_CANNOT_EXECUTE,
  EXIT_NOT_FOUND,
  EXIT_USAGE,
  FORWARDED_SIGNALS,
  INSTANCE_ENV_KEY,
  LEASE_ENV_KEY,
  PARENT_DEATH_SIGNAL,
  type CleanupReason,
} from "./protocol.js";

const signalNumbers = constants.signals as Readonly<Record<string, number | undefined>>;
const errnoNames: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(constants.errno).map(([name, no]) => [no, name]),
);

let adapterPid: number | null = null;
/** null while the adapter runs (or never ran); set once libuv reaped it */
let adapterStatus: { code: number | null; signal: NodeJS.Signals | null } | null = null;
let forwardedSignal = false;
let cleanup: Promise<void> | null = null;
let pendingSignals: NodeJS.Signals[] = [];
let lifeline: Lifeline | null = null;
let reaper: AdoptedReaper | null = null;
/** the gateway said "end" before it let go: the tree ends at its request, not because it went away */
let askedToEnd = false;
const endRecord = takeEndRecordWriter(process.env, process.env[LEASE_ENV_KEY]);

// After the gateway dies, fd 2 is a pipe with no reader: any write there
// fails with EPIPE. An exception escaping a handler must not kill the wrapper
// (that would orphan the very tree it exists to clean up), so it is noted on
// stderr when possible and the state machine carries on: each handler below
// is small and leaves the state consistent before anything can throw.
process.on("uncaughtException", (err) =>
  stderr(`proclease wrapper: ${err instanceof Error ? err.message : String(err)}`),
);

// Handlers first: a signal that arrives before the adapter exists is held
// and forwarded right after the spawn instead of killing the wrapper (which
// would orphan the adapter it is about to start).
for (const sig of FORWARDED_SIGNALS) process.on(sig, () => forward(sig));
process.on(PARENT_DEATH_SIGNAL, () => parentGone());

lifeline = openLifeline();

let args: WrapperArgs;
try {
  args = parseWrapperArgs(process.argv.slice(2));
} catch (err) {
  const message = (err as Error).message;
  lifeline?.send({ type: "spawn-error", code: "EUSAGE", message });
  stderr(`proclease wrapper: ${message}\nusage: node <wrapper> [--grace-ms N] -- <adapter argv...>`);
  process.exit(EXIT_USAGE);
}

// Start-up cost is the price of every session (bench/wrapper.bench.mjs), so
// the start does only what must precede the spawn. On Linux that is the
// addon's two prctl calls: an orphan created before we are a subreaper would
// go to init. Elsewhere the addon (and on every platform the facts backend
// and the signaller) is first needed by a cleanup or a SIGCHLD, so it is
// loaded then. Failures leave the lifeline as the only mechanism.
const linux = process.platform === "linux";
const startBinding: NativeBinding | null = linux ? loadNative() : null;
const subreaper = startBinding !== null && startBinding.platform === "linux";
if (subreaper) {
  startBinding.setChildSubreaper();
  startBinding.setParentDeathSignal(signalNumbers[PARENT_DEATH_SIGNAL] ?? 0);
}

let tools: { facts: ProcessFacts; signaller: ProcessSignaller } | null = null;
/**
 * The facts backend and the signaller, created on first use. A backend that
 * cannot be created (a bad PROCLEASE_BACKEND, say) becomes "none": the
 * cleanup then signals only the adapter's group, which needs no facts.
 */
function cleanupTools(): { facts: ProcessFacts; signaller: ProcessSignaller } {
  if (tools !== null) return tools;
  let facts: ProcessFacts;
  try {
    facts = getProcessFacts();
  } catch (err) {
    facts = createNoneFacts((err as Error).message);
  }
  tools = { facts, signaller: createSignaller(facts, linux ? startBinding : loadNative()) };
  return tools;
}

const entered = enterLeaseCgroup();
if (entered.ok)
  spawnAdapter(args.command, entered.inside ? ownCgroupNamespace() : entered.given ? "not-in-cgroup" : null);
else spawnFailed(Object.assign(new Error(entered.why), { code: CGROUP_MOVE_FAILED }));

/**
 * Once inside the lease cgroup, this thread gets its own cgroup namespace,
 * rooted there, before the spawn: libuv forks the adapter from this thread,
 * so the adapter is born in it (the native wrapper's comment in
 * native/wrapper_cgroup_linux.c says what the kernel then refuses). What the
 * "started" report says: "entered", the errno name of a refused unshare, or
 * "no-addon" without the addon.
 */
function ownCgroupNamespace(): string {
  const unshare = startBinding?.unshareCgroupNamespace;
  if (startBinding === null || unshare === undefined) return "no-addon";
  const r = unshare.call(startBinding);
  return r === 0 ? "entered" : (errnoNames[-r] ?? `E${-r}`);
}

/**
 * Moves this wrapper into the lease's cgroup before the adapter exists, so
 * every descendant is born inside it whatever it later does to its
 * environment, parent or session. A move that fails leaves the session
 * uncontained: the lease's cgroup stays empty and ownership rests on the
 * parent links and markers, as without containment.
 */
function enterLeaseCgroup(): { ok: true; given: boolean; inside: boolean } | { ok: false; why: string } {
  const dir = process.env[CGROUP_ENV_KEY];
  const required = process.env[CGROUP_REQUIRED_ENV_KEY] === "1";
  delete process.env[CGROUP_ENV_KEY];
  delete process.env[CGROUP_REQUIRED_ENV_KEY];
  if (dir === undefined)
    return required
      ? { ok: false, why: "limits were asked for but no lease cgroup was given" }
      : { ok: true, given: false, inside: false };
  // the gateway moves us in while Node boots (launch.ts); the write here is for when it has not landed yet
  if (isInCgroup(dir)) return { ok: true, given: true, inside: true };
  const entered = enterCgroup(dir);
  if (entered.outcome === "moved") return { ok: true, given: true, inside: true };
  // uncontained (see above), unless limits need the cgroup: then nothing may start outside it
  const why = `cannot enter the lease cgroup ${dir} (${entered.outcome}${entered.detail ? `: ${entered.detail}` : ""}), so the session's limits would not hold`;
  return required ? { ok: false, why } : { ok: true, given: true, inside: false };
}

function spawnAdapter(command: string[], cgroupNamespace: string | null): void {
  const [file, ...rest] = command as [string, ...string[]];
  let child: ChildProcess;
  try {
    // detached → setsid: the adapter leads its own session and group, so the
    // group can be signalled as a unit and never includes the wrapper.
    child = spawn(file, rest, { stdio: ["inherit", "inherit", "inherit"], detached: true });
  } catch (err) {
    spawnFailed(err as NodeJS.ErrnoException);
    return;
  }
  let failedReported = false;
  // "on", not "once": a second "error" (a failed kill) must not take the wrapper down
  child.on("error", (err: NodeJS.ErrnoException) => {
    // 'error' without a pid is a failed spawn; with a pid it is a failed
    // kill/send, which we never ask libuv for
    if (child.pid === undefined && !failedReported) {
      failedReported = true;
      spawnFailed(err);
    }
  });
  if (child.pid === undefined) return; // the 'error' event follows
  adapterPid = child.pid;
  child.once("exit", (code, signal) => onAdapterExit(code, signal));
  // Only with an in-process walker: the ps backend spawns `ps` through libuv,
  // and a reaper racing libuv for that child's status would hang its caller.
  // Which backend that is gets decided at the first SIGCHLD, not now.
  if (subreaper) {
    const binding = startBinding;
    reaper = startAdoptedReaper(
      binding,
      () => {
        const { facts } = cleanupTools();
        return inProcessWalker(facts) ? facts.snapshot() : null;
      },
      new Set([child.pid]),
    );
  }
  lifeline?.send({
    type: "started",
    wrapperPid: process.pid,
    adapterPid: child.pid,
    pgid: child.pid,
    ...(cgroupNamespace !== null ? { cgroupNamespace } : {}),
  });
  // after the report the gateway waits for; still within the synchronous start, so no EOF is missed
  lifeline?.watch(
    () => parentGone(),
    (chunk) => {
      if (chunk.includes("end\n")) askedToEnd = true;
    },
  );
  const held = pendingSignals;
  pendingSignals = [];
  for (const sig of held) forward(sig);
}

function spawnFailed(err: NodeJS.ErrnoException): void {
  const code = typeof err.code === "string" ? err.code : "EUNKNOWN";
  lifeline?.send({ type: "spawn-error", code, message: err.message });
  stderr(`proclease wrapper: cannot start adapter: ${err.message}`);
  process.exit(factsFaultOfCode(code) === "missing" ? EXIT_NOT_FOUND : EXIT_CANNOT_EXECUTE);
}

function forward(sig: NodeJS.Signals): void {
  if (adapterPid === null) {
    pendingSignals.push(sig);
    return;
  }
  if (adapterStatus !== null) return;
  forwardedSignal = true;
  groupKill(sig);
}

/**
 * The adapter's pid while it is our unreaped child, else null. This is the
 * whole proof for a group signal (adapter-group.ts): the adapter is the
 * verified root of the wrapper's kill target, and the group setsid() gave it
 * (pgid == adapterPid) cannot be reused until we reap it.
 */
function unreapedAdapterPid(): number | null {
  return adapterStatus === null ? adapterPid : null;
}

/** Signals the adapter's group, only while the guard accepts the proof computed from our own state. */
function groupKill(sig: NodeJS.Signals): void {
  // the group the wrapper created: detached → setsid, so pgid == adapterPid
  signalAdapterGroup(adapterPid, unreapedAdapterPid(), sig);
}

function onAdapterExit(code: number | null, signal: NodeJS.Signals | null): void {
  adapterStatus = { code, signal };
  lifeline?.send({ type: "exit", code, signal });
  if (cleanup !== null) return; // parent-gone cleanup exits when done
  // Either way the adapter's session is over and anything it left running
  // (a setsid or double-forked grandchild) is an orphan of ours: sweep it.
  runCleanup(forwardedSignal ? "signal" : "adapter-exit");
}

function parentGone(): void {
  // before a pid exists the spawn-error path is about to exit: nothing to clean
  if (adapterPid === null || cleanup !== null) return;
  runCleanup("parent-gone");
}

/**
 * A cleanup is bounded by the tree kill's own timers (grace, then a KILL
 * confirmation); this watchdog only guards against a facts call that never
 * settles. It SIGKILLs the group (still provably ours while unreaped) and
 * exits, so the wrapper can never hang on forever.
 */
const CLEANUP_SLACK_MS = 15_000;

function runCleanup(reason: CleanupReason): void {
  const t0 = Date.now();
  setTimeout(() => {
    groupKill("SIGKILL");
    lifeline?.send({ type: "cleanup", reason, ended: [], durationMs: Date.now() - t0 });
    finish();
  }, args.graceMs + CLEANUP_SLACK_MS);
  const { facts, signaller } = cleanupTools();
  // nobody asked: the wrapper's own word on who ended the tree (end-record.ts), before and after the sweep
  const says =
    reason === "parent-gone" && !askedToEnd && endRecord !== null
      ? facts
          .inspect(process.pid)
          .then((me) => (me === null ? null : String(me.startTime)))
          .catch(() => null)
      : Promise.resolve(null);
  void says.then((start) => start !== null && endRecord?.("parent-gone", null, start));
  cleanup = cleanupTree({
    facts,
    signaller,
    graceMs: args.graceMs,
    leaseId: process.env[LEASE_ENV_KEY],
    gatewayInstanceId: process.env[INSTANCE_ENV_KEY],
    adapterPgid: adapterPid,
    unreapedAdapterPid,
    ...(reaper && inProcessWalker(facts) ? { reapZombies: (snap) => void reaper?.reapIn(snap) } : {}),
  })
    .catch(() => [] as number[])
    .then(async (ended) => {
      // the adapter was signalled too: give libuv a moment to report its status
      await waitForAdapterStatus(1000);
      // the adapter counts as ended once libuv has its status (the group
      // SIGTERM may have ended it before any per-pid signal)
      if (adapterPid !== null && adapterStatus !== null && !ended.includes(adapterPid)) ended.push(adapterPid);
      ended.sort((a, b) => a - b);
      const start = await says;
      if (start !== null) endRecord?.("parent-gone", ended, start);
      lifeline?.send({ type: "cleanup", reason, ended, durationMs: Date.now() - t0 });
      finish();
    });
}

async function waitForAdapterStatus(ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (adapterStatus === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
}

function finish(): never {
  reaper?.stop();
  const s = adapterStatus;
  if (s === null) process.exit(1);
  if (s.code !== null) process.exit(s.code);
  process.exit(128 + (signalNumbers[s.signal ?? ""] ?? 0));
}

/** A backend that walks the process list in this process (never spawns `ps` through libuv). */
function inProcessWalker(facts: ProcessFacts): boolean {
  return facts.backend === "native" || facts.backend === "procfs";
}

function stderr(msg: string): void {
  try {
    writeSync(2, `${msg}\n`);
  } catch {
    // nowhere left to say it
  }
}
