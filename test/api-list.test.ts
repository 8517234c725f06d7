/**
 * The public surface, as the compiler sees it: docs/api.md is the generated
 * list of every name each package entry exports (scripts/api-list.mjs), the
 * contract's names are all there, and the lease movers and other internals
 * are not.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { listExports, renderApiDoc, type ApiEntry } from "../scripts/api-list.mjs";

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
