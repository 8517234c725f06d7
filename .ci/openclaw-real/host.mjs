// What the real-gateway check reads off the host, never through the gateway:
// the processes that carry a proclease lease marker (from /proc/PID/environ,
// as root), the lease records (`proclease leases --json`, read-only, run
// from the checkout), and whether a lease's cgroup folder still exists.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const LEASE_KEY = "OPENCLAW_ACPX_LEASE_ID=";
const INSTANCE_KEY = "OPENCLAW_GATEWAY_INSTANCE_ID=";

/** Every live process carrying a lease marker: { pid, leaseId, instanceId, comm }. */
export function markedProcesses() {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let env;
    try {
      env = readFileSync(`/proc/${name}/environ`, "latin1").split("\0");
    } catch {
      continue; // gone mid-scan, or a kernel thread
    }
    const lease = env.find((e) => e.startsWith(LEASE_KEY));
    if (lease === undefined) continue;
    let stat = "";
    try {
      stat = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue;
    }
    if (/\) Z /.test(stat)) continue; // a zombie runs nothing
    const instance = env.find((e) => e.startsWith(INSTANCE_KEY));
    out.push({
      pid: Number(name),
      leaseId: lease.slice(LEASE_KEY.length),
      instanceId: instance?.slice(INSTANCE_KEY.length),
      comm: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
    });
  }
  return out;
}

export const alive = (pid) => existsSync(`/proc/${pid}`) && !/\) Z /.test(safeRead(`/proc/${pid}/stat`));

function safeRead(p) {
  try {
    return readFileSync(p, "latin1");
  } catch {
    return "";
  }
}

/** `proclease leases --json` on the state dir: the records and their live verdicts. */
export function leases(root, stateDir) {
  const out = execFileSync(
    process.execPath,
    [join(root, "dist/cli/main.js"), "leases", "--state-dir", stateDir, "--json"],
    { encoding: "utf8" },
  );
  return JSON.parse(out).leases;
}

/** The lease whose session key ends with OpenClaw's session key (the backend prefixes its own). */
export function leaseOf(all, sessionKey) {
  const mine = all.filter((l) => l.sessionKey.endsWith(sessionKey)).sort((a, b) => a.startedAt - b.startedAt);
  return mine.at(-1);
}

export const cgroupLeft = (lease) => lease.cgroup?.path !== undefined && existsSync(lease.cgroup.path);
