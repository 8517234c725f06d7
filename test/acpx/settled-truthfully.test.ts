/**
 * Whoever ended the tree is the one the lease names, every time (issue 49
 * item 5). A gateway (in its own process) is SIGKILLed; its wrapper ends the
 * tree itself (lifeline EOF: TERM, grace, KILL) and says so in its end
 * record. Whether the reconcile that settles the lease (the dead gateway's
 * keeper, or the next gateway's startup reap, started at once) comes while
 * the wrapper's sweep runs (a stubborn adapter: the grace) or after it is
 * over (a quick one), the lease reads closed, ended-by-wrapper, and the
 * reconcile signalled nothing. Before the wrapper said so, the same runs
 * read lost/ended-on-its-own or closed/killed by timing.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  AGENT,
  DIST_ACPX,
  disposeAfterEach,
  leaseCarriers,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "./controller-helpers.js";
import { until } from "./durable-helpers.js";

const controllers = disposeAfterEach();
const FIXTURE = join(import.meta.dirname, "..", "fixtures", "acpx", "durable-gateway.mjs");
const GRACE = 1200;

function gateway(stateDir: string, keeper: "on" | "off", stubborn: boolean): ChildProcess & { events: string[] } {
  const command = [process.execPath, AGENT, ...(stubborn ? ["--ignore-sigterm", "--grandchild=setsid"] : [])];
  const cfg = {
    distAcpx: DIST_ACPX,
    stateDir,
    graceMs: GRACE,
    windowMs: 0,
    keeper,
    sessionKey: "k",
    command,
    prompt: "/count 1",
  };
  const c = trackChild(
    spawn(process.execPath, [FIXTURE], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, GW_CONFIG: JSON.stringify(cfg) },
    }),
  ) as ChildProcess & { events: string[] };
  c.events = [];
  let buf = "";
  c.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
      c.events.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
  });
  return c;
}

describe("a gateway's death: the lease names the wrapper that ended its tree, every time", () => {
  for (const keeper of ["on", "off"] as const)
    for (const stubborn of [true, false])
      it(`${keeper === "on" ? "the dead gateway's keeper" : "the next gateway's startup reap, at once"} settles it, ${stubborn ? "during the wrapper's sweep (a stubborn adapter)" : "after it (a quick adapter)"}: closed, ended-by-wrapper`, async () => {
        const stateDir = tempStateDir("truthful");
        const g = gateway(stateDir, keeper, stubborn);
        await until(() => g.events.some((e) => e.includes('"handle"')), 20_000);
        const h = (JSON.parse(g.events.find((e) => e.includes('"handle"'))!) as { handle: AcpRuntimeHandle }).handle;
        trackLease(h.leaseId);
        if (stubborn) await until(() => leaseCarriers(h.leaseId).length >= 3);
        g.kill("SIGKILL");
        if (keeper === "on") {
          const file = join(stateDir, "acpx", "keeper-report.json");
          await until(() => existsSync(file), 30_000);
          const report = JSON.parse(readFileSync(file, "utf8")) as {
            entries: { leaseId: string; code: string; action: string }[];
          };
          expect(report.entries.find((e) => e.leaseId === h.leaseId)).toMatchObject({ code: "ended-by-wrapper" });
        } else {
          await new Promise<void>((r) =>
            g.exitCode !== null || g.signalCode !== null ? r() : g.once("exit", () => r()),
          );
          const b = await createAcpxLifecycleController({
            stateDir,
            graceMs: GRACE,
            maintenanceIntervalMs: 0,
            keeper: "off",
          });
          controllers.push(b);
          const entry = (await b.reapStartupOrphans()).entries.find((e) => e.leaseId === h.leaseId)!;
          expect(entry).toMatchObject({
            stateAfter: "closed",
            code: "ended-by-wrapper",
            settledAs: "ended-by-wrapper",
          });
          // the reconcile itself signalled nothing: the wrapper did it all
          expect(entry.kill).toBeUndefined();
        }
        const lease = await (await openLeaseStore(stateDir, { readOnly: true })).get(h.leaseId);
        expect(lease).toMatchObject({ state: "closed", settledAs: "ended-by-wrapper" });
        expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0, 10_000)).not.toBe(-1);
        // the wrapper's record has done its work
        expect(existsSync(join(stateDir, "acpx", "ends", `${h.leaseId}.json`))).toBe(false);
      }, 60_000);
});
