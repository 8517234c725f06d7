// After a sequence is judged, the runner leaves the host as it found it,
// whatever the library did or did not end: foreign processes an agent moved
// into its cgroup go back to their own, everything of the sequence still
// alive (oracle.mjs's evidence) is SIGKILLed by pid and start time, and its
// cgroups are killed and removed, deepest first.
import { existsSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { killSame } from "../soak/proc.mjs";
import { leftovers } from "./oracle.mjs";
import { restoreCgroup } from "./sentinels.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function subdirsDeepestFirst(dir) {
  const out = [];
  const walk = (d) => {
    let entries = [];
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) walk(join(d, e.name));
    out.push(d);
  };
  walk(dir);
  return out;
}

const populated = (d) => {
  try {
    return /^populated 1$/m.test(readFileSync(join(d, "cgroup.events"), "utf8"));
  } catch {
    return false;
  }
};

/** cgroup.kill, wait for populated 0 (bounded), rmdir: for `dir` and every cgroup below it. */
export async function removeCgroupTree(dir) {
  // only ever below a proclease root: a path a lease file names is the code under test's word
  if (!dir || !/\/proclease\/[^/]+/.test(dir) || !existsSync(dir)) return;
  for (const d of subdirsDeepestFirst(dir)) {
    try {
      writeFileSync(join(d, "cgroup.kill"), "1");
    } catch {
      // no cgroup.kill (an old kernel) or gone: the processes were killed one by one
    }
    for (let i = 0; i < 40 && populated(d); i++) await sleep(50);
    try {
      rmdirSync(d);
    } catch {
      // still populated, or gone
    }
  }
}

/**
 * Ends everything `who` names (oracle.mjs leftovers), with the `foreign`
 * watched processes put back in their cgroups first; then removes `cgroupDirs`.
 * Answers how many processes it killed.
 */
export async function cleanupSequence({ who, foreign, mount, cgroupDirs }) {
  for (const w of foreign) restoreCgroup(w, mount);
  let killed = 0;
  let cleanSince = Date.now();
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const rows = leftovers(who);
    for (const r of rows) if (killSame(r.pid, r.startTime)) killed++;
    if (rows.length) cleanSince = Date.now();
    else if (Date.now() - cleanSince >= 200) break;
    await sleep(50);
  }
  for (const d of cgroupDirs) await removeCgroupTree(d);
  return killed;
}
