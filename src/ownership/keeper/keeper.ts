/**
 * The gateway side of the keeper (docs/ownership.md, "The keeper").
 *
 * A gateway that dies by SIGKILL runs no cleanup: its adapters' wrappers end
 * their own trees (their lifeline), but the leased runs it started directly
 * (ACP terminals, supervisor background runs) and escapees of a wrapper that
 * died with it would run under init until the next gateway's startup reap.
 * So one small process per gateway and state dir, the keeper
 * (keeper-main.ts), watches the gateway through a lifeline pipe (its stdin:
 * EOF with no "stop" first means the gateway is gone, however it died) and
 * then runs the startup reap's reconcile over this instance's leases
 * (keeper-reap.ts), in its own session so a process-group kill of the
 * gateway does not reach it.
 *
 * One keeper per process, state dir and instance, shared by every user in
 * the process (a controller and a supervisor on the same state dir): each
 * `acquire` counts, and the last `release` stops it. Stopping writes "stop" and then
 * SIGKILLs it: it is our own child, not yet waited for, so its pid cannot
 * name anyone else, and a keeper that sees the gateway alive has nothing
 * under way. The keeper is started lazily, by the first lease a user is
 * about to write: a controller that never starts a session costs nothing.
 *
 * A keeper that dies while its gateway lives (killed by an agent of the same
 * uid, the OOM killer) is started again at once, with a warning: a gateway
 * that then dies must still find one. A keeper stopped by such an agent
 * (SIGSTOP: it cannot be caught, and a stopped keeper never reads the
 * lifeline's EOF) is resumed: the gateway sends its own child SIGCONT every
 * RESUME_MS, which a running keeper ignores. A gateway that dies within
 * RESUME_MS of the stop leaves a stopped keeper; its leases are then the
 * next startup reap's (docs/containment.md, limits). More than MAX_RESTARTS deaths within
 * RESTART_WINDOW_MS is a keeper that cannot run here: it is given up, with a
 * warning, and the leases are left to the next startup reap.
 *
 * What the keeper is given: its config on argv (no secret: paths, ids, the
 * grace) and a scrubbed environment (keeperEnv: PATH and the PROCLEASE_*
 * switches, nothing of the gateway's credentials), and it makes itself
 * non-dumpable at start (keeper-main.ts), so another process of its uid
 * cannot read its environment or memory through /proc.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { signalUnreapedChild } from "../../facts/signal.js";
import { HOLDER_ID } from "../host/supervisor-holders.js";
import { registerOwnHelper, unregisterOwnHelper } from "../verify/own-helpers.js";

/** What the keeper process is told on its command line (one JSON argument). */
export interface KeeperConfig {
  stateDir: string;
  gatewayInstanceId: string;
  /** the gateway's pid: its state-dir lock is taken over only from this holder (or a released one) */
  gatewayPid: number;
  /** the gateway's supervisor holder id: supervisor runs are the keeper's only when they name it */
  holder: string;
  graceMs: number;
}

export interface KeeperLease {
  /** Gives this user's share back; the last one stops the keeper (it does not act). Idempotent. */
  release(): Promise<void>;
}

interface Running {
  /** the keeper process now (replaced when a dead one is restarted) */
  child: ChildProcess;
  users: number;
  /** resolves when `child` (the current one) has exited */
  exited: Promise<void>;
  /** set by stop(): an exit from then on is the one asked for */
  stopping: boolean;
  /** when each restart happened (within the window), for the give-up rule */
  restarts: number[];
  readonly cfg: KeeperConfig;
  readonly nodePath: string | undefined;
  readonly warn: KeeperWarn;
}

/** How a keeper's restart (or its giving up) is reported: the controller's logger, else a process warning. */
export type KeeperWarn = (message: string, fields: Record<string, unknown>) => void;

/** a keeper that dies more often than this within the window is given up */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;
/** how often a stopped keeper is resumed: one kill(2) of our own child, nothing else */
const RESUME_MS = 200;

const running = new Map<string, Running>();
const keyOf = (stateDir: string, instance: string) => `${stateDir}\0${instance}`;

export type KeeperOption = "on" | "off";

/** The option wins; without it PROCLEASE_KEEPER=off turns the keeper off (a host whose service manager ends the gateway's whole cgroup anyway). */
export function keeperWanted(option: KeeperOption | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  return (option ?? (env.PROCLEASE_KEEPER === "off" ? "off" : "on")) === "on";
}

export function assertKeeperOption(v: unknown, name: string): asserts v is KeeperOption | undefined {
  if (v !== undefined && v !== "on" && v !== "off")
    throw new TypeError(`${name} must be "on" or "off", got ${String(v)}`);
}

/**
 * The keeper entry of this package: keeper-main.ts and all it imports bundled
 * into one file at `npm run build` (dist/ownership/keeper-main.cjs,
 * scripts/bundle-wrapper.mjs), read whole at the keeper's start; from src/
 * under vitest, the dist/ build.
 */
export function keeperEntryPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, "..", "keeper-main.cjs");
  if (existsSync(sibling)) return sibling;
  const fromSrc = resolve(here, "..", "..", "..", "dist", "ownership", "keeper-main.cjs");
  if (existsSync(fromSrc)) return fromSrc;
  throw new Error(
    `the proclease keeper entry was not found (looked for ${sibling} and ${fromSrc}); run \`npm run build\` first`,
  );
}

/**
 * This process's keeper for `stateDir` (started now if none runs), counted
 * for the caller until it releases. Throws only when the keeper cannot be
 * spawned at all; the caller decides whether to go on without one.
 */
