/**
 * Properties of the visibility rule over random rows, policies and levels.
 * Keys and agent ids come from small pools so that self, owned, same-agent
 * and allow-list hits actually happen often.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  SESSION_ACTIONS,
  SESSION_VISIBILITIES,
  authorizeSessionAction,
  canSeeSessionRow,
  filterVisibleSessions,
  normalizeSessionOwner,
  resolveAgentToAgentPolicy,
  resolveSessionVisibility,
  toSessionRowOwnership,
  type AgentToAgentPolicy,
  type SessionRowOwnership,
  type SessionVisibility,
} from "../../src/sessions/index.js";

const AGENTS = ["main", "codex", "research", "ops-bot"];
const KEYS = ["agent:main:main", "agent:main:sub:1", "agent:codex:acp:1", "agent:research:main", "cron:job", "main"];

const agentId = fc.constantFrom(...AGENTS);
const sessionKey = fc.constantFrom(...KEYS);
const ownerField = fc.option(sessionKey, { nil: undefined });

const row: fc.Arbitrary<SessionRowOwnership> = fc
  .record({
    key: sessionKey,
    agentId,
    ownerSessionKey: ownerField,
    spawnedBy: ownerField,
    parentSessionKey: ownerField,
  })
  .map((r) => {
    // drop undefined optionals so rows look like real ones
    const out: SessionRowOwnership = { key: r.key, agentId: r.agentId };
    if (r.ownerSessionKey !== undefined) out.ownerSessionKey = r.ownerSessionKey;
    if (r.spawnedBy !== undefined) out.spawnedBy = r.spawnedBy;
    if (r.parentSessionKey !== undefined) out.parentSessionKey = r.parentSessionKey;
    return out;
  });

const pattern = fc.constantFrom("main", "codex", "research", "*", "code*", "*-bot", "*a*", "m*n", "nobody");
const policy: fc.Arbitrary<AgentToAgentPolicy> = fc.record(
  { enabled: fc.boolean(), allow: fc.array(pattern, { maxLength: 3 }) },
  { requiredKeys: ["enabled"] },
);
// Literal tables from docs/session-visibility.md's rule, never re-derived from the code under test:
/** the levels, narrowest first */
const ORDER: readonly SessionVisibility[] = ["self", "tree", "agent", "all"];
/** what a sandboxed requester gets for each configured level (clamped to its tree) */
const SANDBOX_CLAMP: Readonly<Record<SessionVisibility, SessionVisibility>> = {
  self: "self",
  tree: "tree",
  agent: "tree",
  all: "tree",
};
/** whether a row the requester owns (not itself) is visible at each level */
const OWNED_VISIBLE: Readonly<Record<SessionVisibility, boolean>> = { self: false, tree: true, agent: true, all: true };
/** the agent each pool key belongs to: agent:<id>:… names it; any other key is the main agent's */
const AGENT_OF_KEY: Readonly<Record<string, string>> = {
  "agent:main:main": "main",
  "agent:main:sub:1": "main",
  "agent:codex:acp:1": "codex",
  "agent:research:main": "research",
  "cron:job": "main",
  main: "main",
};
const visibility = fc.constantFrom<SessionVisibility>(...ORDER);
const requesterAgentId = fc.option(agentId, { nil: undefined });

const base = fc.record({
  requesterSessionKey: sessionKey,
  requesterAgentId,
  a2aPolicy: policy,
  row,
  sandboxed: fc.boolean(),
});

const RUNS = { numRuns: 2000 };

