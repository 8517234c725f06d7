/** Bad input, config resolution, owner metadata and refusal messages. */
import { describe, expect, it } from "vitest";
import {
  authorizeSessionAction,
  buildSessionOwner,
  canSeeSessionRow,
  filterVisibleSessions,
  normalizeSessionOwner,
  resolveAgentToAgentPolicy,
  resolveSessionVisibility,
  toSessionRowOwnership,
  type CanSeeSessionRowInput,
} from "../../src/sessions/index.js";

const ME = "agent:main:main";
const ok: CanSeeSessionRowInput = {
  requesterSessionKey: ME,
  row: { key: "agent:main:x", agentId: "main" },
  visibility: "agent",
  a2aPolicy: { enabled: false },
};
const bad = (patch: Record<string, unknown>) => ({ ...ok, ...patch }) as unknown as CanSeeSessionRowInput;

describe("bad input throws a TypeError naming the field", () => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ["missing requester key", { requesterSessionKey: undefined }, /requesterSessionKey/],
    ["numeric requester key", { requesterSessionKey: 7 }, /requesterSessionKey/],
    ["empty requester key", { requesterSessionKey: "" }, /requesterSessionKey/],
    ["empty requesterAgentId", { requesterAgentId: "" }, /requesterAgentId/],
    ["unknown visibility", { visibility: "everyone" }, /visibility/],
    ["visibility that only resembles a level", { visibility: "al l" }, /visibility/],
    ["missing visibility", { visibility: undefined }, /visibility/],
    ["missing policy", { a2aPolicy: undefined }, /a2aPolicy/],
    ["policy enabled as string", { a2aPolicy: { enabled: "true" } }, /a2aPolicy\.enabled/],
    ["policy allow as string", { a2aPolicy: { enabled: true, allow: "*" } }, /a2aPolicy\.allow/],
    ["policy allow with a number", { a2aPolicy: { enabled: true, allow: ["main", 3] } }, /a2aPolicy\.allow\[1\]/],
    ["policy allow with an empty pattern", { a2aPolicy: { enabled: true, allow: [""] } }, /a2aPolicy\.allow\[0\]/],
    ["sandboxed as string", { sandboxed: "yes" }, /sandboxed/],
    ["unknown action", { action: "delete" }, /action/],
  ];
  it.each(cases)("%s", (_name, patch, field) => {
    expect(() => canSeeSessionRow(bad(patch))).toThrow(TypeError);
    expect(() => canSeeSessionRow(bad(patch))).toThrow(field);
    if (!("action" in patch)) {
      expect(() => authorizeSessionAction({ ...bad(patch), action: "status" })).toThrow(field);
      const { row: _r, ...ctx } = bad(patch);
      expect(() => filterVisibleSessions([ok.row], ctx)).toThrow(field);
    }
  });
  it("authorizeSessionAction requires an action; filterVisibleSessions requires an array", () => {
    expect(() => authorizeSessionAction({ ...ok } as never)).toThrow(/action/);
    expect(() => filterVisibleSessions("rows" as never, ok)).toThrow(/rows/);
  });
});

describe("unreadable rows are never visible (false, not a throw)", () => {
  const rows: unknown[] = [
    { agentId: "main" },
    { key: "agent:main:x" },
    { key: "", agentId: "main" },
    { key: ME, agentId: "" },
    { key: ME, agentId: 5 },
    { key: 5, agentId: "main", spawnedBy: ME },
    null,
    "agent:main:main",
  ];
  it.each(rows.map((r) => [JSON.stringify(r), r]))("row %s", (_s, row) => {
    for (const visibility of ["self", "tree", "agent", "all"] as const) {
      const input = { ...ok, visibility, a2aPolicy: { enabled: true }, row: row as never };
      expect(canSeeSessionRow(input)).toBe(false);
      const auth = authorizeSessionAction({ ...input, action: "history" });
      expect(auth).toMatchObject({ allowed: false, status: "forbidden", reason: "unreadable-row" });
    }
    expect(filterVisibleSessions([row as never, ok.row], { ...ok, visibility: "all" }).rows).toEqual([ok.row]);
  });
  it("owner fields of the wrong type never make a row owned", () => {
    const row = { key: "agent:codex:acp:1", agentId: "codex", ownerSessionKey: [ME], spawnedBy: { ME } } as never;
    expect(canSeeSessionRow({ ...ok, visibility: "all", row })).toBe(false);
  });
});

