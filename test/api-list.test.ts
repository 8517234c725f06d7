/**
 * The public surface, as the compiler sees it: docs/api.md is the generated
 * list of every name each package entry exports (scripts/api-list.mjs) with
 * the shipped page that documents it, the contract's names are all there, and
 * the lease movers and other internals are not.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { docPageOf, listExports, renderApiDoc, type ApiEntry } from "../scripts/api-list.mjs";
import { isShipped, packageFiles } from "../scripts/shipped-docs.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Every name shared/CONTRACT.md fixes (sections 1–8), by the entry that must export it. */
const CONTRACT: Record<string, readonly string[]> = {
  proclease: [
    // §1
    "FactsBackend",
    "ProcessFacts",
    "ProcessSnapshot",
    "ProcessInfo",
    "ProcessDetails",
    "getProcessFacts",
    // §2
    "GatewayInstanceId",
    "AcpxProcessLease",
    "loadOrCreateGatewayInstanceId",
    "OwnershipEvidence",
    "OwnedProcessTree",
    "verifyOwnedTree",
    // §3
    "AcpRuntimeEnsureInput",
    "AcpRuntimeHandle",
    "AcpSessionOwner",
    "AcpxLifecycleController",
    "createAcpxLifecycleController",
    "CloseReport",
    "ReapReport",
    // §4
    "SessionVisibility",
    "AgentToAgentPolicy",
    "SessionRowOwnership",
    "SessionAction",
    "canSeeSessionRow",
    // §5
    "SpawnInput",
    "ManagedRun",
    "ManagedRunStdin",
    "RunExit",
    "createProcessSupervisor",
    "killProcessTree",
    // §6
    "AcpxPromptTimeoutError",
    "AcpxPromptAbortError",
    "StateDirLockedError",
    "signalProcessTree",
    "resolveSessionVisibility",
    // §7
    "TurnStream",
    "TurnInput",
    "TurnResult",
    "PermissionHook",
    "ClientCapabilitiesOption",
    // §8
    "AcpxControllerDisposedError",
  ],
  "proclease/openclaw": ["createOpenClawAcpRuntime"],
};

/**
 * Never public: each moves a lease outside the lifecycle, signals without
 * the lifecycle's verification, or is plumbing a caller has no use for.
 */
const INTERNAL = [
  "applySettlement",
  "settleLease",
  "settleUnstarted",
  "reconcileLeases",
  "pendingSettlements",
  "openLeaseStore",
  "LeaseStore",
  "isLegalTransition",
  "killOwnedTree",
  "killStoppedPid",
  "killLeaseVerification",
  "recordRootIdentity",
  "acquireStateDirLock",
  "KeyedQueue",
  "BRACKETED_PASTE_START",
  "BRACKETED_PASTE_END",
  "signalUnreapedChild",
  "AcpClient",
  "installWrapper",
  "openSessionStore",
  "createRunRegistry",
  "parseReportLine",
];

describe("the public API", () => {
  let entries: ApiEntry[];
  beforeAll(() => {
    entries = listExports(ROOT);
  }, 120_000);
  const names = (specifier: string) =>
    new Set(entries.find((e) => e.specifier === specifier)?.names.map((n) => n.name));

  it("docs/api.md is the compiler's list (regenerate with `node scripts/api-list.mjs --write`)", () => {
    expect(readFileSync(join(ROOT, "docs/api.md"), "utf8")).toBe(renderApiDoc(entries));
  });

  it("exports every name the contract fixes", () => {
    for (const [specifier, fixed] of Object.entries(CONTRACT)) {
      const have = names(specifier);
      expect(have.size, specifier).toBeGreaterThan(0);
      expect(
        fixed.filter((n) => !have.has(n)),
        `missing from ${specifier}`,
      ).toEqual([]);
    }
  });

  it("exports no lease mover and no internal from either entry", () => {
    for (const specifier of Object.keys(CONTRACT)) {
      const have = names(specifier);
      expect(
        INTERNAL.filter((n) => have.has(n)),
        `internals in ${specifier}`,
      ).toEqual([]);
    }
  });

  it("every root value is a name a caller can see at run time (the built module agrees with the list)", async () => {
    const built = (await import("../src/index.js")) as Record<string, unknown>;
    const values = entries
      .find((e) => e.specifier === "proclease")!
      .names.filter((n) => n.kind === "value")
      .map((n) => n.name);
    expect(Object.keys(built).sort()).toEqual([...values].sort());
  });
});

describe("where each name is documented", () => {
  it("every name's page is a shipped user page (never a src/ path), and every name of the root has one", () => {
    const entries = listExports(ROOT);
    const doc = renderApiDoc(entries);
    expect(doc).not.toMatch(/`src\//);
    for (const e of entries)
      for (const n of e.names) {
        const page = docPageOf(n.from).replace(/#.*/, "");
        expect(existsSync(join(ROOT, "docs", page)), `${n.name}: docs/${page}`).toBe(true);
        expect(isShipped(`docs/${page}`, packageFiles(ROOT)), `${n.name}: docs/${page} is shipped`).toBe(true);
      }
  }, 120_000);

  it("a module no row covers fails the listing, naming it", () => {
    expect(() => docPageOf("src/newpart/thing.ts")).toThrow(/src\/newpart\/thing\.ts has no page in DOC_PAGES/);
  });
});
