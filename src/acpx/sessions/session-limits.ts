/**
 * ensureSession's `limits` (docs/containment.md): memory.max and pids.max
 * written into the lease's own cgroup after it is made and before the
 * wrapper is spawned, so nothing that asked to be limited is ever born
 * unlimited. The writes themselves are src/containment's applyLimits; this
 * file holds the controller's policy around them:
 *
 * - Validation (assertSessionLimits, applied at the edge by
 *   ensure-input.ts): a positive safe integer or "max"; anything else (0,
 *   negative, NaN, fractions, other strings, unknown keys: a typo such as
 *   `memoryLimit` must not silently run unlimited) is a TypeError before
 *   any lease is written.
 * - "max" asks for no limit, which is a new cgroup's default and what an
 *   uncontained session has anyway: it is never written, never needs a
 *   controller and is never refused (a config default of "max" must not
 *   break sessions on hosts without the controllers).
 * - Enabling the controllers. Lease cgroups get a controller only when the
 *   gateway's cgroup hands it down, which cgroup v2 allows only while that
 *   cgroup holds no processes: the gateway may have to move itself into
 *   `proclease/_gateway` (detectContainment). Users who never ask for limits
 *   keep today's behaviour exactly: no controller is asked for and the
 *   gateway never moves. A user who asks gets them without a second
 *   setting: the first ensureSession whose limits need a controller enables
 *   it (one detection at a time; a failed attempt is not repeated for
 *   ENABLE_RETRY_MS, so a host that cannot do it, like a v1-bound memory
 *   controller, costs one probe per window, not one per session). An
 *   operator who wants to know at start, and no cgroup change while sessions
 *   are being spawned (a wrapper still in the gateway's cgroup during its
 *   start makes that cgroup "hold processes"), asks at create:
 *   `containment: { controllers: ["memory", "pids"] }`.
 * - A running session is returned by ensureSession only when it runs with
 *   every positive limit asked for; limits not asked for are not compared
 *   (a caller fetching its session without limits gets it as it runs).
 */
import {
  detectContainment,
  isLimitValue,
  type ContainmentSupport,
  type DetectOptions,
} from "../../containment/index.js";
import { AcpxEnsureError } from "../report/errors.js";
import type { ControllerDeps } from "./live-sessions.js";
import type { AcpRuntimeHandle, LimitController, SessionLimits } from "../connection/types.js";
import type { AcpxContainmentOptions } from "./types.js";

/** how long a failed enabling of a controller is not tried again */
export const ENABLE_RETRY_MS = 10_000;

const CONTROLLER_OF: Readonly<Record<keyof SessionLimits, LimitController>> = Object.freeze({
  memoryMax: "memory",
  pidsMax: "pids",
});
const LIMIT_CONTROLLERS: readonly LimitController[] = ["memory", "pids"];

/** The limits that constrain something: positive integers only ("max" and absent keys ask for nothing). */
export interface EnforcedLimits {
  memoryMax?: number;
  pidsMax?: number;
}

/** The rule for a `limits` value, wherever one is given (see the header). */
export function assertSessionLimits(v: unknown, name: string): asserts v is SessionLimits {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${name} must be an object { memoryMax?, pidsMax? }`);
  for (const [k, x] of Object.entries(v)) {
    if (!Object.hasOwn(CONTROLLER_OF, k)) throw new TypeError(`${name}.${k} is not a limit (memoryMax, pidsMax)`);
    if (x !== undefined && !isLimitValue(x)) {
      throw new TypeError(
        `${name}.${k} must be a positive integer or "max", got ${typeof x === "string" ? JSON.stringify(x) : String(x)}`,
      );
    }
  }
}

/** The positive limits of a checked `limits` value. */
export function enforcedLimits(l: SessionLimits | undefined): EnforcedLimits {
  const out: EnforcedLimits = {};
  if (typeof l?.memoryMax === "number") out.memoryMax = l.memoryMax;
  if (typeof l?.pidsMax === "number") out.pidsMax = l.pidsMax;
  return out;
}

export function controllersFor(e: EnforcedLimits): LimitController[] {
  return (Object.keys(e) as (keyof EnforcedLimits)[]).map((k) => CONTROLLER_OF[k]);
}

export function describeLimits(e: EnforcedLimits): string {
  return Object.entries(e)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(", ");
}

// ----------------------------------------------------------- the option at create

export function assertContainmentOption(v: unknown, name: string): void {
  if (v === undefined || v === "auto" || v === "off") return;
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${name} must be "auto", "off" or { controllers?, allowGatewayMove? }`);
  const o = v as { controllers?: unknown; allowGatewayMove?: unknown };
  for (const k of Object.keys(o))
    if (k !== "controllers" && k !== "allowGatewayMove")
      throw new TypeError(`${name}.${k} is not an option (controllers, allowGatewayMove)`);
  if (o.controllers !== undefined) {
    if (!Array.isArray(o.controllers))
      throw new TypeError(
        `${name}.controllers must be an array of ${LIMIT_CONTROLLERS.map((c) => JSON.stringify(c)).join(", ")}`,
      );
    o.controllers.forEach((c: unknown, i: number) => {
      if (!LIMIT_CONTROLLERS.includes(c as LimitController))
        throw new TypeError(
          `${name}.controllers[${i}] must be one of ${LIMIT_CONTROLLERS.map((x) => JSON.stringify(x)).join(", ")}, got ${JSON.stringify(c)}`,
        );
    });
  }
  if (o.allowGatewayMove !== undefined && typeof o.allowGatewayMove !== "boolean")
    throw new TypeError(`${name}.allowGatewayMove must be a boolean`);
}

