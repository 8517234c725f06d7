/**
 * The durable wrapper is not dumpable (docs/wrapper.md "Who may re-attach"):
 * a process of the gateway's uid cannot ptrace it, nor read its memory or
 * environment, so it cannot take a waiting session's socket over from the
 * inside. The gateway's own reads still prove the wrapper: run as uid 65534
 * (no privilege over a non-dumpable process), a gateway verifies the waiting
 * session's tree by its start time, argv and group, and re-adopts it. A plain
 * (non-durable) wrapper stays dumpable: nothing changes without `durable`.
 * Real processes; build first (`npm run build`).
 */
import { spawn, spawnSync } from "node:child_process";
import { chownSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { agentArgv, alive, ROOT, tempStateDir, trackChild, trackLease, trackPid } from "./controller-helpers.js";
import { nativeWrapperPath } from "./durable-helpers.js";

const NOBODY = 65534;

/** why these tests cannot run here, or null */
function cannotRun(): string | null {
  if (process.platform !== "linux") return `not Linux (${process.platform})`;
  if (nativeWrapperPath() === null) return "no native wrapper (the addon is not built)";
  if (process.getuid?.() !== 0) return "not root: no other uid to run the gateway as";
  const probe = spawnSync(
    process.execPath,
    ["-e", `require("node:fs").accessSync(${JSON.stringify(join(ROOT, "dist/index.js"))})`],
    { uid: NOBODY, gid: NOBODY, cwd: "/", timeout: 15_000 },
  );
  return probe.status === 0 ? null : `uid ${NOBODY} cannot read this checkout's dist/ (a 0700 folder)`;
}
const CANNOT = cannotRun();
if (CANNOT !== null) console.log(`[durable-nondumpable] skipped: ${CANNOT}`);

/** Whether a process of uid 65534 can read `/proc/<pid>/environ` (ptrace's read access, which ptrace attach needs and more). */
function nobodyReadsEnviron(pid: number): boolean {
  const r = spawnSync("cat", [`/proc/${pid}/environ`], { uid: NOBODY, gid: NOBODY, cwd: "/", stdio: "ignore" });
  return r.status === 0;
}

/** The uid the kernel shows as the owner of /proc/<pid>/environ: root for a non-dumpable process, whatever its own uid. */
const procOwner = (pid: number): number => statSync(`/proc/${pid}/environ`).uid;

/** Runs `code` (an ES module body with `ctlOf(durable)` and `say(v)` in scope) as uid 65534; resolves with its one line of output. */
async function asNobody(stateDir: string, code: string): Promise<Record<string, unknown>> {
  const dist = JSON.stringify(pathToFileURL(join(ROOT, "dist/index.js")).href);
  const prelude = `
    const { createAcpxLifecycleController } = await import(${dist});
    const ctlOf = (durable) => createAcpxLifecycleController({
      stateDir: ${JSON.stringify(stateDir)}, graceMs: 300, maintenanceIntervalMs: 0,
      ...(durable ? { durable: { reattachWithinMs: 60000 } } : {}),
    });
    const say = (v) => process.stdout.write(JSON.stringify(v) + "\\n");
  `;
  const gw = trackChild(
    spawn(process.execPath, ["--input-type=module", "-e", prelude + code], {
      uid: NOBODY,
      gid: NOBODY,
      cwd: "/",
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  const exited = new Promise<number | null>((r) => gw.on("exit", (c) => r(c)));
  let line = "";
  for await (const l of createInterface({ input: gw.stdout! })) {
    line = l;
    break;
  }
  expect(await exited).toBe(0);
  return JSON.parse(line) as Record<string, unknown>;
}

describe.skipIf(CANNOT !== null)(
  `the durable wrapper is not dumpable${CANNOT === null ? "" : ` (skipped: ${CANNOT})`}`,
  () => {
    it(`run as uid ${NOBODY}: another process of that uid cannot read a waiting session's wrapper, and the next gateway still verifies and re-adopts it`, async () => {
      const stateDir = tempStateDir("durable-dumpable");
      chownSync(stateDir, NOBODY, NOBODY);
      const command = agentArgv({});
      const first = await asNobody(
        stateDir,
        `
      const ctl = await ctlOf(true);
      const h = await ctl.ensureSession({ sessionKey: "k", agentId: "main", command: ${JSON.stringify(command)} });
      const turn = await ctl.prompt(h, "hello");
      await ctl.detach();
      say({ rootPid: h.rootPid, leaseId: h.leaseId, turn });
      `,
      );
      trackLease(first.leaseId as string);
      const rootPid = first.rootPid as number;
      trackPid(rootPid);
      expect(first.turn).toEqual({ stopReason: "end_turn" });
      expect(alive(rootPid), "the waiting session's wrapper").toBe(true);
      // non-dumpable: its /proc is root's, though it runs as 65534, and that uid cannot read it
      expect(procOwner(rootPid)).toBe(0);
      expect(nobodyReadsEnviron(rootPid)).toBe(false);

      const second = await asNobody(
        stateDir,
        `
      const ctl = await ctlOf(true);
      const h = await ctl.ensureSession({ sessionKey: "k", agentId: "main", command: ${JSON.stringify(command)} });
      const turn = await ctl.prompt(h, "again");
      const close = await ctl.closeSession({ handle: h });
      await ctl.dispose();
      say({ adopted: h.adopted === true, rootPid: h.rootPid, turn, outcome: close.outcome });
      `,
      );
      expect(second).toEqual({ adopted: true, rootPid, turn: { stopReason: "end_turn" }, outcome: "closed" });
      expect(alive(rootPid)).toBe(false);
    });

    it(`run as uid ${NOBODY} without durable: the plain wrapper stays dumpable (its /proc is that uid's)`, async () => {
      const stateDir = tempStateDir("plain-dumpable");
      chownSync(stateDir, NOBODY, NOBODY);
      const out = await asNobody(
        stateDir,
        `
      const { readFileSync, statSync } = await import("node:fs");
      const ctl = await ctlOf(false);
      const h = await ctl.ensureSession({ sessionKey: "plain", agentId: "main", command: ${JSON.stringify(agentArgv({}))} });
      const owner = statSync("/proc/" + h.rootPid + "/environ").uid;
      const readable = readFileSync("/proc/" + h.rootPid + "/environ", "latin1").includes("OPENCLAW_ACPX_LEASE_ID=" + h.leaseId);
      const close = await ctl.closeSession({ handle: h });
      await ctl.dispose();
      say({ owner, readable, outcome: close.outcome, leaseId: h.leaseId });
      `,
      );
      trackLease(out.leaseId as string);
      expect(out).toMatchObject({ owner: NOBODY, readable: true, outcome: "closed" });
    });
  },
);
