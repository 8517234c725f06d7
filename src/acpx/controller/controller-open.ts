/**
 * Opening a controller: its options checked (each named when it is wrong),
 * then one gateway per state dir (the state dir's lock, taken before
 * anything is read or written), and what it serves from there: its
 * instance id, the lease and session stores, the installed wrapper, and
 * containment as detected (and recorded for the CLI).
 */
import { pinMmapThreshold } from "../../facts/malloc-threshold.js";
import { resolve } from "node:path";
import { detectContainment, type ContainmentSupport } from "../../containment/index.js";
import { getProcessFacts } from "../../facts/get.js";
import { createSignaller } from "../../facts/signal.js";
import { nonNegativeOption, positiveOption } from "../../facts/validate.js";
import { recordContainmentRoot } from "../../ownership/host/containment-record.js";
import {
  acquireStateDirLock,
  DEFAULT_GRACE_MS,
  DEFAULT_RETENTION_MS,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  StateDirLockedError,
  type StateDirLock,
} from "../../ownership/index.js";
import { assertConversationOptions, conversationConfig } from "../sessions/conversation-options.js";
import { installWrapper } from "../launch/install-wrapper.js";
import { ensurePrivateDir } from "../../ownership/leases/fs-safe.js";
import { endRecordsDir } from "../../ownership/leases/end-records.js";
import { openDurable } from "../durable/options.js";
import { openDurableTerminals } from "../durable/terminals.js";
import { resolveDurable } from "../durable/protocol.js";
import type { ControllerDeps } from "../sessions/live-sessions.js";
import { assertContainmentOption, configureLimitControllers, detectOptionsFor } from "../sessions/session-limits.js";
import { openSessionStore } from "../sessions/session-store.js";
import type { AcpxLifecycleControllerOptions } from "../sessions/types.js";
import { assertGraceMs } from "../wrapper/protocol.js";

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;
const DEFAULT_START_TIMEOUT_MS = 10_000;
const DEFAULT_MAINTENANCE_MS = 60_000;

export interface OpenedController {
  deps: ControllerDeps;
  /** the state dir's lock, held until the controller is disposed */
  lock: StateDirLock;
  /** 0: no maintenance timer */
  maintenanceIntervalMs: number;
}

/** A controller's deps from its options: checked, the state dir locked and opened; the lock is released if opening fails. */
export async function openControllerDeps(opts: AcpxLifecycleControllerOptions): Promise<OpenedController> {
  if (typeof opts !== "object" || opts === null) throw new TypeError("opts must be an object");
  if (typeof opts.stateDir !== "string" || opts.stateDir.length === 0) {
    throw new TypeError("opts.stateDir must be a non-empty string");
  }
  const { graceMs, retentionMs, handshakeTimeoutMs, startTimeoutMs, maintenanceIntervalMs } = timesOf(opts);
  assertContainmentOption(opts.containment, "opts.containment");
  assertConversationOptions(opts);
  // checked before the lock, as every option: a bad value never takes the state dir
  resolveDurable(opts.durable);

  const startupReconcile = startupReconcileOf(opts);
  const stateDir = resolve(opts.stateDir);
  const facts = opts.facts ?? getProcessFacts();
  const signaller = opts.signaller ?? createSignaller(facts);
  // one gateway per state dir, before anything is read or written (state-lock.ts)
  const lock = await acquireStateDirLock(stateDir, facts).catch((e: unknown) => {
    throw heldHere(e, stateDir);
  });
  let deps: ControllerDeps;
  try {
    const gatewayInstanceId = await loadOrCreateGatewayInstanceId(stateDir);
    const leases = await openLeaseStore(stateDir);
    // where wrappers say they ended their trees with nobody asking (end-records.ts)
    await ensurePrivateDir(endRecordsDir(leases.dir));
    const sessions = await openSessionStore(stateDir);
    const wrapper = await installWrapper(stateDir);
    const durable = await openDurable(opts.durable, stateDir, wrapper);
    const containment: ContainmentSupport =
      opts.containment === "off"
        ? { available: false, code: "refused", why: 'turned off (containment: "off")' }
        : // controllers (and a gateway move) only when asked for: session-limits.ts
          await detectContainment(detectOptionsFor(opts.containment));
    // the CLI finds this state dir's lease cgroups (and orphans among them) from this record
    if (containment.available) await recordContainmentRoot(stateDir, containment.root, gatewayInstanceId);
    deps = {
      containment,
      stateDir,
      facts,
      signaller,
      gatewayInstanceId,
      leases,
      sessions,
      wrapper,
      graceMs,
      retentionMs,
      handshakeTimeoutMs,
      startTimeoutMs,
      startupReconcile,
      nodePath: opts.nodePath ?? process.execPath,
      onEnsureTiming: opts.onEnsureTiming,
      conversation: {
        ...conversationConfig(opts, { stateDir, gatewayInstanceId, facts, signaller, graceMs }),
        // a durable session's terminals wait with it (durable/terminals.ts); without the holder they end with the gateway
        ...(durable !== undefined && opts.clientCapabilities?.terminal
          ? { durableTerminals: (await openDurableTerminals(stateDir, durable.reattachWithinMs, graceMs)) ?? undefined }
          : {}),
      },
      durable,
    };
  } catch (e) {
    await lock.release();
    throw e;
  }
  configureLimitControllers(deps, opts.containment);
  // large blocks an agent's data made are given back when freed (facts/malloc-threshold.ts)
  pinMmapThreshold();
  return { deps, lock, maintenanceIntervalMs };
}