export function acquireKeeper(opts: {
  stateDir: string;
  gatewayInstanceId: string;
  graceMs: number;
  nodePath?: string;
  /** where a restart or a give-up is reported; default: process.emitWarning */
  warn?: KeeperWarn;
}): KeeperLease {
  const stateDir = resolve(opts.stateDir);
  const key = keyOf(stateDir, opts.gatewayInstanceId);
  let r = running.get(key);
  if (r === undefined || r.child.exitCode !== null || r.child.signalCode !== null) {
    const cfg = keeperConfigOf(stateDir, opts);
    r = {
      cfg,
      nodePath: opts.nodePath,
      warn: opts.warn ?? emitKeeperWarning,
      users: 0,
      stopping: false,
      restarts: [],
      ...start(cfg, opts.nodePath),
    };
    running.set(key, r);
    watch(key, r);
  }
  r.users++;
  const mine = r;
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      if (--mine.users > 0) return;
      if (running.get(key) === mine) running.delete(key);
      await stop(mine);
    },
  };
}

/** The keeper's pid for a state dir, while this process runs one (tests and diagnostics). */
export function keeperPid(stateDir: string): number | undefined {
  const prefix = keyOf(resolve(stateDir), "");
  for (const [k, r] of running) if (k.startsWith(prefix)) return r.child.pid;
  return undefined;
}

function keeperConfigOf(stateDir: string, opts: { gatewayInstanceId: string; graceMs: number }): KeeperConfig {
  return {
    stateDir,
    gatewayInstanceId: opts.gatewayInstanceId,
    gatewayPid: process.pid,
    holder: HOLDER_ID,
    graceMs: opts.graceMs,
  };
}

/**
 * The keeper's environment: PATH (the ps backend runs `ps`) and the
 * PROCLEASE_* switches (backend, native code, wrapper kind), nothing else:
 * the gateway's environment holds credentials (some of them removed from an
 * adapter's with envRemove) that the keeper never needs.
 */
export function keeperEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env))
    if (v !== undefined && (k === "PATH" || k.startsWith("PROCLEASE_"))) out[k] = v;
  return out;
}

function emitKeeperWarning(message: string, fields: Record<string, unknown>): void {
  process.emitWarning(`${message} ${JSON.stringify(fields)}`, { type: "ProcleaseKeeperWarning" });
}

/** A keeper that exits while it still has users and was not stopped is started again (or given up: MAX_RESTARTS). */
function watch(key: string, r: Running): void {
  const child = r.child;
  child.once("exit", (code, signal) => {
    if (r.stopping || r.users <= 0 || running.get(key) !== r || r.child !== child) return;
    const now = Date.now();
    r.restarts = r.restarts.filter((t) => now - t < RESTART_WINDOW_MS);
    const fields = { stateDir: r.cfg.stateDir, pid: child.pid, code, signal };
    if (r.restarts.length >= MAX_RESTARTS) {
      running.delete(key);
      r.warn(
        `proclease: the keeper died ${MAX_RESTARTS + 1} times within ${RESTART_WINDOW_MS} ms; it is not started again, and this gateway's runs outlive a crash until the next startup reap`,
        fields,
      );
      return;
    }
    r.restarts.push(now);
    child.stdin?.destroy();
    try {
      Object.assign(r, start(r.cfg, r.nodePath));
      watch(key, r);
      r.warn("proclease: the keeper died while its gateway lives; a new one was started", {
        ...fields,
        newPid: r.child.pid,
      });
    } catch (err) {
      running.delete(key);
      r.warn("proclease: the keeper died and could not be started again", { ...fields, error: String(err) });
    }
  });
}

function start(cfg: KeeperConfig, nodePath = process.execPath): Pick<Running, "child" | "exited"> {
  const child = spawn(nodePath, [keeperEntryPath(), JSON.stringify(cfg)], {
    // its own session: a kill of the gateway's process group must not take it along
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
    env: keeperEnv(),
  });
  // while it runs, a remnant search of this process skips it (unreadable to a non-root gateway: it is not dumpable)
  if (child.pid !== undefined) registerOwnHelper(child.pid);
  // our own unreaped child (signalUnreapedChild): SIGCONT can reach no one else, and a running keeper ignores it
  const resume = setInterval(() => signalUnreapedChild(child, "SIGCONT"), RESUME_MS);
  resume.unref();
  const exited = new Promise<void>((done) => {
    const gone = (): void => {
      clearInterval(resume);
      if (child.pid !== undefined) unregisterOwnHelper(child.pid);
      done();
    };
    child.once("exit", gone);
    child.once("error", gone);
  });
  // the lifeline's write end lives only here (libuv opens it close-on-exec): no child of the gateway keeps it open
  child.stdin?.on("error", () => undefined);
  // a gateway must be able to exit with its keeper running: that exit is what the keeper waits for
  child.unref();
  (child.stdin as { unref?: () => void } | null)?.unref?.();
  return { child, exited };
}

async function stop(r: Running): Promise<void> {
  r.stopping = true;
  const { child } = r;
  if (child.exitCode === null && child.signalCode === null) {
    // held again until its exit is seen: an unref'd child's exit would not keep this process alive to hear it
    child.ref();
    // "stop" first: a keeper that reads it before the kill lands exits without acting
    child.stdin?.write("stop\n");
    signalUnreapedChild(child, "SIGKILL");
  }
  await r.exited;
  child.stdin?.destroy();
}
