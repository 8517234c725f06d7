#!/usr/bin/env node
// After the acpx types split (connection/types.ts, sessions/types.ts,
// controller/types.ts): rewrites every import or re-export of a moved name
// from src/acpx/controller/types.js so it names the file that now declares
// it. For a main that gained importers of the old types.ts after the split
// was made: run scripts/rooms-move.mjs, cherry-pick the split, then this.
// Re-runnable: an import already pointing at the right file is left alone.
//
//   node scripts/rooms-types.mjs
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const HOME = {
  connection: [
    "AcpRuntimeEnsureInput",
    "SessionLimits",
    "LimitController",
    "AcpRuntimeHandle",
    "AcpAuthInput",
    "AcpAuthResolver",
    "AdoptedTurn",
    "PromptOptions",
  ],
  sessions: [
    "AcpxContainmentOptions",
    "SessionSummary",
    "SessionStatus",
    "SessionEndHow",
    "LeaseSettledOutcome",
    "ClientCapabilitiesOption",
    "CloseReport",
    "AcpxLifecycleControllerOptions",
    "EnsureTiming",
    "TreeKillMember",
    "TreeKillSummary",
    "DurableOptions",
  ],
};
const homeOf = (name) => Object.keys(HOME).find((k) => HOME[k].includes(name)) ?? "controller";
const OLD = "src/acpx/controller/types.js";
const STATEMENT = /(import|export)(\s+type)?\s*\{([^}]*)\}\s*from\s*"([^"]*types\.js)";\n/g;

const files = execFileSync("git", ["ls-files", "-z", "--", "src", "test", "bench", "scripts", ".ci"], {
  cwd: ROOT,
  encoding: "utf8",
})
  .split("\0")
  .filter((p) => /\.(ts|mts|mjs)$/.test(p) && existsSync(join(ROOT, p)));
let changed = 0;
for (const f of files) {
  const text = readFileSync(join(ROOT, f), "utf8");
  const next = text.replace(STATEMENT, (whole, kw, typ = "", body, spec) => {
    if (posix.normalize(posix.join(posix.dirname(f), spec)) !== OLD) return whole;
    const groups = new Map();
    for (const n of body
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)) {
      const name = n.replace(/^type\s+/, "").split(/\s+as\s+/)[0];
      const home = homeOf(name);
      groups.set(home, [...(groups.get(home) ?? []), n]);
    }
    if (groups.size === 1 && groups.has("controller")) return whole;
    return [...groups]
      .map(([home, names]) => {
        let to = posix.relative(posix.dirname(f), `src/acpx/${home}/types.js`);
        if (!to.startsWith(".")) to = `./${to}`;
        return `${kw}${typ} { ${names.join(", ")} } from "${to}";\n`;
      })
      .join("");
  });
  if (next !== text) {
    writeFileSync(join(ROOT, f), next);
    changed++;
    console.log(`retargeted ${f}`);
  }
}
console.log(`rooms-types: ${changed} file(s) retargeted (run prettier on them)`);
