/**
 * Runs the stand-in gateway (intake-gateway.mjs) in a process of its own
 * against a hostile agent and collects what it measured, and its stderr
 * (everything the gateway, the SDK included, wrote there). Its heap is
 * capped, so a gateway that buffers without bound dies of it (and the test
 * says so) instead of taking the machine's memory.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { DIST_ACPX, ROOT, tempStateDir, trackChild, trackLease } from "../acpx/controller-helpers.js";

const GATEWAY = join(ROOT, "test/adversarial/intake-gateway.mjs");
/** the stand-in gateway's heap cap (MB): far above the 256 MB the tests allow, far below the machine's memory */
const HEAP_CAP_MB = 1024;
/** stderr kept for inspection; the rest is only counted */
const STDERR_KEPT = 1024 * 1024;

export interface IntakeStatusSeen {
  requestsInFlight: number;
  requestBytesInFlight: number;
  requestHolds: number;
  queuedAnswerBytes: number;
  answerHolds: number;
  refused: Record<string, number>;
  logLinesDropped: number;
}

export interface GatewayResult {
  conditionMet: boolean;
  untilMs: number;
  /** the worst loop block while flooded (lateness capped by the process's CPU time meanwhile) */
  floodLoopMs: number;
  floodWallLateMs: number;
  closeLoopMs: number;
  closeWallLateMs: number;
  closeMs: number;
  closeOutcome: string;
  leaseState: string;
  heapGrowthMb: number;
  rssGrowthMb: number;
  promptOutcome: string;
  intake: IntakeStatusSeen | null;
  stdoutHeld: boolean;
  terminals: number;
  leases: { sessionKey: string; state: string }[];
}

export interface GatewayRun {
  /** undefined when the gateway died before reporting (out of memory, a crash) */
  result: GatewayResult | undefined;
  exit: { code: number | null; signal: NodeJS.Signals | null };
  stderr: string;
  stderrBytes: number;
}

export interface GatewayConfig {
  command: string[];
  options?: Record<string, unknown>;
  hook?: "none" | "never";
  prompt?: string;
  until: { refusedAtLeast?: number; held?: boolean; terminalsAtLeast?: number };
  deadlineMs: number;
  settleMs?: number;
}

export async function runGateway(label: string, cfg: GatewayConfig): Promise<GatewayRun> {
  const stateDir = tempStateDir(label);
  const child = trackChild(
    spawn(
      process.execPath,
      [
        "--expose-gc",
        `--max-old-space-size=${HEAP_CAP_MB}`,
        GATEWAY,
        JSON.stringify({ dist: DIST_ACPX, stateDir, hook: "none", ...cfg }),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    ),
  );
  let stderr = "";
  let stderrBytes = 0;
  child.stderr!.on("data", (d: Buffer) => {
    stderrBytes += d.length;
    if (stderr.length < STDERR_KEPT) stderr += d.toString("utf8");
  });
  const exited = new Promise<GatewayRun["exit"]>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let result: GatewayResult | undefined;
  for await (const line of createInterface({ input: child.stdout! })) {
    // the controller's logger is console: its info lines share stdout with the report
    if (!line.startsWith('{"type":')) continue;
    const ev = JSON.parse(line) as { type: string; leaseId?: string } & GatewayResult;
    if (ev.type === "ready") trackLease(ev.leaseId!);
    if (ev.type === "result") result = ev;
  }
  const exit = await exited;
  return { result, exit, stderr, stderrBytes };
}

/** What a run came to, for an assertion message. */
export function describeRun(run: GatewayRun): string {
  const r = run.result;
  if (r === undefined)
    return `the gateway died before reporting (exit ${run.exit.code}, signal ${run.exit.signal}); stderr tail: ${run.stderr.slice(-2000)}`;
  return JSON.stringify({ ...r, stderrBytes: run.stderrBytes });
}