describe("visibility properties", () => {
  it("the levels are docs/session-visibility.md's four, narrowest first", () => {
    expect([...SESSION_VISIBILITIES]).toEqual(ORDER);
  });

  it("monotonic: self ⊆ tree ⊆ agent ⊆ all for every row and policy", () => {
    fc.assert(
      fc.property(base, (b) => {
        const seen = ORDER.map((v) => canSeeSessionRow({ ...b, visibility: v }));
        for (let i = 0; i + 1 < seen.length; i++) {
          if (seen[i]) expect(seen[i + 1], `${ORDER[i]} ⊆ ${ORDER[i + 1]}`).toBe(true);
        }
      }),
      RUNS,
    );
  });

  it("an owned child is visible wherever the configured visibility includes the requester's tree (sandboxed or not)", () => {
    fc.assert(
      fc.property(
        base,
        visibility,
        fc.constantFrom("ownerSessionKey", "spawnedBy", "parentSessionKey"),
        (b, v, field) => {
          const child = { ...b.row, [field]: b.requesterSessionKey };
          const input = { ...b, row: child, visibility: v };
          expect(canSeeSessionRow(input)).toBe(OWNED_VISIBLE[v] || child.key === b.requesterSessionKey);
        },
      ),
      RUNS,
    );
  });

  it("every action gives the same answer, in canSeeSessionRow and authorizeSessionAction", () => {
    fc.assert(
      fc.property(base, visibility, (b, v) => {
        const plain = canSeeSessionRow({ ...b, visibility: v });
        for (const action of SESSION_ACTIONS) {
          expect(canSeeSessionRow({ ...b, visibility: v, action })).toBe(plain);
          expect(authorizeSessionAction({ ...b, visibility: v, action }).allowed).toBe(plain);
        }
      }),
      RUNS,
    );
  });

  it("sandboxing never widens, and equals the unsandboxed answer at min(visibility, tree)", () => {
    fc.assert(
      fc.property(base, visibility, (b, v) => {
        const boxed = canSeeSessionRow({ ...b, visibility: v, sandboxed: true });
        const free = canSeeSessionRow({ ...b, visibility: v, sandboxed: false });
        if (boxed) expect(free).toBe(true);
        expect(boxed).toBe(canSeeSessionRow({ ...b, visibility: SANDBOX_CLAMP[v], sandboxed: false }));
      }),
      RUNS,
    );
  });

  it("pure: inputs are not mutated (deep-frozen inputs work) and repeated calls agree", () => {
    fc.assert(
      fc.property(base, visibility, (b, v) => {
        const input = { ...b, visibility: v };
        const snapshot = structuredClone(input);
        const frozen = deepFreeze(structuredClone(input));
        const first = canSeeSessionRow(frozen);
        expect(canSeeSessionRow(input)).toBe(first);
        expect(canSeeSessionRow(input)).toBe(first);
        expect(input).toEqual(snapshot);
      }),
      { numRuns: 500 },
    );
  });

  it("filterVisibleSessions keeps exactly the rows canSeeSessionRow admits, in order, without copying them", () => {
    fc.assert(
      fc.property(base, visibility, fc.array(row, { maxLength: 12 }), (b, v, rows) => {
        const { row: _ignored, ...ctx } = b;
        const out = filterVisibleSessions(rows, { ...ctx, visibility: v });
        expect(out.rows).toEqual(rows.filter((r) => canSeeSessionRow({ ...ctx, visibility: v, row: r })));
        for (const r of out.rows) expect(rows).toContain(r);
        expect(out.scope).toBe(b.sandboxed ? SANDBOX_CLAMP[v] : v);
        expect(out.sandboxClamped).toBe(out.scope !== v);
      }),
      { numRuns: 500 },
    );
  });

  it("a2a disabled: no non-owned cross-agent row is ever visible, at any level", () => {
    // the rows are made not owned and of another agent by construction (keys other than the
    // requester's, an agent other than the literal table's), never by re-stating the rule
    const crossAgent = fc
      .record({ me: sessionKey, requesterAgentId, v: visibility, sandboxed: fc.boolean(), policy })
      .chain(({ me, requesterAgentId: rid, v, sandboxed, policy: pol }) => {
        const mine = rid ?? AGENT_OF_KEY[me]!;
        const otherKey = fc.constantFrom(...KEYS.filter((k) => k !== me));
        const other = fc.option(otherKey, { nil: undefined });
        return fc
          .record({
            key: otherKey,
            agentId: fc.constantFrom(...AGENTS.filter((a) => a !== mine)),
            ownerSessionKey: other,
            spawnedBy: other,
            parentSessionKey: other,
          })
          .map((r) => ({ me, rid, v, sandboxed, pol, r }));
      });
    fc.assert(
      fc.property(crossAgent, ({ me, rid, v, sandboxed, pol, r }) => {
        const rowIn: SessionRowOwnership = { key: r.key, agentId: r.agentId };
        if (r.ownerSessionKey !== undefined) rowIn.ownerSessionKey = r.ownerSessionKey;
        if (r.spawnedBy !== undefined) rowIn.spawnedBy = r.spawnedBy;
        if (r.parentSessionKey !== undefined) rowIn.parentSessionKey = r.parentSessionKey;
        const input = {
          requesterSessionKey: me,
          requesterAgentId: rid,
          sandboxed,
          visibility: v,
          row: rowIn,
          a2aPolicy: { ...pol, enabled: false },
        };
        expect(canSeeSessionRow(input)).toBe(false);
      }),
      RUNS,
    );
  });
});

