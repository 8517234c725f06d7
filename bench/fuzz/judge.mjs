// The invariants, judged for one sequence from the gateway's step reports
// and the runner's own reads (oracle.mjs). A failure is { inv, detail }.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { leaseFiles, leftoversUntil } from "./oracle.mjs";

const MIB = 1024 * 1024;
export const CLOSE_BOUND_MS = 10_000;
export const LOG_BYTES_LIMIT = MIB;
/**
 * An ensure's bound past its handshake timeout. A failed ensure ends its
 * attempt as a close ends a session (verify, TERM, grace, KILL, verify
 * again, drain the cgroup, write the lease) before it rejects, so it is
 * held to a close's bound; a fixed 2 s over the grace failed on a 2-core
 * host where another session's agent had forked two thousand processes
 * that every verification of the host reads.
 */
export const ENSURE_AFTER_HANDSHAKE_MS = CLOSE_BOUND_MS;

export const INVARIANTS = {
  "gateway-died": "the gateway process died",
  "gateway-crash": "an uncaught exception or unhandled rejection in the gateway",
  rss: "the gateway's RSS grew more than 256 MB",
  "loop-block": "the gateway's event loop was blocked more than 250 ms (CPU of its main thread)",
  "stderr-flood": "the gateway's stderr grew more than 1 MiB per sequence running",
  "stderr-escape": "a raw ESC byte reached the gateway's stderr",
  "stderr-forged-line": "an agent's text became a log line of its own on the gateway's stderr",
  "ensure-unbounded": "ensureSession outlived handshakeTimeoutMs + 10 s (a close's bound for its failed attempt)",
  "ensure-after-dispose": "an ensure under way when dispose()/shutdown() began succeeded",
  "call-unbounded": "sessionStatus, a turn or an innocent prompt did not settle within its bound",
  "close-slow": "closeSession, shutdown() or dispose() took more than 10 s",
  "close-rejected": "closeSession or shutdown() rejected",
  "close-left-processes": "a process of the session was alive 10 s after its close began",
  "shutdown-left-processes": "a process of the sequence was alive 10 s after shutdown() began",
  "lease-unsettled": "a lease was not closed or lost 10 s after its close (or shutdown)",
  "cgroup-left": "a lease cgroup or the instance's cgroup folder was left",
  "foreign-harmed": "a process outside the sequence was signalled, killed, stopped or moved",
  "untyped-error": "an API call rejected with an error that is not the library's (RangeError, TypeError, …)",
  "terminal-limit": "more terminals were created than maxTerminals",
  "wrapper-integrity": "a later session ran a wrapper the agent had replaced",
  "secret-exposed": "the envRemove'd secret was readable in a process other than the gateway",
  "log-flood": "the controller's logger got more than 1 MiB for one sequence",
  "log-injection": "the controller's logger printed an agent's raw control characters or forged line",
  "innocent-harmed": "an innocent session of the same controller failed or did not close cleanly",
  "crash-left": "after a gateway SIGKILL, something was left or a lease unsettled after grace + 10 s",
};

const fail = (inv, detail) => ({ inv, detail });
const rowText = (rows) =>
  rows
    .slice(0, 6)
    .map((r) => `pid ${r.pid} [${r.why.join(",")}] state ${r.state} cgroup ${r.cgroup} argv ${JSON.stringify(r.argv)}`)
    .join("; ") + (rows.length > 6 ? `; … ${rows.length} in all` : "");

/** Failures a step report shows by itself. */
export function stepFailures(ev, seq) {
  const o = seq.opts;
  const out = [];
  const name = ev.step;
  if (name === "ensure" && ev.timedOut) out.push(fail("ensure-unbounded", `no answer after ${ev.ms} ms`));
  else if (name === "ensure" && ev.ms > o.handshakeTimeoutMs + ENSURE_AFTER_HANDSHAKE_MS)
    out.push(
      fail(
        "ensure-unbounded",
        `${ev.ok ? "resolved" : "rejected"} after ${ev.ms} ms (handshake timeout ${o.handshakeTimeoutMs}, grace ${o.graceMs})`,
      ),
    );
  if (["status", "turn", "innocent-prompt"].includes(name) && ev.timedOut)
    out.push(fail("call-unbounded", `${name} did not settle in ${ev.limitMs} ms`));
  if (/close$|^shutdown$|^dispose$/.test(name) && (ev.timedOut || ev.ms > CLOSE_BOUND_MS))
    out.push(fail("close-slow", `${name} ${ev.timedOut ? "did not settle" : "took"} ${ev.ms} ms`));
  if (name === "innocent-ensure" && !ev.ok)
    out.push(fail("innocent-harmed", `a later session's ensure failed: ${ev.error?.name}: ${ev.error?.message}`));
  if (name === "innocent-prompt" && !ev.ok)
    out.push(fail("innocent-harmed", `a later session's prompt failed: ${ev.error?.name}: ${ev.error?.message}`));
  if (name === "innocent-close" && ev.ok && ev.outcome !== "closed")
    out.push(fail("innocent-harmed", `a later session's close answered ${ev.outcome}: ${ev.detail}`));
  return out;
}

