/**
 * The seed's visibility matrix ("Matrice di visibilità delle sessioni"),
 * table-driven. Every line states its expected answer for each row kind;
 * each (line, row) is checked for all four actions through canSeeSessionRow,
 * authorizeSessionAction and filterVisibleSessions, which must all agree.
 */
import { describe, expect, it } from "vitest";
import {
  SESSION_ACTIONS,
  authorizeSessionAction,
  canSeeSessionRow,
  filterVisibleSessions,
  type AgentToAgentPolicy,
  type SessionRowOwnership,
  type SessionVisibility,
} from "../../src/sessions/index.js";

const ME = "agent:main:main"; // requester; agent id "main" is parsed from the key

const ROWS = {
  // the requester's own row
  self: { key: ME, agentId: "main" },
  // another session of the same agent, not owned
  sameAgent: { key: "agent:main:telegram:dm:42", agentId: "main" },
  // a same-agent subagent spawned by the requester
  ownedSame: { key: "agent:main:subagent:7", agentId: "main", spawnedBy: ME },
  // another agent's session, not owned
  cross: { key: "agent:research:main", agentId: "research" },
  // cross-agent ACP child spawned and owned by the requester (the row says so)
  ownedCrossAcp: { key: "agent:codex:acp:1", agentId: "codex", ownerSessionKey: ME, spawnedBy: ME },
  // cross-agent child that only records its parent
  ownedCrossParent: { key: "agent:codex:acp:2", agentId: "codex", parentSessionKey: ME },
  // legacy cross-agent ACP row without owner fields: NOT owned, whatever the key looks like
  legacyCross: { key: "agent:codex:acp:main:child", agentId: "codex" },
} satisfies Record<string, SessionRowOwnership>;

type RowName = keyof typeof ROWS;
const ROW_ORDER: RowName[] = [
  "self",
  "sameAgent",
  "ownedSame",
  "cross",
  "ownedCrossAcp",
  "ownedCrossParent",
  "legacyCross",
];

const A2A: Record<string, AgentToAgentPolicy> = {
  off: { enabled: false },
  offButAllowAll: { enabled: false, allow: ["*"] },
  on: { enabled: true },
  // requester and codex allowed (glob), research not
  onMainCode: { enabled: true, allow: ["main", "code*"] },
  // targets allowed but the requester agent is not: both must be allowed
  onNotMe: { enabled: true, allow: ["research", "codex"] },
};

// Columns, in ROW_ORDER: self sameAgent ownedSame cross ownedCrossAcp ownedCrossParent legacyCross
// Y = visible, n = not visible.
const MATRIX: Array<[SessionVisibility, keyof typeof A2A, boolean, string]> = [
  //  visibility  a2a               sandboxed   expected
  ["self", "off", false, "Y n n n n n n"],
  ["self", "offButAllowAll", false, "Y n n n n n n"],
  ["self", "on", false, "Y n n n n n n"],
  ["self", "onMainCode", false, "Y n n n n n n"],
  ["self", "onNotMe", false, "Y n n n n n n"],
  ["tree", "off", false, "Y n Y n Y Y n"],
  ["tree", "offButAllowAll", false, "Y n Y n Y Y n"],
  ["tree", "on", false, "Y n Y n Y Y n"],
  ["tree", "onMainCode", false, "Y n Y n Y Y n"],
  ["tree", "onNotMe", false, "Y n Y n Y Y n"],
  ["agent", "off", false, "Y Y Y n Y Y n"],
  ["agent", "offButAllowAll", false, "Y Y Y n Y Y n"],
  ["agent", "on", false, "Y Y Y n Y Y n"],
  ["agent", "onMainCode", false, "Y Y Y n Y Y n"],
  ["agent", "onNotMe", false, "Y Y Y n Y Y n"],
  ["all", "off", false, "Y Y Y n Y Y n"],
  ["all", "offButAllowAll", false, "Y Y Y n Y Y n"],
  ["all", "on", false, "Y Y Y Y Y Y Y"],
  ["all", "onMainCode", false, "Y Y Y n Y Y Y"],
  ["all", "onNotMe", false, "Y Y Y n Y Y n"],
  // sandboxed requesters: clamped to tree (self stays self: the clamp never widens)
  ["self", "off", true, "Y n n n n n n"],
  ["self", "on", true, "Y n n n n n n"],
  ["tree", "off", true, "Y n Y n Y Y n"],
  ["tree", "on", true, "Y n Y n Y Y n"],
  ["agent", "off", true, "Y n Y n Y Y n"],
  ["agent", "on", true, "Y n Y n Y Y n"],
  ["agent", "onMainCode", true, "Y n Y n Y Y n"],
  ["all", "off", true, "Y n Y n Y Y n"],
  ["all", "on", true, "Y n Y n Y Y n"],
  ["all", "onMainCode", true, "Y n Y n Y Y n"],
  ["all", "onNotMe", true, "Y n Y n Y Y n"],
];

