/**
 * The keeper process (keeper.ts starts it; keeper-reap.ts is what it does).
 *
 *   node keeper-main.js '<KeeperConfig as JSON>'
 *
 * stdin is the lifeline: "stop" on it means the gateway is ending it on
 * purpose (exit, do nothing); EOF without it means the gateway is gone
 * (exit, crash, SIGKILL), and the keeper reaps. It prints nothing (its
 * stdout and stderr are not read); its report goes to the state dir.
 *
 * First of all it makes itself non-dumpable: its /proc files then belong to
 * root, so an agent of the gateway's uid cannot read its environment (which
 * keeper.ts already scrubbed) or memory, nor ptrace it. Where that cannot be
 * done (no addon, not Linux) it runs on: the scrubbed environment holds no
 * secret either way.
 */
import { makeProcessNonDumpable } from "../../facts/dumpable.js";
import { getProcessFacts } from "../../facts/get.js";
import type { KeeperConfig } from "./keeper.js";
import { keeperReap } from "./keeper-reap.js";

/** a keeper that cannot finish (a hung file system) must not outlive its purpose forever */
const HARD_DEADLINE_MS = 120_000;

function parseConfig(text: string | undefined): KeeperConfig {
  const c = JSON.parse(text ?? "") as Partial<KeeperConfig>;
  const ok =
    typeof c.stateDir === "string" &&
    c.stateDir.startsWith("/") &&
    typeof c.gatewayInstanceId === "string" &&
    typeof c.holder === "string" &&
    Number.isInteger(c.gatewayPid) &&
    Number.isInteger(c.graceMs) &&
    (c.graceMs as number) >= 0;
  if (!ok) throw new TypeError("keeper: argv[2] must be {stateDir, gatewayInstanceId, gatewayPid, holder, graceMs}");
  return c as KeeperConfig;
}

makeProcessNonDumpable();
const cfg = parseConfig(process.argv[2]);
let stopped = false;
let acting = false;
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  if (!acting && chunk.includes("stop")) {
    stopped = true;
    process.exit(0);
  }
});
const act = () => {
  if (stopped || acting) return;
  acting = true;
  setTimeout(() => process.exit(3), HARD_DEADLINE_MS).unref();
  keeperReap(cfg, getProcessFacts()).then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.stdin.on("end", act);
process.stdin.on("close", act);
process.stdin.on("error", act);
