// What the fuzzer needs from the host, probed once: the cgroup2 mount, a
// python3 for non-dumpable processes, whether uid 65534 can run a gateway
// from this checkout (the nobody profile), and a run folder every uid can
// traverse.
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cgroup2Mount } from "./oracle.mjs";

const NOBODY = 65534;

function runsAs(uid, cmd, args) {
  const r = spawnSync(cmd, args, { uid, gid: uid, timeout: 30_000, encoding: "utf8" });
  return r.status === 0 ? null : (r.stderr || r.error?.message || `exit ${r.status}`).trim().split("\n")[0];
}

/** { mount, python (root), pythonNobody, nobody: null | why not, runDir } */
export function probeHost({ seed, distUrl }) {
  const mount = cgroup2Mount();
  const python =
    ["/usr/bin/python3", "/usr/local/bin/python3"].find((p) => runsAs(0, p, ["-c", "pass"]) === null) ?? null;
  let nobody = null;
  if (process.getuid() !== 0) nobody = "not root";
  else if (spawnSync("setpriv", ["--version"]).status !== 0) nobody = "setpriv(1) is not installed";
  else {
    const why = runsAs(NOBODY, process.execPath, [
      "--input-type=module",
      "-e",
      `await import(${JSON.stringify(distUrl)})`,
    ]);
    if (why) nobody = `uid 65534 cannot load the package from this checkout: ${why}`;
  }
  const pythonNobody = python && runsAs(NOBODY, python, ["-c", "pass"]) === null ? python : null;
  const runDir = mkdtempSync(join(tmpdir(), `proclease-fuzz-${seed}-`));
  // uid 65534's gateways, agents and terminals work below it
  chmodSync(runDir, 0o755);
  mkdirSync(join(runDir, "seqs"), { mode: 0o755 });
  chmodSync(join(runDir, "seqs"), 0o755);
  return { mount, python, pythonNobody, nobody, runDir };
}

/** A folder owned by `uid` (0755): a gateway's own, or its instance index. */
export function ownedDir(path, uid) {
  mkdirSync(path, { recursive: true, mode: 0o755 });
  chownSync(path, uid, uid);
  return path;
}

export const uidOf = (profile) => (profile === "nobody" ? NOBODY : 0);
