/**
 * The legacy path, for session records written before leases existed
 * ({sessionKey, pid, command, wrapperPath?}). It fails closed (
 * "Note di compatibilità"): a live root is required; wrapper-root ownership
 * when a wrapper path is recorded; a command match otherwise. Stored pid
 * metadata alone never leads to a signal. Anything unverifiable → no tree,
 * and the process is left as it is. In particular:
 * - a stored command that cannot be tokenised faithfully is never a match,
 *   and then nothing verifies (not even a wrapper-root match: the shared
 *   wrapper shim is what every current session's wrapper runs too);
 * - a live root carrying OPENCLAW_ACPX_LEASE_ID in its environment belongs to
 *   a LEASED session (the pid was reused by a current wrapper or adapter):
 *   mismatch; a root whose environment cannot be read cannot be told apart
 *   from one: unknown, left alone.
 *
 * The returned tree's `lease` is SYNTHESISED, not read from the store:
 *   leaseId "legacy-<sha256(sessionKey) prefix>", gatewayInstanceId "",
 *   wrapperRoot/wrapperPath as given ("" when absent), rootPid = record.pid,
 *   commandHash = hash of the live argv, rootStartTime = the live start time
 *   observed now, startedAt 0, state "open". It must never be written to the
 *   lease store. Members come from parent links only: a legacy record has no
 *   verified group and no env marker.
 */