async function leaseSettledBy(stateDir, leaseId, deadline) {
  for (;;) {
    const l = leaseFiles(stateDir).leases.find((x) => x.leaseId === leaseId);
    if (l && (l.state === "closed" || l.state === "lost")) return null;
    if (Date.now() >= deadline) return l ?? { state: "missing" };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The gateway could have found this process by its markers: they are there and its uid may read them. */
function markersVisible(row, gatewayUid) {
  if (!row.why.includes("marker")) return false;
  if (gatewayUid === 0) return true;
  try {
    // a process that is another uid's, or not dumpable, has its environ owned by root
    return statSync(`/proc/${row.pid}/environ`).uid === gatewayUid;
  } catch {
    return false;
  }
}

/**
 * Splits leftovers into failures and the documented limit without
 * containment (no cgroup for the lease): a process whose markers the
 * gateway cannot read (cleared, or unreadable to its uid) and whose parent
 * link is gone cannot be found by anything the gateway has. An adapter's
 * escapee keeps its link through the wrapper (a subreaper) until the agent
 * SIGKILLs the wrapper; a terminal's has none once it double-forks (a
 * terminal's command is no subreaper). With containment on, nothing is
 * excused but an escapee written into the root cgroup where the boundary
 * does not hold.
 */
export function splitLimits(ex, rows) {
  const reports = agentReports(ex.dir);
  const linkLost = reports.some(
    (r) =>
      (r.what === "kill-wrapper" && r.signal === "SIGKILL") ||
      (r.what === "escapee" && r.killWrapper) ||
      r.what === "terminal-escapees",
  );
  // without nsdelegate a root agent's write into another cgroup succeeds (boundary.mjs): the escapee is out of reach
  if (
    ex.containment !== false &&
    ex.env.boundaryHeld === false &&
    reports.some((r) => r.what === "escapee" && r.rootCgroup)
  ) {
    const limits = rows.filter((r) => r.cgroup === "/");
    return { failing: rows.filter((r) => !limits.includes(r)), limits };
  }
  if (ex.containment !== false || !linkLost) return { failing: rows, limits: [] };
  const uid = ex.gw.profile === "nobody" ? 65534 : 0;
  const limits = rows.filter((r) => !markersVisible(r, uid));
  return { failing: rows.filter((r) => !limits.includes(r)), limits };
}

/** After a close: nothing of the session alive, its lease settled, by the close's start + 10 s. */
export async function closeFailures(ex, ev) {
  const deadline = ev.startedAt + CLOSE_BOUND_MS;
  const who = ex.whoFor(ev.what);
  const { failing: rows, limits } = splitLimits(ex, await leftoversUntil(who, deadline));
  ex.limits.push(...limits.map((r) => `${ev.what} close: ${rowText([r])}`));
  const out = [];
  if (rows.length) out.push(fail("close-left-processes", `${ev.what} close: ${rowText(rows)}`));
  const l = await leaseSettledBy(ex.stateDir, ev.leaseId, deadline);
  if (l) out.push(fail("lease-unsettled", `${ev.what} lease ${ev.leaseId} is ${l.state} 10 s after its close`));
  return out;
}

function agentReports(dir) {
  try {
    return readFileSync(join(dir, "agent-report.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

/** What the hostile agent reported that breaks an invariant by itself. */
export function reportFailures(ex) {
  const out = [];
  const reps = agentReports(ex.dir);
  const created = reps.filter((r) => r.what === "terminals").reduce((n, r) => n + r.created, 0);
  if (ex.seq.opts.terminal && created > ex.seq.opts.maxTerminals)
    out.push(fail("terminal-limit", `${created} terminals created, maxTerminals ${ex.seq.opts.maxTerminals}`));
  for (const r of reps.filter((x) => x.what === "secret-found" && !ex.gatewayPids.has(x.pid)))
    out.push(fail("secret-exposed", `pid ${r.pid} ${JSON.stringify(r.argv)} holds the removed secret in its environ`));
  if (reps.some((r) => r.what === "started" && r.secretInEnv))
    out.push(fail("secret-exposed", "the adapter's own environment holds the removed secret"));
  if (existsSync(join(ex.dir, "pwned")))
    out.push(
      fail(
        "wrapper-integrity",
        `a session ran the agent's wrapper: ${readFileSync(join(ex.dir, "pwned"), "utf8").trim()}`,
      ),
    );
  return out;
}

/** The sequence's end: everything gone, every lease settled, no cgroup left, the logger clean. */
export async function finalFailures(ex, done, deadline, prefix = "shutdown") {
  const out = [];
  const who = ex.whoFor("all");
  const { failing: rows, limits } = splitLimits(ex, await leftoversUntil(who, deadline));
  ex.limits.push(...limits.map((r) => `${prefix}: ${rowText([r])}`));
  if (rows.length)
    out.push(fail(prefix === "crash" ? "crash-left" : "shutdown-left-processes", `${prefix}: ${rowText(rows)}`));
  for (;;) {
    const { leases, quarantined } = leaseFiles(ex.stateDir);
    const open = leases.filter((l) => l.state !== "closed" && l.state !== "lost");
    if ((open.length === 0 && quarantined.length === 0) || Date.now() >= deadline) {
      for (const l of open)
        out.push(
          fail(
            prefix === "crash" ? "crash-left" : "lease-unsettled",
            `${prefix}: lease ${l.leaseId} (${l.key}) is ${l.state}`,
          ),
        );
      if (quarantined.length) out.push(fail("lease-unsettled", `quarantined lease files: ${quarantined.join(", ")}`));
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  let dirs = ex.cgroupDirs();
  while ((dirs = dirs.filter((d) => existsSync(d))).length && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 200));
  for (const d of dirs)
    out.push(fail(prefix === "crash" ? "crash-left" : "cgroup-left", `${prefix}: ${d} still exists`));
  const log = done?.log;
  if (log && log.bytes > LOG_BYTES_LIMIT)
    out.push(fail("log-flood", `${log.bytes} bytes in ${log.lines} logger lines`));
  if (log && (log.esc > 0 || log.forged > 0))
    out.push(fail("log-injection", `${log.esc} lines with raw control characters, ${log.forged} forged lines`));
  for (const u of done?.untyped ?? [])
    out.push(fail("untyped-error", `${u.step}: ${u.name}: ${u.message.slice(0, 300)}`));
  return out;
}