describe("authorizeSessionAction: the refusal names the level and the setting", () => {
  const ctx = { requesterSessionKey: ME, a2aPolicy: { enabled: false } };
  const sameAgent = { key: "agent:main:other", agentId: "main" };
  const cross = { key: "agent:research:main", agentId: "research" };
  it("tree refusing a same-agent row points at tools.sessions.visibility=agent", () => {
    const r = authorizeSessionAction({ ...ctx, visibility: "tree", row: sameAgent, action: "send" });
    expect(r).toMatchObject({ allowed: false, status: "forbidden", visibility: "tree", reason: "visibility" });
    if (!r.allowed) expect(r.error).toMatch(/visibility "tree".*tools\.sessions\.visibility="agent"/);
  });
  it("self refusing an owned child points at tree", () => {
    const r = authorizeSessionAction({
      ...ctx,
      visibility: "self",
      row: { ...sameAgent, spawnedBy: ME },
      action: "status",
    });
    if (r.allowed) throw new Error("expected a refusal");
    expect(r).toMatchObject({ visibility: "self", reason: "visibility" });
    expect(r.error).toMatch(/visibility "self".*tools\.sessions\.visibility="tree"/);
  });
  it("all with a2a disabled names tools.agentToAgent.enabled", () => {
    const r = authorizeSessionAction({ ...ctx, visibility: "all", row: cross, action: "history" });
    expect(r).toMatchObject({ allowed: false, visibility: "all", reason: "agent-to-agent" });
    if (!r.allowed) expect(r.error).toMatch(/tools\.agentToAgent\.enabled=true/);
  });
  it("all with a2a enabled but the target not allowed names tools.agentToAgent.allow and the agent", () => {
    const r = authorizeSessionAction({
      ...ctx,
      a2aPolicy: { enabled: true, allow: ["main"] },
      visibility: "all",
      row: cross,
      action: "history",
    });
    if (r.allowed) throw new Error("expected a refusal");
    expect(r).toMatchObject({ visibility: "all", reason: "agent-to-agent" });
    expect(r.error).toMatch(/"research" is not in tools\.agentToAgent\.allow/);
  });
  it("agent refusing an a2a-allowed cross-agent row points at visibility=all", () => {
    const r = authorizeSessionAction({
      ...ctx,
      a2aPolicy: { enabled: true },
      visibility: "agent",
      row: cross,
      action: "list",
    });
    expect(r).toMatchObject({ allowed: false, visibility: "agent", reason: "visibility" });
    if (!r.allowed) expect(r.error).toMatch(/tools\.sessions\.visibility="all"/);
  });
  it("a sandboxed requester is told the sandbox clamped it", () => {
    const r = authorizeSessionAction({ ...ctx, visibility: "all", sandboxed: true, row: sameAgent, action: "history" });
    expect(r).toMatchObject({ allowed: false, visibility: "tree", reason: "sandbox" });
    if (!r.allowed) expect(r.error).toMatch(/sandboxed.*"tree"/);
  });
});

describe("resolveSessionVisibility", () => {
  it.each([
    [undefined, false, "tree"],
    [null, false, "tree"],
    [42, false, "tree"],
    [{}, false, "tree"],
    [{ tools: {} }, false, "tree"],
    [{ tools: { sessions: "all" } }, false, "tree"],
    [{ tools: { sessions: { visibility: "bogus" } } }, false, "tree"],
    // OpenClaw lower-cases and trims the setting: any case names the level
    [{ tools: { sessions: { visibility: "ALL" } } }, false, "all"],
    [{ tools: { sessions: { visibility: " Agent " } } }, false, "agent"],
    [{ tools: { sessions: { visibility: "SeLf" } } }, false, "self"],
    [{ tools: { sessions: { visibility: "ALL" } } }, true, "tree"],
    [{ tools: { sessions: { visibility: "a l l" } } }, false, "tree"],
    [{ tools: { sessions: { visibility: "self" } } }, false, "self"],
    [{ tools: { sessions: { visibility: "agent" } } }, false, "agent"],
    [{ tools: { sessions: { visibility: "all" } } }, false, "all"],
    [{ tools: { sessions: { visibility: "all" } } }, true, "tree"],
    [{ tools: { sessions: { visibility: "agent" } } }, true, "tree"],
    [{ tools: { sessions: { visibility: "self" } } }, true, "self"],
  ])("%j sandboxed=%s → %s", (cfg, sandboxed, expected) => {
    expect(resolveSessionVisibility(cfg, { sandboxed })).toBe(expected);
  });
  it("sandboxed must be a boolean", () => {
    expect(() => resolveSessionVisibility({}, { sandboxed: 1 as never })).toThrow(/sandboxed/);
  });
});

