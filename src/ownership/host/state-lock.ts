/**
 * One gateway per state dir. Two controllers on one state dir (a restart
 * overlapping the old gateway's shutdown, or two gateways by mistake) would
 * each start a tree for the same session key and each settle the other's
 * leases. So a writer holds
 * `<stateDir>/gateway.lock` for its lifetime:
 *
 * - with the addon: flock(LOCK_EX | LOCK_NB) on the open file. The kernel
 *   drops it when the holder dies, so a crashed gateway never blocks the
 *   next one, and a pid reused since cannot pass for the holder.
 * - without it: the file is created link()-exclusively and names its holder
 *   (pid + start time); a later writer verifies that holder through the facts
 *   layer and takes over only when it is gone or its pid names another
 *   process now. Two writers that find the same stale file at the same
 *   moment can both take it over: the one window this fallback has.
 *
 * Either way the file holds `{"pid", "startTime"}` of the holder, which is
 * how a refused writer names it (StateDirLockedError.holderPid). A gateway's
 * keeper (keeper.ts) takes the lock after the gateway died, with
 * `"role": "keeper"` in the file: a gateway that arrives meanwhile waits for
 * it instead of being refused, so the two never kill at once and the new
 * gateway's startup reap sees what the keeper settled. The wait is sized by
 * the keeper's progress, not by a fixed bound: a keeper rewrites its line
 * every KEEPER_BEAT_MS while it works (StateDirLock.progress), and a gateway
 * waits as long as the line keeps changing, giving up only after
 * KEEPER_STALL_MS without a change. A lock whose file still names a holder
 * that is gone (or nobody) is one changing hands (the keeper took the flock
 * and has not written its name yet): it is waited for the same way. Readers
 * never take the lock and work beside a live gateway. Mixing a gateway with the addon and one without on the same state
 * dir is not supported (their locks do not see each other's).
 */
