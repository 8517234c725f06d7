/**
 * Agent-to-agent policy: validation, resolution from OpenClaw-style config
 * (`tools.agentToAgent.{enabled, allow}`), and the allow-list check.
 */
import { compileStarGlob, type StarGlobMatcher } from "./glob.js";
import type { AgentToAgentPolicy } from "./types.js";
import { describeValue, isRecord, own } from "./describe.js";

/**
 * Throws a TypeError naming the offending field when `value` is not an
 * `AgentToAgentPolicy`. A malformed policy must never be read as "allow
 * everything", so it is refused rather than repaired.
 */
export function assertAgentToAgentPolicy(value: unknown, name = "a2aPolicy"): asserts value is AgentToAgentPolicy {
  if (!isRecord(value)) {
    throw new TypeError(`${name} must be an object {enabled, allow?}, got ${describeValue(value)}`);
  }
  const enabled = own(value, "enabled");
  if (typeof enabled !== "boolean") {
    throw new TypeError(`${name}.enabled must be a boolean, got ${describeValue(enabled)}`);
  }
  assertAllowList(own(value, "allow"), `${name}.allow`);
}

function assertAllowList(allow: unknown, name: string): asserts allow is readonly string[] | undefined {
  if (allow === undefined) return;
  if (!Array.isArray(allow)) {
    throw new TypeError(`${name} must be an array of agent id globs, got ${describeValue(allow)}`);
  }
  // every index, holes included: a hole would read through to Array.prototype
  for (let i = 0; i < allow.length; i++) {
    const p: unknown = own(allow as unknown as Record<string, unknown>, String(i));
    if (typeof p !== "string" || p.length === 0) {
      throw new TypeError(`${name}[${i}] must be a non-empty string, got ${describeValue(p)}`);
    }
  }
}

/** Compiled form of a validated policy: the allow list's globs built once. */
export interface CompiledAgentToAgentPolicy {
  readonly enabled: boolean;
  isAllowed(agentId: string): boolean;
}

export function compileAgentToAgentPolicy(policy: AgentToAgentPolicy): CompiledAgentToAgentPolicy {
  assertAgentToAgentPolicy(policy);
  // own properties only (validated above): an inherited `allow` or `enabled` is not the policy's
  const fields = policy as unknown as Record<string, unknown>;
  const allow = (own(fields, "allow") as readonly string[] | undefined) ?? [];
  const matchers: StarGlobMatcher[] = allow.map((p) => compileStarGlob(p));
  const allowAll = matchers.length === 0;
  return {
    enabled: own(fields, "enabled") === true,
    isAllowed: (agentId) => allowAll || matchers.some((m) => m(agentId)),
  };
}

/**
 * Whether `agentId` is covered by the policy's allow list (empty/absent =
 * every agent). It ignores `enabled`: cross-agent access needs `enabled`
 * AND both agents allowed, which `canSeeSessionRow` checks.
 */
export function isAgentAllowed(policy: AgentToAgentPolicy, agentId: string): boolean {
  return compileAgentToAgentPolicy(policy).isAllowed(agentId);
}

/**
 * Builds the policy from OpenClaw-style config. Missing config, a missing
 * `tools.agentToAgent`, or a missing `enabled` means disabled (fail closed).
 * A present but mistyped `enabled` or `allow` throws a TypeError naming the
 * config path: guessing would either hide a typo or widen access.
 */
export function resolveAgentToAgentPolicy(cfg: unknown): AgentToAgentPolicy {
  const section = readSection(cfg, ["tools", "agentToAgent"]);
  if (section === undefined) return { enabled: false };
  const path = "tools.agentToAgent";
  const enabled = own(section, "enabled");
  if (enabled !== undefined && typeof enabled !== "boolean") {
    throw new TypeError(`${path}.enabled must be a boolean, got ${describeValue(enabled)}`);
  }
  const allow = own(section, "allow");
  assertAllowList(allow, `${path}.allow`);
  const policy: AgentToAgentPolicy = { enabled: enabled === true };
  if (allow !== undefined) policy.allow = Object.freeze([...allow]);
  return policy;
}

/**
 * Walks `cfg.<path…>`; undefined when any level is absent (undefined/null).
 * A level that is present but not an object throws, naming the path.
 */
export function readSection(cfg: unknown, path: readonly string[]): Record<string, unknown> | undefined {
  if (cfg === undefined || cfg === null) return undefined;
  if (!isRecord(cfg)) throw new TypeError(`cfg must be an object, got ${describeValue(cfg)}`);
  let cur: Record<string, unknown> = cfg;
  for (let i = 0; i < path.length; i++) {
    const next = own(cur, path[i] as string);
    if (next === undefined || next === null) return undefined;
    if (!isRecord(next)) {
      throw new TypeError(`${path.slice(0, i + 1).join(".")} must be an object, got ${describeValue(next)}`);
    }
    cur = next;
  }
  return cur;
}