/** The controller's times, validated (a TypeError naming the option), with their defaults. */
function timesOf(opts: AcpxLifecycleControllerOptions) {
  const graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
  assertGraceMs(graceMs, "opts.graceMs");
  return {
    graceMs,
    retentionMs: nonNegativeOption(opts.retentionMs, DEFAULT_RETENTION_MS, "opts.retentionMs"),
    handshakeTimeoutMs: positiveOption(
      opts.handshakeTimeoutMs,
      DEFAULT_HANDSHAKE_TIMEOUT_MS,
      "opts.handshakeTimeoutMs",
    ),
    startTimeoutMs: positiveOption(opts.startTimeoutMs, DEFAULT_START_TIMEOUT_MS, "opts.startTimeoutMs"),
    maintenanceIntervalMs: nonNegativeOption(
      opts.maintenanceIntervalMs,
      DEFAULT_MAINTENANCE_MS,
      "opts.maintenanceIntervalMs",
    ),
  };
}

/** Where the startup reap runs (the option's doc): never on a worker with the caller's facts or signaller (they cannot cross to it). */
function startupReconcileOf(opts: AcpxLifecycleControllerOptions): "auto" | "worker" | "calling-thread" {
  const v = opts.startupReconcile;
  if (v !== undefined && v !== "auto" && v !== "worker" && v !== "calling-thread")
    throw new TypeError('opts.startupReconcile must be "auto", "worker" or "calling-thread"');
  const own = opts.facts !== undefined || opts.signaller !== undefined;
  if (v === "worker" && own)
    throw new TypeError(
      'opts.startupReconcile "worker" needs the default facts and signaller: a caller\'s objects cannot cross to a worker thread',
    );
  return own ? "calling-thread" : (v ?? "auto");
}

/**
 * The lock's holder is this very process: another controller of this gateway
 * opened the state dir and was not disposed. "In use by another gateway"
 * would send the reader looking for a process that does not exist.
 */
function heldHere(e: unknown, stateDir: string): unknown {
  if (!(e instanceof StateDirLockedError) || e.holderPid !== process.pid) return e;
  e.message =
    `state dir ${stateDir} is held by this same process (pid ${process.pid}): another controller in this process ` +
    "opened it and has not been disposed. Call dispose() or shutdown() on that one first, or give this one its own state dir";
  return e;
}