describe("level names in any case, agent ids exactly", () => {
  const row = { key: "agent:codex:acp:1", agentId: "codex" };
  it("the check's own visibility input takes any case, and reports the level it parsed", () => {
    for (const v of ["ALL", "All", " all ", "aLL"]) {
      expect(canSeeSessionRow({ ...ok, visibility: v as never, a2aPolicy: { enabled: true }, row })).toBe(true);
      const list = filterVisibleSessions([row], { ...ok, visibility: v as never, a2aPolicy: { enabled: true } });
      expect(list).toMatchObject({ scope: "all", requested: "all", rows: [row] });
    }
    expect(canSeeSessionRow({ ...ok, visibility: "TREE" as never, a2aPolicy: { enabled: true }, row })).toBe(false);
    expect(authorizeSessionAction({ ...ok, visibility: "Agent" as never, row: ok.row, action: "send" })).toEqual({
      allowed: true,
    });
  });
  it("agent-id globs stay case-sensitive (agent ids are normalized lower-case)", () => {
    const on = (allow: string[]) => ({
      ...ok,
      visibility: "all" as const,
      a2aPolicy: { enabled: true, allow: ["main", ...allow] },
      row,
    });
    expect(canSeeSessionRow(on(["codex"]))).toBe(true);
    expect(canSeeSessionRow(on(["code*"]))).toBe(true);
    expect(canSeeSessionRow(on(["Codex"]))).toBe(false);
    expect(canSeeSessionRow(on(["CODE*"]))).toBe(false);
  });
});

describe("resolveAgentToAgentPolicy", () => {
  it("missing config or section → disabled (fail closed)", () => {
    expect(resolveAgentToAgentPolicy(undefined)).toEqual({ enabled: false });
    expect(resolveAgentToAgentPolicy({})).toEqual({ enabled: false });
    expect(resolveAgentToAgentPolicy({ tools: {} })).toEqual({ enabled: false });
    expect(resolveAgentToAgentPolicy({ tools: { agentToAgent: {} } })).toEqual({ enabled: false });
  });
  it("reads enabled and allow", () => {
    expect(resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true } } })).toEqual({ enabled: true });
    const p = resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true, allow: ["main", "code*"] } } });
    expect(p).toEqual({ enabled: true, allow: ["main", "code*"] });
    expect(
      canSeeSessionRow({
        requesterSessionKey: ME,
        visibility: "all",
        a2aPolicy: p,
        row: { key: "agent:codex:1", agentId: "codex" },
      }),
    ).toBe(true);
  });
  it("mistyped fields throw naming the config path", () => {
    expect(() => resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: "yes" } } })).toThrow(
      /tools\.agentToAgent\.enabled/,
    );
    expect(() => resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true, allow: "*" } } })).toThrow(
      /tools\.agentToAgent\.allow/,
    );
    expect(() => resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true, allow: [1] } } })).toThrow(
      /tools\.agentToAgent\.allow\[0\]/,
    );
    expect(() => resolveAgentToAgentPolicy({ tools: "x" })).toThrow(/tools/);
    expect(() => resolveAgentToAgentPolicy("cfg")).toThrow(/cfg/);
  });
  it("does not alias the config's array", () => {
    const allow = ["main"];
    const p = resolveAgentToAgentPolicy({ tools: { agentToAgent: { enabled: true, allow } } });
    allow.push("*");
    expect(p.allow).toEqual(["main"]);
  });
});