/**
 * Prototype pollution: every field the rule, the policy and the owner readers
 * take from caller data, set on Object.prototype with values chosen to widen
 * access (the requester as owner, a2a on for everyone, visibility "all",
 * sandbox off, a config that enables everything).
 */
const POLLUTABLE = [
  "ownerSessionKey",
  "spawnedBy",
  "parentSessionKey",
  "key",
  "sessionKey",
  "agentId",
  "enabled",
  "allow",
  "visibility",
  "sandboxed",
  "requesterAgentId",
  "requesterSessionKey",
  "action",
  "row",
  "a2aPolicy",
  "tools",
  "sessions",
  "agentToAgent",
  "owner",
  "backend",
  "createdAt",
] as const;
const WIDE_CONFIG = {
  sessions: { visibility: "all" },
  agentToAgent: { enabled: true, allow: ["*"] },
  visibility: "all",
  enabled: true,
};
const pollutionValue = fc.oneof(
  sessionKey,
  agentId,
  fc.boolean(),
  fc.constantFrom("all", "ALL", "tree", "self", "acpx", "history"),
  fc.constant(["*"]),
  fc.constant(["nobody"]),
  fc.constant(WIDE_CONFIG),
  fc.constant({ enabled: true }),
  fc.nat(),
);
const pollution = fc.dictionary(fc.constantFrom(...POLLUTABLE), pollutionValue, { minKeys: 1 });
const sparseConfig = fc.constantFrom<unknown>(
  {},
  { tools: {} },
  { tools: { sessions: {} } },
  { tools: { agentToAgent: {} } },
  { tools: { sessions: {}, agentToAgent: {} } },
);
/** inputs that leave the optional fields out, so an inherited value would be read if anything looked */
const sparse = fc.record(
  { requesterSessionKey: sessionKey, requesterAgentId: agentId, a2aPolicy: policy, row, sandboxed: fc.boolean() },
  { requiredKeys: ["requesterSessionKey", "a2aPolicy", "row"] },
);

