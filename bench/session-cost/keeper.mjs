// The keeper's private memory (one keeper per gateway and state dir) beside
// an idle bare node's, started at the bench's start and read side by side
// after the scale row's idle window (issue 50).
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { check, printTable } from "../lib.mjs";
import { kb, privateKb } from "./proc.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** the keeper's private memory over an idle bare node's (issue 50) */
const TARGET_KEEPER = 1.25;

/**
 * An idle bare `node` waiting on its stdin, as the keeper waits on its
 * lifeline, started beside the run's first keepers: both are measured after
 * the same long idle, once V8 has given back what its start left behind.
 */
export function bareNode() {
  const child = spawn(process.execPath, ["-e", "process.stdin.resume()"], {
    stdio: ["pipe", "ignore", "ignore"],
    env: { PATH: process.env.PATH ?? "" },
  });
  // for comparison, the keeper as tsc leaves it (one ESM file per module), idle on a state dir that does not exist
  const cfg = {
    stateDir: join(tmpdir(), "proclease-bench-no-such-dir"),
    gatewayInstanceId: "bench",
    gatewayPid: process.pid,
    holder: "bench",
    graceMs: 0,
  };
  const esm = spawn(process.execPath, [join(root, "dist/ownership/keeper/keeper-main.js"), JSON.stringify(cfg)], {
    stdio: ["pipe", "ignore", "ignore"],
    env: { PATH: process.env.PATH ?? "" },
  });
  esm.stdin.on("error", () => undefined);
  return {
    pid: child.pid,
    esmPid: esm.pid,
    stop: () => {
      child.kill("SIGKILL");
      esm.stdin.end("stop\n");
    },
  };
}

/** The keepers this process started (keeper.ts): its children running the keeper's entry. */
function keeperPids() {
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, "utf8");
      if (Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]) !== process.pid) continue;
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").includes("keeper-main")) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** The keeper's private memory beside the idle bare node's, side by side now. */
export function keeperMemory(bare, checks, quick) {
  const keepers = keeperPids()
    .filter((pid) => pid !== bare.esmPid)
    .map((pid) => privateKb(pid))
    .filter((v) => v !== null);
  const node = privateKb(bare.pid);
  const esm = privateKb(bare.esmPid);
  const k = keepers.length ? Math.max(...keepers) : NaN;
  printTable("the keeper (one per gateway and state dir) beside an idle bare node, side by side", [
    {
      keepers: keepers.length,
      "keeper private (the largest)": kb(k),
      "idle bare node private": node === null ? "-" : kb(node),
      "keeper / bare node": `${(k / node).toFixed(2)}×`,
      "the same keeper unbundled (tsc's ESM files)": esm === null ? "-" : `${kb(esm)} (${(esm / node).toFixed(2)}×)`,
    },
  ]);
  // the quick run reads both sooner after their start, before V8's idle shrink has always run
  checks.push(
    check(
      `keeper private / idle bare node private (smaps_rollup, side by side)${quick ? ", regression guard" : ""}`,
      k / (node ?? NaN),
      "<=",
      quick ? 1.5 : TARGET_KEEPER,
    ),
  );
}
