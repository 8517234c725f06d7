// Identity-checked signalling against real processes: the pidfd path (when
// the addon loads) and the inspect-then-kill fallback, plus a real pid reuse
// inside a private pid namespace.
import { worldReadableCopies } from "../helpers/readable-copy.js";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { createNativeFacts, loadError, loadNative, nativeAddonPath } from "../../src/facts/native.js";
import { createSignaller } from "../../src/facts/signal.js";
import type { ProcessDetails, ProcessFacts, ProcessSignaller } from "../../src/facts/types.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

const binding = loadNative();
const skipReason = binding ? null : `native addon did not load: ${loadError() ?? "unknown reason"}`;
if (skipReason) console.log(`[signal.test] skipping native cases: ${skipReason}`);
const ADDON = nativeAddonPath() ?? "addon-not-found";
const FIXTURES = fileURLToPath(new URL("../fixtures/native/", import.meta.url));

const children: ChildProcess[] = [];

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

async function sleeper(): Promise<{ child: ChildProcess; pid: number; start: string }> {
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", () => resolve());
    child.once("error", reject);
  });
  const pid = child.pid!;
  return { child, pid, start: statStart(pid)! };
}

/** Field 22 of /proc/PID/stat, read independently of the code under test. */
function statStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

function alive(child: ChildProcess): boolean {
  const stat = statStart(child.pid!);
  return child.exitCode === null && child.signalCode === null && stat !== null;
}

/** A minimal procfs-backed facts stub, so the fallback path needs no addon. */
function procfsStub(
  identityStrength: ProcessFacts["identityStrength"] = "exact",
): ProcessFacts & { inspected: number } {
  const stub = {
    backend: "procfs" as const,
    identityStrength,
    inspected: 0,
    snapshot: () => Promise.reject(new Error("not used")),
    async inspect(pid: number): Promise<ProcessDetails | null> {
      stub.inspected++;
      const start = statStart(pid);
      if (start === null) return null;
      return {
        pid,
        ppid: 0,
        pgid: 0,
        sid: 0,
        uid: 0,
        state: "S",
        startTime: start,
        exePath: null,
        argv: null,
        env: {},
      };
    },
    inspectMany: (pids: readonly number[]) => inspectEach((pid) => stub.inspect(pid), pids, undefined, 1),
  };
  return stub;
}

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill("SIGKILL");
      await exited(c);
    }
  }
});