const cases = MATRIX.flatMap(([visibility, a2a, sandboxed, expected]) => {
  const answers = expected.split(/\s+/);
  expect(answers).toHaveLength(ROW_ORDER.length);
  return ROW_ORDER.map((rowName, i) => ({
    visibility,
    a2a,
    sandboxed,
    rowName,
    expected: answers[i] === "Y",
  }));
});

describe("session visibility matrix (seed)", () => {
  it.each(cases)(
    "$visibility / a2a=$a2a / sandboxed=$sandboxed / $rowName → visible=$expected for list, history, send, status",
    ({ visibility, a2a, sandboxed, rowName, expected }) => {
      const row = ROWS[rowName];
      const ctx = { requesterSessionKey: ME, visibility, a2aPolicy: A2A[a2a]!, sandboxed };
      for (const action of SESSION_ACTIONS) {
        expect(canSeeSessionRow({ ...ctx, row, action }), `canSeeSessionRow action=${action}`).toBe(expected);
        const auth = authorizeSessionAction({ ...ctx, row, action });
        expect(auth.allowed, `authorizeSessionAction action=${action}`).toBe(expected);
        if (!auth.allowed) {
          expect(auth.status).toBe("forbidden");
          expect(auth.error).toContain(action);
          // the refusal names the setting to change
          expect(auth.error).toMatch(/tools\.(sessions\.visibility|agentToAgent)|sandboxed/);
        }
      }
      const listed = filterVisibleSessions(Object.values(ROWS), ctx);
      expect(listed.rows.includes(row)).toBe(expected);
    },
  );

  it("list output names the scope it applied and whether the sandbox clamped it", () => {
    const rows = Object.values(ROWS);
    const open = filterVisibleSessions(rows, { requesterSessionKey: ME, visibility: "all", a2aPolicy: A2A.on! });
    expect(open).toMatchObject({ scope: "all", requested: "all", sandboxClamped: false });
    expect(open.rows).toHaveLength(rows.length);
    const boxed = filterVisibleSessions(rows, {
      requesterSessionKey: ME,
      visibility: "all",
      a2aPolicy: A2A.on!,
      sandboxed: true,
    });
    expect(boxed).toMatchObject({ scope: "tree", requested: "all", sandboxClamped: true });
    expect(boxed.rows.map((r) => r.key)).toEqual([
      ME,
      ROWS.ownedSame.key,
      ROWS.ownedCrossAcp.key,
      ROWS.ownedCrossParent.key,
    ]);
    // self is narrower than tree: the clamp does not touch it
    const selfOnly = filterVisibleSessions(rows, {
      requesterSessionKey: ME,
      visibility: "self",
      a2aPolicy: A2A.on!,
      sandboxed: true,
    });
    expect(selfOnly).toMatchObject({ scope: "self", requested: "self", sandboxClamped: false });
    expect(selfOnly.rows).toEqual([ROWS.self]);
  });
});

describe("requester agent id", () => {
  const policy: AgentToAgentPolicy = { enabled: false };
  it("is parsed from an agent:<id>:… key (a research requester sees research rows at 'agent')", () => {
    const input = { requesterSessionKey: "agent:research:discord:1", visibility: "agent" as const, a2aPolicy: policy };
    expect(canSeeSessionRow({ ...input, row: ROWS.cross })).toBe(true);
    expect(canSeeSessionRow({ ...input, row: ROWS.sameAgent })).toBe(false);
  });
  it("defaults to 'main' for keys without an agent prefix (cron:job, bare main)", () => {
    for (const key of ["cron:nightly", "main", "agent::x", "agent:solo"]) {
      expect(
        canSeeSessionRow({ requesterSessionKey: key, visibility: "agent", a2aPolicy: policy, row: ROWS.sameAgent }),
        key,
      ).toBe(true);
      expect(
        canSeeSessionRow({ requesterSessionKey: key, visibility: "agent", a2aPolicy: policy, row: ROWS.cross }),
        key,
      ).toBe(false);
    }
  });
  it("an explicit requesterAgentId overrides the key", () => {
    const input = {
      requesterSessionKey: ME,
      requesterAgentId: "research",
      visibility: "agent" as const,
      a2aPolicy: policy,
    };
    expect(canSeeSessionRow({ ...input, row: ROWS.cross })).toBe(true);
    expect(canSeeSessionRow({ ...input, row: ROWS.sameAgent })).toBe(false);
    // ownership still wins for the requester's own children
    expect(canSeeSessionRow({ ...input, row: ROWS.ownedSame })).toBe(true);
  });
  it("the a2a allow list is checked against the requester agent as well as the row's", () => {
    const onlyResearch = { enabled: true, allow: ["res*"] };
    expect(
      canSeeSessionRow({
        requesterSessionKey: "agent:research:x:1",
        visibility: "all",
        a2aPolicy: onlyResearch,
        row: { key: "agent:resolver:1", agentId: "resolver" },
      }),
    ).toBe(true);
    expect(
      canSeeSessionRow({ requesterSessionKey: ME, visibility: "all", a2aPolicy: onlyResearch, row: ROWS.cross }),
    ).toBe(false);
  });
});
