/**
 * The one rule for "does this process's environment say it belongs to this
 * lease?". Every search by markers (descendants of a verified root, remnants
 * of a dead one, a sweep of what a root left behind) asks here, so the rule
 * cannot drift between them.
 */
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../leases/types.js";

export type MarkerVerdict = "match" | "mismatch" | "unknown";

/** The env keys to request from ProcessFacts.inspect for markerVerdict. */
export const MARKER_ENV_KEYS: readonly string[] = Object.freeze([LEASE_ENV_KEY, INSTANCE_ENV_KEY]);

/**
 * "match" only when the environment was readable and carries the lease id
 * AND the gateway instance id (both are put into the wrapper's environment at
 * spawn and inherited by everything below it; a lease id alone could be
 * another installation's copy of a state dir). "unknown" when the
 * environment could not be read; "mismatch" otherwise.
 */
export function markerVerdict(
  details: { env: Readonly<Record<string, string | null>>; envReadable?: boolean } | null | undefined,
  lease: { leaseId: string; gatewayInstanceId: string },
): MarkerVerdict {
  if (details === null || details === undefined || details.envReadable === false) return "unknown";
  const leaseId = details.env[LEASE_ENV_KEY];
  if (leaseId === undefined) return "unknown"; // the key was not asked for: no answer either way
  if (leaseId !== lease.leaseId) return "mismatch";
  return details.env[INSTANCE_ENV_KEY] === lease.gatewayInstanceId ? "match" : "mismatch";
}

/**
 * The other gateway instance a process's environment names, or null: the
 * environment is unreadable, carries no instance marker, or carries this
 * instance's. A process naming another instance is that gateway's.
 */
export function foreignInstanceOf(
  details: { env: Readonly<Record<string, string | null>>; envReadable?: boolean } | null | undefined,
  gatewayInstanceId: string,
): string | null {
  if (details === null || details === undefined || details.envReadable === false) return null;
  const marker = details.env[INSTANCE_ENV_KEY];
  return typeof marker === "string" && marker !== gatewayInstanceId ? marker : null;
}
