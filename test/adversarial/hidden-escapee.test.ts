/**
 * A gateway running as uid 65534 (no containment: not root, nothing
 * delegated). A hostile agent leaves an escapee that made itself
 * non-dumpable (its environment unreadable to its own uid, for as long as it
 * lives) outside its tree, then kills its own wrapper. An innocent session
 * started before it. Neither lease may stay closing for that escapee: no
 * retry could ever judge it. Each close settles at once and names it; it is
 * never signalled (nothing proves it is ours), so it runs on: without
 * containment nothing can attribute it (docs/containment.md). Build first
 * (`npm run build`): the gateway runs from dist/.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, describe, expect, it } from "vitest";
import { agentArgv, alive, leaseCarriers, ROOT, waitFor } from "../acpx/controller-helpers.js";

const FIXTURES = join(ROOT, "test", "fixtures", "adversarial");

/** Why this cannot run here, or null: it needs root (to start a gateway as 65534), a C compiler and a checkout 65534 can read. */
const NOBODY_WHY = ((): string | null => {
  if (process.platform !== "linux") return `Linux only (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "not root: no gateway can be started as another uid";
  const r = spawnSync(
    process.execPath,
    ["-e", `import(${JSON.stringify(join(ROOT, "dist", "acpx", "index.js"))}).then(() => process.exit(0))`],
    { uid: 65534, gid: 65534, timeout: 20_000 },
  );
  if (r.status !== 0) return `uid 65534 cannot load this checkout's dist/ (${r.error?.message ?? `exit ${r.status}`})`;
  if (spawnSync("cc", ["--version"]).status !== 0) return "no C compiler (cc) for the non-dumpable escapee";
  return null;
})();
if (NOBODY_WHY) console.log(`[hidden-escapee.test] skipped: ${NOBODY_WHY}`);

const dirs: string[] = [];
const strays: number[] = [];
const gateways: ChildProcess[] = [];
afterAll(() => {
  for (const g of gateways) if (g.exitCode === null && g.signalCode === null) g.kill("SIGKILL");
  for (const pid of strays) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A gateway as uid 65534 and the line-per-command conversation with it (test/fixtures/adversarial/command-gateway.mjs). */
function nobodyGateway(stateDir: string): { ask: (cmd: object) => Promise<Record<string, unknown>> } {
  const gw = spawn(process.execPath, [join(FIXTURES, "command-gateway.mjs"), join(ROOT, "dist"), stateDir], {
    uid: 65534,
    gid: 65534,
    stdio: ["pipe", "pipe", "inherit"],
  });
  gateways.push(gw);
  const answers: Record<string, unknown>[] = [];
  const waiting: ((v: Record<string, unknown>) => void)[] = [];
  createInterface({ input: gw.stdout! }).on("line", (l) => {
    const v = JSON.parse(l) as Record<string, unknown>;
    const w = waiting.shift();
    if (w) w(v);
    else answers.push(v);
  });
  const next = () =>
    new Promise<Record<string, unknown>>((r) => {
      const v = answers.shift();
      if (v) r(v);
      else waiting.push(r);
    });
  let first: Promise<Record<string, unknown>> | null = next();
  return {
    ask: async (cmd) => {
      if (first) {
        const ready = await first;
        first = null;
        expect(ready).toMatchObject({ ready: true, uid: 65534, containment: false });
      }
      gw.stdin!.write(`${JSON.stringify(cmd)}\n`);
      return next();
    },
  };
}

interface Report {
  outcome: string;
  settledAs?: string;
  detail: string;
  evidence: { check: string; code: string; detail?: string }[];
}

describe.skipIf(NOBODY_WHY !== null)(
  `an escapee that hides its environment (uid 65534)${NOBODY_WHY ? ` [skipped: ${NOBODY_WHY}]` : ""}`,
  () => {
    it("holds no lease closing: the hostile lease settles lost/left-unjudged, the innocent one closed/killed, both naming it", async () => {
      const top = mkdtempSync(join(tmpdir(), "proclease-hidden-"));
      dirs.push(top);
      chmodSync(top, 0o755);
      const helper = join(top, "hidden-escapee");
      const cc = spawnSync("cc", ["-O2", "-o", helper, join(FIXTURES, "hidden-escapee.c")], { encoding: "utf8" });
      expect(cc.status, cc.stderr).toBe(0);
      chmodSync(helper, 0o755);
      const stateDir = join(top, "state");
      const work = join(top, "work");
      for (const d of [stateDir, work]) {
        mkdirSync(d, { mode: 0o700 });
        chownSync(d, 65534, 65534);
      }
      const gw = nobodyGateway(stateDir);

      const first = await gw.ask({ op: "ensure", key: "innocent", command: agentArgv({}) });
      const innocent = first.handle as { rootPid: number } | undefined;
      expect(first).toHaveProperty("handle.rootPid");
      if (innocent === undefined) return;
      const script = [
        "W=$PPID; A=$$",
        `${helper} ${work}/hidden.pid`,
        `(while [ ! -e ${work}/go ]; do sleep 0.05; done; kill -9 $W $A) </dev/null >/dev/null 2>&1 &`,
        'exec "$0" "$@"',
      ].join("\n");
      const answer = await gw.ask({
        op: "ensure",
        key: "hostile",
        command: ["/bin/sh", "-c", script, ...agentArgv({})],
      });
      const hostile = answer.handle as { rootPid: number } | undefined;
      expect(answer.error ?? "").toBe("");
      expect(answer).toHaveProperty("handle.rootPid");
      if (hostile === undefined) return;
      expect(await waitFor(() => /^\d+\n$/.test(readOr(`${work}/hidden.pid`)), 10_000)).not.toBe(-1);
      const hidden = Number(readOr(`${work}/hidden.pid`));
      strays.push(hidden);
      // it is the uid's own process, and the kernel gave its /proc files to root: non-dumpable
      expect(statSync(`/proc/${hidden}`).uid).toBe(65534);
      expect(statSync(`/proc/${hidden}/stat`).uid).toBe(0);
      const hostileLease = (answer.handle as { leaseId: string }).leaseId;
      writeFileSync(`${work}/go`, "");
      // everything of the lease but the hidden one gone before the close (the adapter, the killer subshell and its
      // sleep): a close that still finds one, provably the lease's, kills it and then reads closed/killed
      expect(
        await waitFor(() => !alive(hostile.rootPid) && leaseCarriers(hostileLease).every((p) => p === hidden), 10_000),
      ).not.toBe(-1);

      const h = (await gw.ask({ op: "close", key: "hostile" })).report as Report;
      expect(h, h.detail).toMatchObject({ outcome: "lost", settledAs: "left-unjudged" });
      expect(h.detail).toContain(`${hidden} (`);
      const i = (await gw.ask({ op: "close", key: "innocent" })).report as Report;
      expect(i, i.detail).toMatchObject({ outcome: "closed", settledAs: "killed" });
      expect(i.detail).toContain(`${hidden} (`);
      expect(await waitFor(() => !alive(innocent.rootPid), 5000)).not.toBe(-1);
      expect(await gw.ask({ op: "shutdown" })).toMatchObject({ shutdown: true });
      // never signalled: nothing proves it is ours
      expect(alive(hidden)).toBe(true);
    });
  },
);

function readOr(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}
