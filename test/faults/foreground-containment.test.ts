/**
 * Every supervisor run gets a cgroup where containment is available, leased
 * or not: a foreground run's env-scrubbed `setsid` grandchild (no marker, no
 * parent link, its own session) ends with the run's cancel, and with its
 * deadline; the run's cgroup and its folder are removed afterwards.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  alive,
  argvCarriers,
  cgroupFolders,
  killGateways,
  removeTempDirs,
  startGateway,
  tempDir,
  waitFor,
} from "./harness.js";
import { detectContainment } from "../../src/containment/index.js";

const support = await detectContainment();
const skip = support.available ? null : `containment is not available here: ${support.why}`;
if (skip) console.log(`[faults] foreground containment skipped: ${skip}`);

const markers: string[] = [];
afterEach(() => {
  killGateways();
  for (const m of markers.splice(0)) for (const pid of argvCarriers(m)) process.kill(pid, "SIGKILL");
});
afterAll(removeTempDirs);

// sleep takes only numbers: the fraction is the marker the escapee carries in its argv (it has no environment)
const escaping = (marker: string) =>
  `( trap '' TERM; env -i setsid sleep ${marker} & echo "grandchild $!" ); exec sleep 1000`;
const cgroupOf = (pid: number) =>
  readFileSync(`/proc/${pid}/cgroup`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"))
    ?.slice(3) ?? "";

describe.skipIf(skip !== null)(`foreground supervisor runs are contained${skip ? ` — skipped: ${skip}` : ""}`, () => {
  for (const how of ["cancel", "timeout"] as const) {
    for (const leased of [false, true]) {
      it(`a ${leased ? "background (leased)" : "foreground (no stateDir)"} run's env-scrubbed setsid escapee ends with its ${how}`, async () => {
        const marker = `1000.${process.pid}${Date.now() % 1_000_000}${leased ? 1 : 0}${how === "cancel" ? 1 : 2}`;
        markers.push(marker);
        const gw = await startGateway();
        await gw.call("supervisor", leased ? { stateDir: tempDir("fg") } : {});
        await gw.call("spawn", {
          runId: "fg",
          argv: ["/bin/sh", "-c", escaping(marker)],
          background: leased,
          ...(how === "timeout" ? { timeoutMs: 6000 } : {}),
        });
        await waitFor(() => argvCarriers(marker).length === 1, 10_000);
        const [escapee] = argvCarriers(marker);
        const cg = cgroupOf(escapee!);
        expect(cg).toMatch(/\/proclease\//);
        const runCgroup = cgroupFolders().find((f) => f.endsWith(cg))!;
        expect(runCgroup, `${cg} is not under the proclease root`).toBeDefined();
        if (how === "cancel") expect(await gw.call("cancel", { runId: "fg" })).toBe(true);
        const exit = await gw.call<{ reason: string }>("wait", { runId: "fg" }, 30_000);
        expect(exit.reason).toBe(how === "cancel" ? "manual-cancel" : "overall-timeout");
        await waitFor(() => !alive(escapee!), 10_000);
        await gw.call("shutdown");
        expect(await gw.lives()).toBe(true);
        // the run's cgroup and its folder (this gateway's, or its instance's) are gone with it
        await waitFor(() => !existsSync(runCgroup) && !existsSync(dirname(runCgroup)), 5_000).catch(() => undefined);
        expect(existsSync(runCgroup), `${runCgroup} left behind`).toBe(false);
        expect(existsSync(dirname(runCgroup)), `${dirname(runCgroup)} left behind`).toBe(false);
      }, 60_000);
    }
  }
});
