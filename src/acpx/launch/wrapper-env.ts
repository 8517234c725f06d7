/**
 * The wrapper's (and so the adapter's) environment: the gateway's, minus
 * `envRemove`, plus `env`, plus the two lease markers, which can be neither
 * removed nor overridden (without them neither verification nor the
 * wrapper's escapee search can tell the tree is ours).
 */
import { MARKER_ENV_KEYS } from "../../ownership/verify/markers.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../wrapper/protocol.js";

/**
 * The rule for `envRemove`, wherever one is given: an array of non-empty
 * strings without "=" or NUL, never one of the two markers (a TypeError
 * naming them: a caller must learn that a removal it asked for cannot
 * happen, though buildWrapperEnv keeps the markers either way).
 */
export function assertEnvRemove(value: unknown, name = "envRemove"): asserts value is readonly string[] {
  if (!Array.isArray(value)) throw new TypeError(`${name} must be an array of environment variable names`);
  value.forEach((k: unknown, i: number) => {
    if (typeof k !== "string" || k.length === 0 || k.includes("=") || k.includes("\0")) {
      throw new TypeError(`${name}[${i}] must be a non-empty environment variable name without "=" or NUL`);
    }
    if (MARKER_ENV_KEYS.includes(k)) {
      throw new TypeError(
        `${name}[${i}]: ${k} cannot be removed: ${MARKER_ENV_KEYS.join(" and ")} are the lease markers the wrapper and the adapter must carry`,
      );
    }
  });
}

/** What the environment is built from: the caller's changes and the lease the markers name. */
export interface WrapperEnvInput {
  env?: Record<string, string>;
  /** keys dropped from the inherited environment before `env` is applied (never the markers) */
  envRemove?: readonly string[];
  leaseId: string;
  gatewayInstanceId: string;
}

/**
 * An explicit `env` value wins over a removal (removal is about what is
 * inherited), and the markers always win: set last, they hold whatever
 * `envRemove` and `env` name.
 */
export function buildWrapperEnv(input: WrapperEnvInput, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of input.envRemove ?? []) delete env[k];
  return {
    ...env,
    ...input.env,
    [LEASE_ENV_KEY]: input.leaseId,
    [INSTANCE_ENV_KEY]: input.gatewayInstanceId,
  };
}
