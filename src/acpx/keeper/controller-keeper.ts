/**
 * The controller's share of its state dir's keeper (ownership/keeper/keeper.ts):
 * taken once the first session is up (ensureSession, spawnRawAdapter: a
 * refused or failed ensure starts nothing; a gateway that dies during its
 * first ensure leaves that lease to the next startup reap, and the wrapper
 * ends its tree), given back by dispose()/shutdown() before the state-dir
 * lock goes, so a keeper never acts on a gateway that is only letting go.
 * After that, keep() does nothing: an ensure that raced the dispose must not
 * start a keeper nobody stops.
 */
import { acquireKeeper, keeperWanted, type KeeperLease, type KeeperOption } from "../../ownership/keeper/keeper.js";
import type { ControllerLogger } from "../report/logger.js";

export interface ControllerKeeper {
  /** Starts (or joins) the keeper; idempotent. Never throws: without one, a crash leaves the leases to the next startup reap. */
  keep(): void;
  release(): Promise<void>;
}

export function controllerKeeper(
  option: KeeperOption | undefined,
  d: {
    stateDir: string;
    gatewayInstanceId: string;
    graceMs: number;
    nodePath: string;
    conversation: { log: ControllerLogger };
  },
): ControllerKeeper {
  let lease: KeeperLease | undefined;
  let failed = false;
  let released = false;
  return {
    keep() {
      if (lease !== undefined || failed || released || !keeperWanted(option)) return;
      try {
        lease = acquireKeeper({
          stateDir: d.stateDir,
          gatewayInstanceId: d.gatewayInstanceId,
          graceMs: d.graceMs,
          nodePath: d.nodePath,
          // a keeper that dies while the gateway lives is restarted: said through the controller's logger when it has one
          ...(d.conversation.log.warn !== undefined ? { warn: d.conversation.log.warn } : {}),
        });
      } catch (err) {
        failed = true;
        d.conversation.log.warn?.(
          "proclease: no keeper for this gateway; its runs outlive a crash until the next startup reap",
          { error: String(err) },
        );
      }
    },
    async release() {
      released = true;
      const l = lease;
      lease = undefined;
      await l?.release();
    },
  };
}