type Outcome = { ok: unknown } | { threw: string };
const attempt = (f: () => unknown): Outcome => {
  try {
    return { ok: f() };
  } catch (err) {
    return { threw: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  }
};

/** Every answer of the module for one input, each captured (a throw is an answer too). */
function answers(
  b: Record<string, unknown>,
  v: SessionVisibility,
  rows: SessionRowOwnership[],
  cfg: unknown,
): Record<string, Outcome> {
  const input = { ...b, visibility: v } as unknown as Parameters<typeof canSeeSessionRow>[0];
  const { row: _row, ...ctx } = input;
  return {
    see: attempt(() => canSeeSessionRow(input)),
    auth: attempt(() => authorizeSessionAction({ ...input, action: "history" })),
    list: attempt(() => filterVisibleSessions(rows, ctx).rows.map((r) => rows.indexOf(r))),
    level: attempt(() => resolveSessionVisibility(cfg)),
    levelOpts: attempt(() => resolveSessionVisibility(cfg, {})),
    a2a: attempt(() => resolveAgentToAgentPolicy(cfg)),
    owner: attempt(() => toSessionRowOwnership(input.row)),
    normalized: attempt(() => normalizeSessionOwner(input.row)),
  };
}

/** Runs `f` with Object.prototype polluted, always cleaned up (even when f throws). */
function withPollution<T>(fields: Record<string, unknown>, f: () => T): T {
  const proto = Object.prototype as Record<string, unknown>;
  const added: string[] = [];
  try {
    for (const [k, val] of Object.entries(fields)) {
      if (Object.hasOwn(proto, k)) continue;
      added.push(k);
      proto[k] = val; // plain assignment: enumerable, as a real pollution is
    }
    return f();
  } finally {
    for (const k of added) delete proto[k];
  }
}

describe("own properties only: a polluted Object.prototype changes no answer", () => {
  it("property: for random rows, policies, configs and pollutions, every answer equals the unpolluted one", () => {
    fc.assert(
      fc.property(
        sparse,
        visibility,
        fc.array(row, { maxLength: 6 }),
        sparseConfig,
        pollution,
        (b, v, rows, cfg, fields) => {
          const clean = answers(b, v, rows, cfg);
          const polluted = withPollution(fields, () => answers(b, v, rows, cfg));
          for (const k of POLLUTABLE) expect(Object.hasOwn(Object.prototype, k), `cleanup of ${k}`).toBe(false);
          expect(polluted).toEqual(clean);
        },
      ),
      { numRuns: 400 },
    );
  });

  it("the widest pollution at once cannot make a stranger's legacy row visible or widen any setting", () => {
    const me = "agent:main:main";
    const fields = {
      ownerSessionKey: me,
      spawnedBy: me,
      parentSessionKey: me,
      requesterAgentId: "codex",
      enabled: true,
      allow: ["*"],
      visibility: "all",
      sandboxed: false,
      tools: WIDE_CONFIG,
      owner: { ownerSessionKey: me, agentId: "main" },
      key: me,
      agentId: "main",
    };
    const stranger = { key: "agent:codex:acp:9", agentId: "codex" };
    const ctx = { requesterSessionKey: me, visibility: "tree" as const, a2aPolicy: { enabled: false } };
    const seen = withPollution(fields, () => ({
      tree: canSeeSessionRow({ ...ctx, row: stranger }),
      all: canSeeSessionRow({ ...ctx, visibility: "all", row: stranger }),
      boxed: filterVisibleSessions([stranger], { ...ctx, visibility: "all", sandboxed: true }).scope,
      level: resolveSessionVisibility({}),
      a2a: resolveAgentToAgentPolicy({ tools: {} }),
      noKeyRow: toSessionRowOwnership({}),
    }));
    expect(seen).toEqual({
      tree: false,
      all: false,
      boxed: "tree",
      level: "tree",
      a2a: { enabled: false },
      noKeyRow: null,
    });
  });

  it("an allow list with a hole is refused, not read through to Array.prototype", () => {
    // eslint-disable-next-line no-sparse-arrays
    const holed = ["main", , "codex"] as unknown as string[];
    expect(() =>
      canSeeSessionRow({
        requesterSessionKey: "agent:main:main",
        visibility: "all",
        a2aPolicy: { enabled: true, allow: holed },
        row: { key: "k", agentId: "x" },
      }),
    ).toThrow(/a2aPolicy\.allow\[1\]/);
    expect(() => resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true, allow: holed } } })).toThrow(
      /allow\[1\]/,
    );
  });
});

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object") {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
