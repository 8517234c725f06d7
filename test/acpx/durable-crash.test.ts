/**
 * Durable sessions across a gateway's end, with the gateway in a process of
 * its own (test/fixtures/acpx/durable-gateway.mjs) so it can really die:
 * SIGKILL, SIGKILL to its whole process group, SIGTERM, and detach(). In
 * each case the gateway is mid-turn (the fixture agent streaming numbered
 * chunks); a new controller on the same state dir then re-adopts the same
 * adapter process, and the turn's chunks reach it exactly once, in order.
 * With the window run out, the tree is ended as without durability and the
 * next reconcile settles the lease.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import {
  AGENT,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  tempStateDir,
  trackLease,
  waitFor,
} from "./controller-helpers.js";
import { nativeWrapperPath, startFixtureGateway, until, type FixtureGateway } from "./durable-helpers.js";
import { exited } from "../fixtures/facts/procs.js";
import { existsSync } from "node:fs";

const controllers = disposeAfterEach();
const have = nativeWrapperPath() !== null && existsSync(nativeWrapperPath()!);
const d = have ? describe : describe.skip;
if (!have) console.log("durable crash tests skipped: no native wrapper (Linux with the addon built)");

const KEY = "agent:main:acp:durable";
const N = 200;
const COMMAND = [process.execPath, AGENT, "--stream-batch", "4", "--stream-gap-ms", "50"];
const numbered = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1} `);

function startGateway(
  stateDir: string,
  opts: { windowMs: number; keeper: "on" | "off"; ownGroup: boolean; detachAfter?: number },
): FixtureGateway {
  const cfg = {
    stateDir,
    windowMs: opts.windowMs,
    keeper: opts.keeper,
    sessionKey: KEY,
    command: COMMAND,
    prompt: `/count ${N}`,
    ...(opts.detachAfter !== undefined ? { detachAfter: opts.detachAfter } : {}),
  };
  return startFixtureGateway(cfg, opts.ownGroup);
}

const chunksSeen = (g: FixtureGateway) => g.events.filter((e) => e.type === "chunk").length;

type End = "SIGKILL" | "SIGKILL to its process group" | "SIGTERM" | "detach()";

d("durable sessions: a new gateway re-adopts what a gone one left mid-turn", () => {
  const ends: End[] = ["SIGKILL", "SIGKILL to its process group", "SIGTERM", "detach()"];
  for (const end of ends) {
    it(`${end}: the same adapter process answers the new controller, and the turn's ${N} numbered chunks arrive once each, in order`, async () => {
      const stateDir = tempStateDir("durable-crash");
      const viaKeeper = end !== "detach()";
      const g = startGateway(stateDir, {
        windowMs: 60_000,
        keeper: viaKeeper ? "on" : "off",
        ownGroup: end === "SIGKILL to its process group",
        ...(end === "detach()" ? { detachAfter: 5 } : {}),
      });
      await until(() => g.events.some((e) => e.type === "handle"), 20_000);
      const h = g.events.find((e) => e.type === "handle")!.handle!;
      trackLease(h.leaseId);
      await until(() => chunksSeen(g) >= 5, 20_000);
      if (end === "SIGKILL") g.child.kill("SIGKILL");
      if (end === "SIGTERM") g.child.kill("SIGTERM");
      if (end === "SIGKILL to its process group") process.kill(-g.child.pid!, "SIGKILL");
      await exited(g.child);
      expect(alive(h.rootPid)).toBe(true);

      if (viaKeeper) {
        // the dead gateway's keeper reaps first: it spares the waiting session, and its report says so
        const file = join(stateDir, "acpx", "keeper-report.json");
        await until(() => existsSync(file), 20_000);
        const report = JSON.parse(readFileSync(file, "utf8")) as { entries: { leaseId: string; action: string }[] };
        expect(report.entries.find((e) => e.leaseId === h.leaseId)?.action).toBe("awaiting-readoption");
      }
      const b = await createAcpxLifecycleController({
        stateDir,
        graceMs: GRACE_MS,
        maintenanceIntervalMs: 0,
        keeper: "off",
        durable: { reattachWithinMs: 60_000 },
      });
      controllers.push(b);
      const reap = await b.reapStartupOrphans();
      expect(reap.entries.find((e) => e.leaseId === h.leaseId)).toMatchObject({
        action: "awaiting-readoption",
        stateAfter: "open",
      });

      const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
      expect(h2).toMatchObject({
        adopted: true,
        leaseId: h.leaseId,
        rootPid: h.rootPid,
        processGroupId: h.processGroupId,
      });
      expect(h2.turn).toBeDefined();
      const texts: string[] = [];
      for await (const u of h2.turn!.events)
        if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") texts.push(u.content.text);
      expect(texts).toEqual(numbered(N));
      expect(h2.turn!.replayed).toBeGreaterThanOrEqual(5);
      console.log(`[${end}] ${h2.turn!.replayed} of the turn's updates were replayed, the rest came live`);
      expect(h2.turn!.gap).toBe(false);
      expect((await h2.turn!.result).stopReason).toBe("end_turn");

      // the session stays usable: a turn of the new controller, its chunks once
      const next = b.startTurn(h2, "/count 3");
      const more: string[] = [];
      for await (const u of next.events)
        if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") more.push(u.content.text);
      expect(more).toEqual(numbered(3));
      expect((await next.result).stopReason).toBe("end_turn");
      expect((await b.closeSession({ handle: h2 })).leaseState).toBe("closed");
      expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0, 10_000)).not.toBe(-1);
    }, 90_000);
  }

  it("a window that runs out: the tree ends as a non-durable one would, and the next reconcile settles its lease", async () => {
    const stateDir = tempStateDir("durable-expire");
    const g = startGateway(stateDir, { windowMs: 1500, keeper: "off", ownGroup: false });
    await until(() => g.events.some((e) => e.type === "handle"), 20_000);
    const h = g.events.find((e) => e.type === "handle")!.handle!;
    trackLease(h.leaseId);
    await until(() => chunksSeen(g) >= 1, 20_000);
    g.child.kill("SIGKILL");
    const t0 = Date.now();
    await exited(g.child);
    await new Promise((r) => setTimeout(r, 500));
    expect(alive(h.rootPid)).toBe(true);
    expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0, 20_000)).not.toBe(-1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
    const b = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      keeper: "off",
      durable: { reattachWithinMs: 1500 },
    });
    controllers.push(b);
    const reap = await b.reapStartupOrphans();
    const entry = reap.entries.find((e) => e.leaseId === h.leaseId)!;
    // the wrapper ended it, and the settlement says so (its end record: the window ran out)
    expect(entry).toMatchObject({ stateAfter: "closed", settledAs: "ended-by-wrapper" });
    expect(entry.why).toMatch(/durable window ran out/);
    expect((await (await openLeaseStore(stateDir)).get(h.leaseId))?.state).toBe("closed");
    // the key starts a new session: nothing waits to be re-adopted
    const h2 = await b.ensureSession({ sessionKey: KEY, agentId: "main", command: COMMAND });
    expect(h2.adopted).toBeUndefined();
    expect(h2.rootPid).not.toBe(h.rootPid);
    trackLease(h2.leaseId);
  }, 60_000);
});
