/**
 * The controller's share of its state dir's keeper (ownership/keeper.ts):
 * taken before the first lease is written (ensureSession, spawnRawAdapter),
 * given back by dispose()/shutdown() before the state-dir lock goes, so a
 * keeper never acts on a gateway that is only letting go.
 */
import { acquireKeeper, keeperWanted, type KeeperLease, type KeeperOption } from "../../ownership/keeper.js";
import type { ControllerLogger } from "../logger.js";

export interface ControllerKeeper {
  /** Starts (or joins) the keeper; idempotent. Never throws: without one, a crash leaves the leases to the next startup reap. */
  keep(): void;
  release(): Promise<void>;
}

export function controllerKeeper(
  option: KeeperOption | undefined,
  d: { stateDir: string; gatewayInstanceId: string; graceMs: number; nodePath: string; conversation: { log: ControllerLogger } },
): ControllerKeeper {
  let lease: KeeperLease | undefined;
  let failed = false;
  return {
    keep() {
      if (lease !== undefined || failed || !keeperWanted(option)) return;
      try {
        lease = acquireKeeper({ stateDir: d.stateDir, gatewayInstanceId: d.gatewayInstanceId, graceMs: d.graceMs, nodePath: d.nodePath });
      } catch (err) {
        failed = true;
        d.conversation.log.warn?.("proclease: no keeper for this gateway; its runs outlive a crash until the next startup reap", { error: String(err) });
      }
    },
    async release() {
      const l = lease;
      lease = undefined;
      await l?.release();
    },
  };
}