describe("owner metadata", () => {
  it("buildSessionOwner fills the AcpSessionOwner fields; ownerSessionKey falls back to spawnedBy, parent, self", () => {
    const base = { sessionKey: "agent:codex:acp:1", agentId: "codex", gatewayInstanceId: "gw-1", createdAt: 1000 };
    expect(buildSessionOwner({ ...base, spawnedBy: ME })).toEqual({
      ...base,
      spawnedBy: ME,
      ownerSessionKey: ME,
      backend: "acpx",
    });
    expect(buildSessionOwner({ ...base, parentSessionKey: "p" }).ownerSessionKey).toBe("p");
    expect(buildSessionOwner({ ...base, spawnedBy: "s", ownerSessionKey: "o" }).ownerSessionKey).toBe("o");
    expect(buildSessionOwner(base).ownerSessionKey).toBe(base.sessionKey);
    const before = Date.now();
    const { createdAt: _c, ...noTime } = base;
    const o = buildSessionOwner(noTime);
    expect(o.createdAt).toBeGreaterThanOrEqual(before);
    expect(o.createdAt).toBeLessThanOrEqual(Date.now());
  });
  it("buildSessionOwner rejects bad fields by name", () => {
    const base = { sessionKey: "k", agentId: "a", gatewayInstanceId: "g" };
    expect(() => buildSessionOwner({ ...base, sessionKey: "" })).toThrow(/sessionKey/);
    expect(() => buildSessionOwner({ ...base, agentId: undefined } as never)).toThrow(/agentId/);
    expect(() => buildSessionOwner({ ...base, gatewayInstanceId: 3 } as never)).toThrow(/gatewayInstanceId/);
    expect(() => buildSessionOwner({ ...base, spawnedBy: "" })).toThrow(/spawnedBy/);
    expect(() => buildSessionOwner({ ...base, createdAt: Number.NaN })).toThrow(/createdAt/);
    expect(() => buildSessionOwner({ ...base, createdAt: -1 })).toThrow(/createdAt/);
  });
  it("a row built from buildSessionOwner is owned by its spawner across agents", () => {
    const owner = buildSessionOwner({
      sessionKey: "agent:codex:acp:9",
      agentId: "codex",
      gatewayInstanceId: "g",
      spawnedBy: ME,
    });
    const row = toSessionRowOwnership({ key: owner.sessionKey, agentId: owner.agentId, owner });
    expect(row).toEqual({ key: owner.sessionKey, agentId: "codex", ownerSessionKey: ME, spawnedBy: ME });
    expect(
      canSeeSessionRow({ requesterSessionKey: ME, visibility: "tree", a2aPolicy: { enabled: false }, row: row! }),
    ).toBe(true);
  });
  it("normalizeSessionOwner: fallback order, nested owner, well-typed values only", () => {
    expect(normalizeSessionOwner({ key: "k", agentId: "a", spawnedBy: "s", parentSessionKey: "p" })).toEqual({
      sessionKey: "k",
      agentId: "a",
      spawnedBy: "s",
      parentSessionKey: "p",
      ownerSessionKey: "s",
    });
    expect(normalizeSessionOwner({ sessionKey: "k", parentSessionKey: "p" }).ownerSessionKey).toBe("p");
    expect(
      normalizeSessionOwner({
        sessionKey: "k",
        leaseId: "L",
        owner: { ownerSessionKey: "o", agentId: "a", backend: "acpx", gatewayInstanceId: "g", createdAt: 5 },
      }),
    ).toEqual({
      sessionKey: "k",
      agentId: "a",
      ownerSessionKey: "o",
      backend: "acpx",
      gatewayInstanceId: "g",
      createdAt: 5,
    });
    expect(normalizeSessionOwner({ key: "k", ownerSessionKey: 4, createdAt: "yesterday", backend: "pty" })).toEqual({
      sessionKey: "k",
    });
    expect(() => normalizeSessionOwner(null)).toThrow(/row/);
  });
  it("a legacy row without owner fields is not owned, even when its key looks like a child of the requester", () => {
    const legacy = { key: `${ME}:acp:child`, agentId: "codex", pid: 1234, command: "codex-acp" };
    expect(normalizeSessionOwner(legacy).ownerSessionKey).toBeUndefined();
    const row = toSessionRowOwnership(legacy)!;
    expect(row).toEqual({ key: legacy.key, agentId: "codex" });
    expect(canSeeSessionRow({ requesterSessionKey: ME, visibility: "all", a2aPolicy: { enabled: false }, row })).toBe(
      false,
    );
  });
  it("toSessionRowOwnership returns null when key or agentId is unknown", () => {
    expect(toSessionRowOwnership({ key: "k" })).toBeNull();
    expect(toSessionRowOwnership({ agentId: "a" })).toBeNull();
  });
  it("normalizeSessionOwner does not mutate the row", () => {
    const row = Object.freeze({ key: "k", agentId: "a", owner: Object.freeze({ spawnedBy: "s" }) });
    expect(normalizeSessionOwner(row)).toMatchObject({ spawnedBy: "s", ownerSessionKey: "s" });
  });
});