/** detectContainment's options for the controller's `containment` option (nothing asked: today's detection). */
export function detectOptionsFor(v: "auto" | AcpxContainmentOptions | undefined): DetectOptions {
  if (v === undefined || v === "auto") return {};
  return {
    ...(v.controllers !== undefined && v.controllers.length > 0 ? { controllers: [...v.controllers] } : {}),
    ...(v.allowGatewayMove !== undefined ? { allowGatewayMove: v.allowGatewayMove } : {}),
  };
}

// ------------------------------------------------------ enabling on first use

interface EnablerState {
  allowGatewayMove: boolean;
  /** the detection running now (one at a time) */
  running: Promise<void> | undefined;
  /** when each controller was last tried */
  triedAt: Map<LimitController, number>;
}

// Keyed by the controller's deps: the state lives and dies with the controller.
const enablers = new WeakMap<ControllerDeps, EnablerState>();

/** Called once at create: the move policy, and the controllers detection was already asked for (tried now). */
export function configureLimitControllers(
  d: ControllerDeps,
  option: "auto" | "off" | AcpxContainmentOptions | undefined,
): void {
  const o = typeof option === "object" ? option : {};
  const now = Date.now();
  enablers.set(d, {
    allowGatewayMove: o.allowGatewayMove !== false,
    running: undefined,
    triedAt: new Map((o.controllers ?? []).map((c) => [c, now] as const)),
  });
}

function stateOf(d: ControllerDeps): EnablerState {
  let st = enablers.get(d);
  if (st === undefined) {
    st = { allowGatewayMove: true, running: undefined, triedAt: new Map() };
    enablers.set(d, st);
  }
  return st;
}

/**
 * Makes sure the lease cgroups get `wanted`, detecting again with those
 * controllers when they are not enabled yet (which may move the gateway, see
 * the header). Never throws and never refuses by itself: whether the
 * controllers are there is then for applyLimits on the lease's cgroup to
 * say, with its own why.
 */
export async function enableLimitControllers(d: ControllerDeps, wanted: readonly LimitController[]): Promise<void> {
  const st = stateOf(d);
  while (st.running !== undefined) await st.running;
  const sup = d.containment;
  if (!sup.available) return;
  const now = Date.now();
  const toTry = wanted.filter(
    (c) => !sup.controllers.includes(c) && now - (st.triedAt.get(c) ?? -Infinity) >= ENABLE_RETRY_MS,
  );
  if (toTry.length === 0) return;
  for (const c of toTry) st.triedAt.set(c, now);
  const run = detectContainment({ controllers: toTry, allowGatewayMove: st.allowGatewayMove }).then(
    (next) => adopt(d, sup, next),
    () => undefined,
  );
  st.running = run.finally(() => {
    st.running = undefined;
  });
  await st.running;
}

function adopt(
  d: ControllerDeps,
  before: Extract<ContainmentSupport, { available: true }>,
  next: ContainmentSupport,
): void {
  // another lease root would leave the leases already recorded under the old one unseen
  if (next.available && next.root === before.root) d.containment = next;
}

// ------------------------------------------------- the limits a session runs with

// by handle object: the entry goes with the live session that holds the handle
const runningWith = new WeakMap<AcpRuntimeHandle, EnforcedLimits>();

export function rememberLimits(h: AcpRuntimeHandle, e: EnforcedLimits): void {
  runningWith.set(h, e);
}

/** For ensureSession on a key whose session runs: throws unless it runs with every positive limit asked for. */
export function assertRunningLimits(h: AcpRuntimeHandle, input: { readonly limits: Readonly<EnforcedLimits> }): void {
  const want = input.limits;
  const have = runningWith.get(h) ?? {};
  const differ = (Object.keys(want) as (keyof EnforcedLimits)[]).filter((k) => want[k] !== have[k]);
  if (differ.length === 0) return;
  const why =
    `the session is already running (lease ${h.leaseId}) with ${describeLimits(have) || "no limits"}, not ${describeLimits(want)}; ` +
    "close it first to start one with these limits";
  throw new AcpxEnsureError(
    h.sessionKey,
    "limits-mismatch",
    `ensureSession ${JSON.stringify(h.sessionKey)} refused: ${why}`,
    undefined,
    undefined,
    { limitsRefusal: { why } },
  );
}
