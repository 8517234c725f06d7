/**
 * A gateway that starts while the state dir's lock is a dead gateway's
 * keeper's, or is changing hands, waits; how long is sized by the holder's
 * progress (its line in gateway.lock changing), never by a fixed bound, and
 * a holder that stops changing is given up. Each holder here is a real
 * process with a real flock (the addon's), so the kernel, not a mock, says
 * the lock is held.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { loadNative, nativeAddonPath } from "../../src/facts/native.js";
import { acquireStateDirLock, StateDirLockedError } from "../../src/ownership/host/state-lock.js";
import { tempStateDir, trackChild, waitFor } from "../acpx/controller-helpers.js";

const addon = nativeAddonPath();
const d = loadNative() !== null && addon !== null ? describe : describe.skip;
if (loadNative() === null) console.log("state-lock wait tests skipped: they need the addon's flock");

const facts = getProcessFacts();
const held: ChildProcess[] = [];
afterEach(() => {
  for (const c of held.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
});

/**
 * A process that takes the flock on `lock` and holds it for `holdMs`. `beatMs`
 * > 0: it rewrites a keeper's line that often (a keeper at work); 0: it
 * writes nothing (the file keeps whatever it said before), or once when
 * `once` (a keeper that stopped).
 */
function holder(lock: string, holdMs: number, beatMs: number, once = false): ChildProcess {
  const code = `
    const fs = require("fs");
    const n = require(${JSON.stringify(addon)});
    const fd = fs.openSync(${JSON.stringify(lock)}, "r+");
    if (n.lockExclusive(fd) !== 0) process.exit(3);
    let beat = 0;
    const line = () => fs.writeSync(fd, JSON.stringify({ pid: process.pid, startTime: "1", role: "keeper", beat: ++beat }) + "\\n", 0);
    if (${once}) line();
    if (${beatMs} > 0) setInterval(line, ${beatMs});
    process.stdout.write("held\\n");
    setTimeout(() => process.exit(0), ${holdMs});
  `;
  const c = trackChild(spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] }));
  held.push(c);
  return c;
}

const holding = (c: ChildProcess) => new Promise<void>((r) => c.stdout!.once("data", () => r()));

d("a gateway waits for a lock changing hands or a keeper at work", () => {
  it("a lock whose file still names a gateway that is gone (its keeper has not written its name yet) is waited for, not refused", async () => {
    const stateDir = tempStateDir("lock-hands");
    const lock = join(stateDir, "gateway.lock");
    // the dead gateway's line, as the kernel left it when it dropped the gateway's flock
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    writeFileSync(lock, `${JSON.stringify({ pid: Number(dead.stdout), startTime: "12345" })}\n`, { mode: 0o600 });
    const h = holder(lock, 1500, 0);
    await holding(h);
    const t0 = Date.now();
    const got = await acquireStateDirLock(stateDir, facts);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
    expect(h.exitCode).toBe(0);
    await got.release();
  });

  it("a keeper whose line keeps changing is waited for past the stall bound; one whose line stops is given up, named as a keeper", async () => {
    const stateDir = tempStateDir("lock-progress");
    const lock = join(stateDir, "gateway.lock");
    writeFileSync(lock, "", { mode: 0o600 });
    const busy = holder(lock, 2500, 150);
    await holding(busy);
    const t0 = Date.now();
    const got = await acquireStateDirLock(stateDir, facts, { stallMs: 1000 });
    // longer than the stall bound: its progress sized the wait
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
    await got.release();

    const stuck = holder(lock, 20_000, 0, true);
    await holding(stuck);
    const t1 = Date.now();
    const err = await acquireStateDirLock(stateDir, facts, { stallMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StateDirLockedError);
    expect(err).toMatchObject({ holderRole: "keeper", holderPid: stuck.pid });
    expect(Date.now() - t1).toBeLessThan(15_000);
    expect(await waitFor(() => stuck.exitCode === null, 10)).not.toBe(-1);
  });
});