import { isAlive } from "../../facts/liveness.js";
import { constants } from "node:fs";
import { link, open, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { loadNative } from "../../facts/native.js";
import type { ProcessFacts } from "../../facts/types.js";
import { assertPrivate, ensurePrivateDir, readOwnedFile, writeTemp } from "../leases/fs-safe.js";
import { hostFault } from "../leases/host-faults.js";
import { sameProcess } from "../../facts/identity.js";

export const STATE_LOCK_FILE = "gateway.lock";
const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const EWOULDBLOCK = new Set([-11, -35]); // EAGAIN/EWOULDBLOCK on Linux, macOS
/** how long a gateway waits for a holder whose line does not change: a keeper that stopped working, or a lock that never names its holder */
export const KEEPER_STALL_MS = 10_000;
/** how often a keeper holding the state dir rewrites its line (its progress) */
export const KEEPER_BEAT_MS = 500;

export class StateDirLockedError extends Error {
  override name = "StateDirLockedError";
  constructor(
    readonly stateDir: string,
    /** the live holder's pid, null when the holder could not be named */
    readonly holderPid: number | null,
    /** "keeper": the holder is a dead gateway's keeper ending what it started (keeper.ts) */
    readonly holderRole: "gateway" | "keeper" = "gateway",
  ) {
    super(
      `state dir ${stateDir} is in use by another gateway${holderPid !== null ? ` (pid ${holderPid})` : ""}: ` +
        "one gateway per state dir. Stop it first, or give this one its own state dir",
    );
  }
}

export interface StateDirLock {
  readonly path: string;
  readonly how: "flock" | "lock-file";
  /** rewrites the holder's line with a fresh beat: a waiting gateway sees the keeper at work (a no-op for the lock-file fallback) */
  progress(): Promise<void>;
  /** Idempotent. The kernel releases a flock on exit anyway; the lock file is removed only while it still names us. */
  release(): Promise<void>;
}

interface Holder {
  pid: number;
  startTime: string;
  role?: "keeper";
}

/**
 * Takes the state dir's lock, or rejects with StateDirLockedError naming the
 * live holder. A gateway waits while the holder is a keeper at work, or the
 * lock is changing hands (waitable); a live gateway refuses it at once, and
 * a keeper never waits.
 */
export async function acquireStateDirLock(
  stateDir: string,
  facts: ProcessFacts,
  opts: { role?: "keeper"; stallMs?: number } = {},
): Promise<StateDirLock> {
  await ensurePrivateDir(stateDir);
  const path = join(stateDir, STATE_LOCK_FILE);
  const me: Holder = { ...(await selfHolder(facts)), ...(opts.role === "keeper" ? { role: "keeper" as const } : {}) };
  const native = loadNative();
  const stallMs = opts.stallMs ?? KEEPER_STALL_MS;
  let seen: string | undefined;
  let since = Date.now();
  for (;;) {
    try {
      return await (native
        ? flockLock(stateDir, path, me, native.lockExclusive.bind(native))
        : fileLock(stateDir, path, me, facts));
    } catch (e) {
      if (!(e instanceof StateDirLockedError) || me.role === "keeper") throw e;
      const line = await waitable(path, facts);
      if (line === null) throw e;
      if (line !== seen) {
        seen = line;
        since = Date.now();
      } else if (Date.now() - since > stallMs) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/**
 * The lock file's line when a gateway should wait for its holder (a keeper,
 * or a holder that is gone or unnamed: the lock is changing hands); null
 * when the holder is a live gateway (or cannot be told from one).
 */
async function waitable(path: string, facts: ProcessFacts): Promise<string | null> {
  const r = await readOwnedFile(path, 4096).catch(() => null);
  const text = r?.kind === "ok" ? r.text : "";
  const holder = parseHolder(text);
  if (holder === null || holder.role === "keeper") return text;
  return (await holderAlive(holder, facts)) === false ? text : null;
}

function lockedBy(stateDir: string, holder: Holder | null): StateDirLockedError {
  return new StateDirLockedError(stateDir, holder?.pid ?? null, holder?.role === "keeper" ? "keeper" : "gateway");
}

async function flockLock(
  stateDir: string,
  path: string,
  me: Holder,
  lockExclusive: (fd: number) => number,
): Promise<StateDirLock> {
  const fh = await open(path, constants.O_RDWR | constants.O_CREAT | O_NOFOLLOW, 0o600);
  let held = false;
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new Error(`${path} is not a regular file`);
    assertPrivate(path, st, "file");
    // a reader's probe (stateDirLockHolder) holds it for microseconds: a few short retries tell it from a gateway
    let rc = lockExclusive(fh.fd);
    for (let i = 0; i < 5 && EWOULDBLOCK.has(rc); i++) {
      await new Promise((r) => setTimeout(r, 20));
      rc = lockExclusive(fh.fd);
    }
    if (EWOULDBLOCK.has(rc)) throw lockedBy(stateDir, parseHolder(await fh.readFile("utf8")));
    if (rc !== 0) throw new Error(`${path}: flock failed (errno ${-rc})`);
    held = true;
    // The flock is the lock; the file's text only names the holder for a
    // refused writer. A full or read-only disk must not keep a gateway from
    // starting (it still ends trees without writing: lifecycle.ts): the name
    // is then missing, and StateDirLockedError says so with a null holderPid.
    try {
      await fh.truncate(0);
      await fh.write(JSON.stringify(me) + "\n", 0, "utf8");
      await fh.sync();
    } catch {
      await fh.truncate(0).catch(() => undefined);
    }
  } finally {
    if (!held) await fh.close().catch(() => undefined);
  }
  let released = false;
  let beat = 0;
  return {
    path,
    how: "flock",
    async progress() {
      if (released) return;
      const line = JSON.stringify({ ...me, beat: ++beat }) + "\n";
      // the same length or longer each time: no truncate, so a reader never sees an empty file
      await fh.write(line, 0, "utf8").catch(() => undefined);
    },
    async release() {
      if (released) return;
      released = true;
      await fh.truncate(0).catch(() => undefined);
      await fh.close().catch(() => undefined);
    },
  };
}

async function fileLock(stateDir: string, path: string, me: Holder, facts: ProcessFacts): Promise<StateDirLock> {
  for (let attempt = 0; ; attempt++) {
    const tmp = await writeTemp(stateDir, STATE_LOCK_FILE, JSON.stringify(me) + "\n", true);
    try {
      await link(tmp, path);
      break;
    } catch (e) {
      if (hostFault(e) !== "exists") throw e;
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
    const r = await readOwnedFile(path, 4096);
    if (r.kind === "missing") continue;
    if (r.kind !== "ok")
      throw new Error(
        `${path}: ${r.kind === "unreadable" ? r.detail : r.kind}; refusing to guess whether a gateway holds it`,
      );
    assertPrivate(path, r, "file");
    const holder = parseHolder(r.text);
    // fail closed: a holder that cannot be proven gone is a holder
    if (holder === null || attempt > 0 || (await holderAlive(holder, facts)) !== false)
      throw lockedBy(stateDir, holder);
    await unlink(path).catch(() => undefined);
  }
  let released = false;
  return {
    path,
    how: "lock-file",
    // the file is the lock here: it is never rewritten while held
    progress: () => Promise.resolve(),
    async release() {
      if (released) return;
      released = true;
      const r = await readOwnedFile(path, 4096);
      const h = r.kind === "ok" ? parseHolder(r.text) : null;
      if (sameProcess(h, me)) await unlink(path).catch(() => undefined);
    },
  };
}

/** true/false when the facts can say; null when they cannot (then the holder counts as alive). */
async function holderAlive(h: Holder, facts: ProcessFacts): Promise<boolean | null> {
  try {
    const d = await facts.inspect(h.pid);
    if (d === null) return false;
    return sameProcess(d, h) && isAlive(d);
  } catch {
    return null;
  }
}

async function selfHolder(facts: ProcessFacts): Promise<Holder> {
  let startTime = "unknown";
  try {
    const d = await facts.inspect(process.pid);
    if (d) startTime = String(d.startTime);
  } catch {
    // the start time only names the holder; the flock itself does not need it
  }
  return { pid: process.pid, startTime };
}

function parseHolder(text: string): Holder | null {
  try {
    const j = JSON.parse(text) as unknown;
    if (typeof j !== "object" || j === null) return null;
    const { pid, startTime, role } = j as Record<string, unknown>;
    if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0 || typeof startTime !== "string") return null;
    return { pid, startTime, ...(role === "keeper" ? { role } : {}) };
  } catch {
    return null;
  }
}

/**
 * Whether a writer holds the state dir now, for a reader. Never creates the
 * lock file. With the addon the answer comes from
 * the kernel (a probe flock, released at once); without it, from the file's
 * holder checked through the facts layer.
 */
export async function stateDirLockHolder(
  stateDir: string,
  facts: ProcessFacts,
): Promise<{ held: boolean; holderPid: number | null }> {
  const path = join(stateDir, STATE_LOCK_FILE);
  const r = await readOwnedFile(path, 4096);
  if (r.kind === "missing") return { held: false, holderPid: null };
  const holder = r.kind === "ok" ? parseHolder(r.text) : null;
  const native = loadNative();
  if (native) {
    let fh: FileHandle | undefined;
    try {
      fh = await open(path, constants.O_RDONLY | O_NOFOLLOW);
      const rc = native.lockExclusive(fh.fd);
      return { held: EWOULDBLOCK.has(rc), holderPid: EWOULDBLOCK.has(rc) ? (holder?.pid ?? null) : null };
    } catch {
      return { held: true, holderPid: holder?.pid ?? null };
    } finally {
      await fh?.close().catch(() => undefined);
    }
  }
  if (holder === null) return { held: r.kind !== "ok" || r.text.trim() !== "", holderPid: null };
  const alive = await holderAlive(holder, facts);
  return { held: alive !== false, holderPid: alive !== false ? holder.pid : null };
}
