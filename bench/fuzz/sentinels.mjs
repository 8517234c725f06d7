// Processes that are NOT any sequence's, watched for harm: an unrelated
// process (the soak's hold.mjs, in a session of its own, logging every
// signal it catches), each long-lived gateway's innocent session (its
// wrapper and agent; the agent logs its signals) and the gateways
// themselves. After each sequence the runner asks: still the same live
// process (pid and start time), not stopped, in the cgroup it started in,
// and no signal logged since the last look. Anything else is harm, due to a
// sequence that ran since that look.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stat } from "../soak/proc.mjs";
import { cgroupOf } from "./oracle.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * One watched process: { name, pid, startTime, cgroup, log?, logOffset,
 * alsoAllowed }. `alsoAllowed`: a cgroup it may move to without harm (a
 * gateway's own documented move into <its cgroup>/proclease/_gateway).
 */
export function watch(name, pid, log = null, alsoAllowed = null) {
  const st = stat(pid);
  return { name, pid, startTime: st?.startTime ?? null, cgroup: cgroupOf(pid), log, logOffset: 0, alsoAllowed };
}

/** New lines of the watched process's signal log since the last look (the offset moves on). */
function newSignals(w) {
  if (!w.log) return [];
  let text = "";
  try {
    text = readFileSync(w.log, "utf8");
  } catch {
    return [];
  }
  const fresh = text.slice(w.logOffset);
  w.logOffset = text.length;
  return fresh
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return { what: l };
      }
    })
    .filter((e) => String(e.what).startsWith("signal"));
}

/**
 * What harmed `w` since the last look: [] when nothing did. A dead, replaced
 * or stopped process is reported once (its owner replaces it); a move is
 * undone by restoreCgroup and a signal is consumed from the log, so either
 * is reported again only when it happens again.
 */
export function harm(w) {
  if (w.spent) return [];
  const out = [];
  const st = stat(w.pid);
  if (st === null || st.state === "Z" || st.state === "X") out.push(`${w.name} (pid ${w.pid}) is dead`);
  else if (st.startTime !== w.startTime) out.push(`${w.name} (pid ${w.pid}) was replaced by another process`);
  else {
    if (st.state === "T" || st.state === "t") out.push(`${w.name} (pid ${w.pid}) is stopped`);
    const cg = cgroupOf(w.pid);
    if (cg !== w.cgroup && cg !== w.alsoAllowed)
      out.push(`${w.name} (pid ${w.pid}) was moved from cgroup ${w.cgroup} to ${cg}`);
  }
  if (out.some((h) => / is (dead|stopped)$| replaced /.test(h))) w.spent = true;
  for (const s of newSignals(w)) out.push(`${w.name} (pid ${w.pid}) caught ${s.what}`);
  return out;
}

/** Puts a watched process that was moved back into its own cgroup (so cleanups and later sequences do not take it along). */
export function restoreCgroup(w, mount) {
  const cg = cgroupOf(w.pid);
  if (cg === null || cg === w.cgroup || cg === w.alsoAllowed || !mount || stat(w.pid)?.startTime !== w.startTime)
    return;
  try {
    writeFileSync(join(mount, w.cgroup, "cgroup.procs"), String(w.pid));
  } catch {
    // gone, or its cgroup is: the harm was reported
  }
}

/** The unrelated sentinel: hold.mjs in a session of its own, exiting by itself once the runner is gone. */
let started = 0;
export async function startUnrelated(holdPath, dir) {
  const log = join(dir, `unrelated-signals-${++started}.log`);
  const child = spawn(process.execPath, [holdPath], {
    detached: true,
    stdio: "ignore",
    env: { ...process.env, SOAK_HOLD_LOG: log, SOAK_HOLD_EXIT_ORPHANED: "1" },
  });
  child.unref();
  for (let i = 0; i < 300; i++) {
    try {
      if (readFileSync(log, "utf8").includes("started")) break;
    } catch {
      // not yet
    }
    await sleep(50);
  }
  return { child, w: watch("unrelated sentinel", child.pid, log) };
}