const nativeSuite = binding ? describe : describe.skip;
nativeSuite(binding ? "pidfd signaller (native)" : `pidfd signaller (skipped: ${skipReason})`, () => {
  const facts = createNativeFacts(binding!);
  const signaller = createSignaller(facts, binding);

  it("is race-free on this kernel", () => {
    expect(binding!.pidfdSupported()).toBe(true);
    expect(signaller.raceFree).toBe(true);
  });

  sharedOutcomeCases(() => signaller);

  it.each(["", "12a", "-5", "1e3", " 12", "0x10"])(
    "answers unknown for start time %j and sends nothing",
    async (bad) => {
      const { child, pid } = await sleeper();
      expect(await signaller.signal(pid, bad, "SIGKILL")).toBe("unknown");
      expect(alive(child)).toBe(true);
    },
  );

  it("rejects a bad pid or signal name naming the argument", async () => {
    await expect(signaller.signal(0, "1", "SIGTERM")).rejects.toThrow(RangeError);
    await expect(signaller.signal(1.5, "1", "SIGTERM")).rejects.toThrow(/\bpid\b/);
    await expect(signaller.signal(4_000_000, "1", "SIGNOPE" as NodeJS.Signals)).rejects.toThrow(TypeError);
    await expect(signaller.signal(4_000_000, "1", "SIGNOPE" as NodeJS.Signals)).rejects.toThrow(/signal/);
  });

  const nobodyReason =
    process.getuid?.() !== 0
      ? "not root, cannot start a child as uid 65534"
      : spawnSync(process.execPath, ["-e", ""], { uid: 65534, gid: 65534, timeout: 15_000 }).status !== 0
        ? "cannot start a child as uid 65534"
        : null;
  if (nobodyReason) console.log(`[signal.test] skipping denied: ${nobodyReason}`);
  it.skipIf(nobodyReason !== null)(
    nobodyReason
      ? `denied (skipped: ${nobodyReason})`
      : "answers denied for another user's process (asked by a child running as uid 65534)",
    async () => {
      const { child, pid, start } = await sleeper();
      // the checkout may be 0700: the other uid reads the fixture and the addon from a world-readable copy
      const copy = worldReadableCopies([`${FIXTURES}signal-as-other-user.cjs`, ADDON]);
      const run = spawnSync(process.execPath, [copy.paths[0]!, copy.paths[1]!, String(pid), start], {
        uid: 65534,
        gid: 65534,
        cwd: copy.dir,
        encoding: "utf8",
        timeout: 15_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const out = JSON.parse(run.stdout) as { uid: number; native: string; kill: string };
      // native: pidfd_send_signal → EPERM; kill: the errno the fallback maps to "denied"
      expect(out).toEqual({ uid: 65534, native: "denied", kill: "EPERM" });
      expect(alive(child)).toBe(true);
    },
  );

  const reuseReason =
    process.getuid?.() !== 0
      ? "not root"
      : spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"]).status !== 0
        ? "unshare --pid --fork --mount-proc failed"
        : null;
  if (reuseReason) console.log(`[signal.test] skipping pid reuse: ${reuseReason}`);
  it.skipIf(reuseReason !== null)(
    reuseReason
      ? `real pid reuse (skipped: ${reuseReason})`
      : "real pid reuse in a private pid namespace: the impostor is not killed",
    () => {
      const run = spawnSync(
        "unshare",
        ["--pid", "--fork", "--mount-proc", process.execPath, `${FIXTURES}pid-reuse.mjs`, ADDON],
        {
          encoding: "utf8",
          timeout: 25_000,
        },
      );
      expect(run.status, run.stderr).toBe(0);
      const r = JSON.parse(run.stdout) as Record<string, unknown>;
      expect(r.impostorPid, "ns_last_pid steering must land the impostor on the victim's pid").toBe(r.victimPid);
      expect(r.impostorStart).not.toBe(r.victimStart);
      expect(r.outcome).toBe("mismatch");
      expect(r.impostorAlive).toBe(true);
    },
  );
});

describe("inspect-then-kill signaller (fallback)", () => {
  it("is selected with binding null, with PROCLEASE_DISABLE_NATIVE=1, and for a backend whose start-time unit differs", () => {
    expect(createSignaller(procfsStub(), null).raceFree).toBe(false);
    // ps counts whole seconds: the addon's tick comparison would always say "mismatch"
    const psStub = { ...procfsStub(), backend: "ps" as const, identityStrength: "coarse" as const };
    expect(createSignaller(psStub, loadNative()).raceFree).toBe(false);
    // procfs counts the same clock ticks as the addon: the default pairs them (race-free)
    if (loadNative()?.pidfdSupported()) expect(createSignaller(procfsStub()).raceFree).toBe(true);
    const before = process.env.PROCLEASE_DISABLE_NATIVE;
    process.env.PROCLEASE_DISABLE_NATIVE = "1";
    try {
      expect(loadNative()).toBeNull();
      expect(loadError()).toMatch(/PROCLEASE_DISABLE_NATIVE/);
      expect(createSignaller(procfsStub(), loadNative()).raceFree).toBe(false);
    } finally {
      if (before === undefined) delete process.env.PROCLEASE_DISABLE_NATIVE;
      else process.env.PROCLEASE_DISABLE_NATIVE = before;
    }
  });

  const signaller = createSignaller(procfsStub(), null);

  sharedOutcomeCases(() => signaller);

  it("never signals (and never inspects) when the backend cannot verify identity", async () => {
    const facts = procfsStub("none");
    const { child, pid, start } = await sleeper();
    expect(await createSignaller(facts, null).signal(pid, start, "SIGKILL")).toBe("unknown");
    expect(facts.inspected).toBe(0);
    expect(alive(child)).toBe(true);
  });

  it("rejects a bad pid naming the argument", async () => {
    await expect(signaller.signal(-1, "1", "SIGTERM")).rejects.toThrow(/\bpid\b/);
    await expect(signaller.signal(Number.NaN, "1", "SIGTERM")).rejects.toThrow(TypeError);
  });
});

describe("the signaller asks the guards itself (a direct caller cannot reach a forbidden pid)", () => {
  const selfStart = (pid: number) => statStart(pid) ?? "0";
  const signallers: Array<[string, ReturnType<typeof createSignaller>]> = [
    ["inspect-then-kill", createSignaller(procfsStub(), null)],
  ];
  if (loadNative()?.pidfdSupported())
    signallers.push(["pidfd (native)", createSignaller(createNativeFacts(loadNative()!))]);
  for (const [name, s] of signallers) {
    it(`${name}: this process, its parent and init are refused with their real start times, and nothing is sent`, async () => {
      // SIGCONT would be harmless if it were sent; "refused" proves it was not even attempted
      expect(await s.signal(process.pid, selfStart(process.pid), "SIGCONT")).toBe("refused");
      expect(await s.signal(process.ppid, selfStart(process.ppid), "SIGCONT")).toBe("refused");
      expect(await s.signal(1, selfStart(1), "SIGCONT")).toBe("refused");
      // an ancestor beyond the parent (the guards refuse the whole chain up to init)
      const grandparent = ppidOf(process.ppid);
      if (grandparent !== null && grandparent > 1)
        expect(await s.signal(grandparent, selfStart(grandparent), "SIGCONT")).toBe("refused");
    });
  }
});

function ppidOf(pid: number): number | null {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return null;
  }
}

/** The outcomes every signaller must give on real processes, whichever path it takes. */
function sharedOutcomeCases(signaller: () => ProcessSignaller): void {
  it("signals the process whose start time matches", async () => {
    const { child, pid, start } = await sleeper();
    expect(await signaller().signal(pid, start, "SIGTERM")).toBe("signalled");
    await exited(child);
    expect(child.signalCode).toBe("SIGTERM");
  });

  it("answers gone for a reaped pid", async () => {
    const { child, pid, start } = await sleeper();
    child.kill("SIGKILL");
    await exited(child);
    expect(await signaller().signal(pid, start, "SIGTERM")).toBe("gone");
  });

  it("answers mismatch and sends nothing when the start time differs", async () => {
    const { child, pid, start } = await sleeper();
    expect(await signaller().signal(pid, String(Number(start) + 1), "SIGKILL")).toBe("mismatch");
    // "sent nothing" by the order of events, not a pause: had a SIGKILL gone out, it would be
    // pending before this SIGTERM, and the child would die of it
    expect(alive(child)).toBe(true);
    child.kill("SIGTERM");
    await exited(child);
    expect(child.signalCode).toBe("SIGTERM");
  });
}