import { compareIdentity, isKnownStartTime } from "../../facts/identity.js";
import { isAlive } from "../../facts/liveness.js";
import { createHash } from "node:crypto";
import { realpath } from "node:fs/promises";
import { basename, isAbsolute, resolve } from "node:path";
import type { ProcessDetails, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { collectTree } from "./collect.js";
import { computeCommandHash, tokenizeShellCommand } from "../leases/command-hash.js";
import { isUnder } from "../leases/fs-safe.js";
import { checkSignalTarget } from "../../facts/guards.js";
import { evidence as row, rootRows } from "./evidence.js";
import {
  LEASE_ENV_KEY,
  type EvidenceCheck,
  type EvidenceCode,
  type OwnedProcessTree,
  type OwnershipEvidence,
  type ProcessLease,
} from "../leases/types.js";

export interface LegacySessionRecord {
  sessionKey: string;
  pid: number;
  /** the stored command: an argv, or a shell-quoted string (tokenised POSIX-style before comparing) */
  command: string | readonly string[];
  wrapperPath?: string;
}

export async function verifyLegacyRecord(
  record: LegacySessionRecord,
  facts: ProcessFacts,
  opts: { wrapperRoot?: string; snapshot?: ProcessSnapshot },
): Promise<{ tree: OwnedProcessTree | null; evidence: OwnershipEvidence[] }> {
  const evidence: OwnershipEvidence[] = [];
  const failWith = (r: OwnershipEvidence) => {
    evidence.push(r);
    return { tree: null, evidence };
  };
  const fail = (check: EvidenceCheck, result: OwnershipEvidence["result"], code: EvidenceCode, detail: string) =>
    failWith(row(check, result, code, detail));
  if (typeof record !== "object" || record === null)
    return fail("legacy-record", "unknown", "invalid-record", "not an object");
  const pid = record.pid;
  if (typeof pid !== "number" || !Number.isInteger(pid))
    return fail("legacy-record", "unknown", "invalid-record", "pid is not an integer");
  const guard = checkSignalTarget(pid);
  if (!guard.allowed) return fail("root-pid", "mismatch", "refused-by-guard", `refused by guard: ${guard.reason}`);
  const stored = storedArgv(record.command);
  if (stored === null)
    return fail(
      "command",
      "unknown",
      "untokenisable-command",
      "stored command cannot be tokenised faithfully: nothing to match, left alone",
    );
  const wrapperPath =
    typeof record.wrapperPath === "string" && record.wrapperPath !== "" ? record.wrapperPath : undefined;
  if (facts.identityStrength === "none") return failWith(rootRows.backendVerifiesNothing(facts.backend));

  const live = await liveRoot(pid, facts, opts?.snapshot, evidence);
  if ("failed" in live) return failWith(live.failed);
  const { snapshot, root, d } = live;

  const marker = leaseMarkerEvidence(d);
  if (marker.result !== "match") return failWith(marker);
  evidence.push(marker);

  // command: compared whenever both sides are known; required when no wrapper is recorded
  const command = commandEvidence(stored, d);
  evidence.push(command);
  if (command.result === "mismatch") return { tree: null, evidence };

  if (wrapperPath !== undefined) {
    const wrapper = await wrapperEvidence(wrapperPath, opts?.wrapperRoot, d);
    if (wrapper.result !== "match")
      return fail(wrapper.check, wrapper.result, wrapper.code, wrapper.detail ?? wrapper.result);
    evidence.push(wrapper);
  } else if (command.result !== "match") {
    return { tree: null, evidence };
  }

  const lease = synthesisedLease(record, opts?.wrapperRoot, wrapperPath, root, d);
  return { tree: { lease, root, members: collectTree(snapshot, root), evidence }, evidence };
}

/**
 * The live root a record names, seen in the snapshot and then inspected (its
 * lease marker asked for) and found the same process; or the row that ends
 * the verification.
 */
async function liveRoot(
  pid: number,
  facts: ProcessFacts,
  given: ProcessSnapshot | undefined,
  evidence: OwnershipEvidence[],
): Promise<{ snapshot: ProcessSnapshot; root: ProcessInfo; d: ProcessDetails } | { failed: OwnershipEvidence }> {
  let snapshot: ProcessSnapshot;
  try {
    snapshot = given ?? (await facts.snapshot());
  } catch (e) {
    return { failed: rootRows.processListUnavailable(e) };
  }
  const root = snapshot.processes.get(pid);
  if (!root) return { failed: rootRows.absent(pid) };
  if (!isAlive(root)) return { failed: rootRows.zombie(pid) };
  evidence.push(row("root-alive", "match", "alive"));

  let d;
  try {
    d = await facts.inspect(pid, { envKeys: [LEASE_ENV_KEY] });
  } catch {
    return { failed: rootRows.inspectFailed() };
  }
  if (d === null) return { failed: rootRows.exitedDuringVerification(pid) };
  // A start time neither read gives is left to the checks that follow: a legacy record stores none to
  // hold it against, and the signal path refuses a process it cannot compare (facts/signal.ts). One read
  // with a start time and one without are not the same process's.
  if (compareIdentity(d, root) === "different" || isKnownStartTime(d.startTime) !== isKnownStartTime(root.startTime))
    return { failed: rootRows.reusedDuringVerification() };
  return { snapshot, root, d };
}

/** A legacy session predates leases: a root with a lease id is a current session's process. */
function leaseMarkerEvidence(d: ProcessDetails): OwnershipEvidence {
  const leaseEnv = d.env?.[LEASE_ENV_KEY];
  if (typeof leaseEnv === "string")
    return row(
      "lease-env",
      "mismatch",
      "carries-lease-marker",
      `the root carries ${LEASE_ENV_KEY}: it belongs to a leased session, not a legacy one`,
    );
  if (d.envReadable !== true)
    return row(
      "lease-env",
      "unknown",
      "not-readable",
      "environment not readable: a leased session's process cannot be ruled out",
    );
  return row(
    "lease-env",
    "match",
    "no-lease-marker",
    `no ${LEASE_ENV_KEY} in the root's environment (as a legacy process has none)`,
  );
}

/** The live argv against the stored command (sameArgv). */
function commandEvidence(stored: readonly string[], d: ProcessDetails): OwnershipEvidence {
  if (d.argv === null || d.argv.length === 0)
    return row("command", "unknown", "not-readable", "live argv not readable");
  return sameArgv(stored, d.argv)
    ? row("command", "match", "same-command")
    : row("command", "mismatch", "command-differs", "live argv differs from the stored command");
}

/** The tree's synthesised lease (the header says what each field holds, and that it is never stored). */
function synthesisedLease(
  record: LegacySessionRecord,
  wrapperRoot: string | undefined,
  wrapperPath: string | undefined,
  root: ProcessInfo,
  d: ProcessDetails,
): ProcessLease {
  return {
    kind: "acpx",
    leaseId: `legacy-${createHash("sha256").update(String(record.sessionKey)).digest("hex").slice(0, 32)}`,
    gatewayInstanceId: "",
    sessionKey: String(record.sessionKey),
    wrapperRoot: wrapperRoot ?? "",
    wrapperPath: wrapperPath ?? "",
    rootPid: record.pid,
    commandHash: d.argv && d.argv.length > 0 ? computeCommandHash(d.argv) : "",
    startedAt: 0,
    state: "open",
    rootStartTime: String(root.startTime),
  };
}

/** Is the live root the recorded wrapper (its argv[1] or its executable), under wrapperRoot? */
async function wrapperEvidence(
  wrapperPath: string,
  wrapperRoot: string | undefined,
  d: ProcessDetails,
): Promise<OwnershipEvidence> {
  const ev = (result: OwnershipEvidence["result"], code: EvidenceCode, detail: string): OwnershipEvidence =>
    row("wrapper-root", result, code, detail);
  if (typeof wrapperRoot !== "string" || !isAbsolute(wrapperRoot) || !isAbsolute(wrapperPath)) {
    return ev(
      "unknown",
      "no-wrapper-recorded",
      "a wrapper is recorded but no absolute wrapperRoot/wrapperPath to check it against",
    );
  }
  const rootDir = await real(wrapperRoot);
  const wrapper = await real(wrapperPath);
  if (!isUnder(wrapper, rootDir))
    return ev("mismatch", "wrapper-outside-root", "the recorded wrapper is not under wrapperRoot");
  const arg1 = d.argv?.[1];
  const exe = d.exePath !== null && !d.exePath.endsWith(" (deleted)") ? d.exePath : null;
  const argMatch = arg1 !== undefined && isAbsolute(arg1) && (await real(arg1)) === wrapper;
  const exeMatch = exe !== null && (await real(exe)) === wrapper;
  if (argMatch || exeMatch)
    return ev(
      "match",
      "is-the-wrapper",
      argMatch ? "argv[1] is the recorded wrapper" : "executable is the recorded wrapper",
    );
  if (d.argv === null && d.exePath === null) return ev("unknown", "not-readable", "argv and exe not readable");
  return ev("mismatch", "not-the-wrapper", "the live root is not the recorded wrapper");
}

function storedArgv(command: unknown): string[] | null {
  if (typeof command === "string") return tokenizeShellCommand(command);
  if (Array.isArray(command) && command.length > 0 && command.every((a) => typeof a === "string")) return [...command];
  return null;
}

/** Exact, or equal apart from argv[0] naming the same program by path vs bare name. */
function sameArgv(stored: readonly string[], live: readonly string[]): boolean {
  if (stored.length !== live.length || stored.length === 0) return false;
  for (let i = 1; i < stored.length; i++) if (stored[i] !== live[i]) return false;
  const a = stored[0]!;
  const b = live[0]!;
  return a === b || ((!a.includes("/") || !b.includes("/")) && basename(a) === basename(b));
}

function real(p: string): Promise<string> {
  return realpath(p).catch(() => resolve(p));
}
