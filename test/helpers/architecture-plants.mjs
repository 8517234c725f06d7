// Second copies of rules that have one home, each planted in a file of its
// own: test/architecture.test.ts checks that each is found (in memory and in
// a temp copy of the tree), and scripts/arch-plants.mjs plants each one alone
// in a scratch copy of the repository and runs the architecture test there,
// which must fail. The first nine are the copies issue 40 found passing the
// old, spelling-based test; then one per remaining rule; the last seven are
// issue 48's: new spellings of the facts fields and of an errno map, each in
// a layer other than its home, found by what the value is (the checker) or
// by the closed set of errno names.
// Plain JS (typed by architecture-plants.d.mts) so the script can read it too.

const lines = (n, line) => Array.from({ length: n }, (_, i) => line(i)).join("\n") + "\n";

/** @type {import("./architecture-plants.d.mts").Plant[]} */
export const PLANTS = [
  {
    name: "letter-in-a-constant",
    rule: "state-letter",
    at: "src/supervisor/planted-letter-constant.ts",
    text: `const ZOMBIE = "Z";\nexport const gone = (p: { state: string }) => p.state === ZOMBIE;\n`,
  },
  {
    name: "regex-on-state",
    rule: "state-letter",
    at: "src/supervisor/planted-state-regex.ts",
    text: `export const gone = (p: { state: string }) => /^[ZX]/.test(p.state);\n`,
  },
  {
    name: "process-kill-probe",
    rule: "signal-call",
    at: "src/cli/planted-kill-probe.ts",
    text: `export function alive(pid: number): boolean {\n  try {\n    process.kill(pid, 0);\n    return true;\n  } catch {\n    return false;\n  }\n}\n`,
  },
  {
    name: "apply-settlement-from-acpx",
    rule: "lease-move",
    at: "src/acpx/planted-settlement.ts",
    text: `import { applySettlement } from "../ownership/lifecycle/lifecycle.js";\nexport const settle = (s: never, l: never, t: never) => applySettlement(s, l, t);\n`,
  },
  {
    name: "destructured-transition",
    rule: "lease-move",
    at: "src/acpx/planted-transition.ts",
    text: `import type { LeaseStore } from "../ownership/leases/lease-store-api.js";\nexport async function close(store: LeaseStore, id: string) {\n  const { transition } = store;\n  await transition.call(store, id, "closed");\n}\n`,
  },
  {
    name: "advance-by-bracket",
    rule: "lease-move",
    at: "src/supervisor/planted-advance.ts",
    text: `import type { LeaseStore } from "../ownership/leases/lease-store-api.js";\nexport const close = (store: LeaseStore, id: string) => store["advance"](id, () => ({ to: "closed" }));\n`,
  },
  {
    name: "procs-name-joined",
    rule: "cgroup-procs-write",
    at: "src/supervisor/planted-procs.ts",
    text: `import { writeFileSync } from "node:fs";\nimport { join } from "node:path";\nexport const enter = (dir: string) => writeFileSync(join(dir, ["cgroup", "procs"].join(".")), "0");\n`,
  },
  {
    name: "term-sleep-kill",
    rule: "kill-order",
    at: "src/supervisor/planted-escalate.ts",
    text: `import type { ProcessSignaller } from "../facts/types.js";\nexport async function stop(s: ProcessSignaller, pid: number, start: string) {\n  await s.signal(pid, start, "SIGTERM");\n  await new Promise((r) => setTimeout(r, 3000));\n  await s.signal(pid, start, "SIGKILL");\n}\n`,
  },
  {
    name: "group-term-wait-kill",
    rule: "kill-order",
    at: "src/acpx/wrapper/planted-group-escalate.ts",
    text: `export async function end(signalGroup: (sig: NodeJS.Signals) => void, gone: () => Promise<void>, graceMs: number) {\n  signalGroup("SIGTERM");\n  const ended = await Promise.race([gone().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), graceMs))]);\n  if (!ended) signalGroup("SIGKILL");\n}\n`,
  },
  {
    name: "second-visibility-check",
    rule: "visibility-check",
    at: "src/acpx/planted-visibility.ts",
    text: `export const canSee = (requester: string, row: { key: string; ownerSessionKey?: string; spawnedBy?: string }) =>\n  row.key === requester || row.ownerSessionKey === requester || row.spawnedBy === requester;\n`,
  },
  {
    name: "native-600-lines",
    rule: "file-size",
    at: "native/planted.cc",
    text: lines(600, (i) => `static int planted_${i} = ${i};`),
  },
  {
    name: "plugin-imports-cli",
    rule: "layer-import",
    at: "src/openclaw/planted-cli.ts",
    text: `import { COMMANDS } from "../cli/dispatch.js";\nexport const commands = COMMANDS;\n`,
  },
  {
    name: "ownership-imports-acpx",
    rule: "layer-import",
    at: "src/ownership/lifecycle/planted-up.ts",
    text: `import { createAcpxLifecycleController } from "../../acpx/index.js";\nexport const c = createAcpxLifecycleController;\n`,
  },
  {
    name: "verify-imports-lifecycle",
    rule: "layer-import",
    at: "src/ownership/verify/planted-up.ts",
    text: `import { settlementFor } from "../lifecycle/settle.js";\nexport const s = settlementFor;\n`,
  },
  {
    name: "child-kill-by-hand",
    rule: "signal-call",
    at: "src/supervisor/planted-child-kill.ts",
    text: `import { spawn } from "node:child_process";\nexport function stop() {\n  const c = spawn("sleep", ["9"]);\n  const { kill } = c;\n  kill.call(c, "SIGTERM");\n}\n`,
  },
  {
    name: "prose-decision",
    rule: "prose-decision",
    at: "src/ownership/planted-prose.ts",
    text: `export const execd = (e: { detail?: string }) => e.detail?.startsWith("neither") === true;\n`,
  },
  {
    name: "src-600-lines",
    rule: "file-size",
    at: "src/facts/planted-long.ts",
    text: lines(600, (i) => `export const x${i} = ${i};`),
  },
  {
    name: "test-600-lines",
    rule: "file-size",
    at: "test/planted-long.ts",
    text: lines(600, (i) => `export const y${i} = ${i};`),
  },
  {
    name: "long-function",
    rule: "function-size",
    at: "src/facts/planted-function.ts",
    text: `export function long(): number {\n  let n = 0;\n${"  n++;\n".repeat(90)}  return n;\n}\n`,
  },
  {
    name: "zombie-regex-held",
    rule: "state-letter",
    at: "src/supervisor/planted-zombie-regex.ts",
    text: `import type { ProcessInfo } from "../facts/types.js";\nconst DEAD = /^[ZXx]$/;\nexport const gone = (p: ProcessInfo) => DEAD.test(p.state);\n`,
  },
  {
    name: "state-letter-in-mts",
    rule: "state-letter",
    at: "src/acpx/planted-state.mts",
    text: `import type { ProcessInfo } from "../facts/types.js";\nexport function zombie(p: ProcessInfo): boolean {\n  const { state: s } = p;\n  return s === "Z";\n}\n`,
  },
  {
    name: "start-time-by-hand",
    rule: "start-time",
    at: "src/supervisor/planted-start.ts",
    text: `import type { ProcessInfo } from "../facts/types.js";\nexport const same = (a: ProcessInfo, b: ProcessInfo) => a.pid === b.pid && a.startTime === b.startTime;\n`,
  },
  {
    name: "start-time-as-text",
    rule: "start-time",
    at: "src/ownership/verify/planted-start-text.ts",
    text: `import type { ProcessDetails } from "../../facts/types.js";\nexport const reused = (d: ProcessDetails, was: { startTime: string }) => String(d["startTime"]) !== \`\${was.startTime}\`;\n`,
  },
  {
    name: "errno-map-in-acpx",
    rule: "errno-map",
    at: "src/acpx/planted-errno.ts",
    text: `export function meaning(e: NodeJS.ErrnoException): "gone" | "denied" | "unknown" {\n  if (e.code === "ESRCH") return "gone";\n  if (e.code === "EPERM") return "denied";\n  return "unknown";\n}\n`,
  },
  {
    name: "errno-set-in-cli",
    rule: "errno-map",
    at: "src/cli/planted-errno-set.ts",
    text: `const GONE: ReadonlySet<string> = new Set([\`ENOENT\`, "ESRCH"]);\nexport const gone = (e: { code?: string }) => GONE.has(e.code ?? "");\n`,
  },
  {
    name: "errno-name-against-a-fault",
    rule: "errno-map",
    at: "src/supervisor/planted-errno-fault.ts",
    text: `import { hostFault } from "../ownership/leases/host-faults.js";\nexport const gone = (e: unknown) => hostFault(e) === "ESRCH";\n`,
  },
];
