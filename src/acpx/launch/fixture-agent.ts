/**
 * Where the package's scriptable ACP fixture agent is (fixtures/acp-agent/
 * agent.mjs, also exported as "proclease/fixture-agent"): run it as an
 * adapter, `[process.execPath, fixtureAgentPath(), ...knobs]`. It is a
 * program, not a module: importing it would start an agent on this
 * process's stdin/stdout. Its knobs are listed at the top of the file.
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export function fixtureAgentPath(): string {
  // dist/acpx/launch/fixture-agent.js → the package root
  return join(resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", ".."), "fixtures", "acp-agent", "agent.mjs");
}
