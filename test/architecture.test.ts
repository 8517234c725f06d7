/**
 * The architecture, enforced: every rule and sequence has one home in src/,
 * and the build fails on a second copy (test/helpers/architecture.ts says
 * what each rule looks for):
 * - no process-state letter compared outside src/facts/ (liveness is facts/liveness.ts's);
 * - no write to cgroup.procs outside src/containment/enter.ts;
 * - no lease `.transition(` outside src/ownership/lifecycle.ts (and the store);
 * - no import up the layers (facts, sessions → containment → ownership →
 *   supervisor → acpx → cli → openclaw → src/index.ts; sessions imports nothing);
 * - no decision made by matching prose (a detail, why, message or reason
 *   searched with startsWith, includes, a regex, …): decisions read codes;
 * - no src/ file over 500 lines, no function over 80 lines.
 * The allowances below are the only exceptions, each with why. A test of
 * the test plants a copy of each rule's violation, into source text and
 * into a temp copy of the tree, and shows that each is found.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { checkFile, checkTree, MAX_FILE_LINES, MAX_FUNCTION_LINES, readSourceTree, type Allowance, type RuleName, type Violation } from "./helpers/architecture.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Every exception, with why. Each must still be needed (a test below fails on
 * one that matches nothing): remove an entry when its work lands.
 */
export const ALLOW: readonly Allowance[] = [];

const show = (v: readonly Violation[]) => v.map((x) => `${x.rule} ${x.file}:${x.line} ${x.detail}`).join("\n");

describe("the source tree", () => {
  const files = readSourceTree(ROOT);

  it("keeps every rule (the allowances aside)", () => {
    expect(files.length).toBeGreaterThan(50);
    const v = checkTree(files, ALLOW);
    expect(v, `\n${show(v)}`).toEqual([]);
  });

  it("still needs every allowance", () => {
    const all = checkTree(files);
    const unused = ALLOW.filter((a) => !all.some((v) => v.rule === a.rule && v.file === a.file && (a.name === undefined || v.detail.startsWith(`function ${a.name}:`))));
    expect(unused, "these allowances match nothing any more: remove them").toEqual([]);
  });
});

/** Source text for one planted copy of each rule's violation, and the home where the same text is allowed. */
const PLANTS: Record<RuleName, { text: string; at: string; home?: string }> = {
  "state-letter": { at: "src/supervisor/planted.ts", home: "src/facts/planted.ts", text: `export const gone = (p: { state: string }) => p.state === "Z" || "X" === p?.state;\n` },
  "cgroup-procs-write": {
    at: "src/acpx/planted.ts",
    home: "src/containment/enter.ts",
    text: `import { writeFileSync } from "node:fs";\nexport function join(dir: string) {\n  writeFileSync(\`\${dir}/cgroup.procs\`, "0");\n}\n`,
  },
  "lease-transition": {
    at: "src/acpx/planted.ts",
    home: "src/ownership/lifecycle.ts",
    text: `export async function close(store: { transition(id: string, to: string): Promise<void> }) {\n  await store.transition("lease-1", "closed");\n}\n`,
  },
  "layer-import": { at: "src/ownership/planted.ts", home: "src/cli/planted.ts", text: `import { createAcpxLifecycleController } from "../acpx/index.js";\nexport const c = createAcpxLifecycleController;\n` },
  "prose-decision": {
    at: "src/ownership/planted.ts",
    text: `export const execd = (e: { detail?: string }) => e.detail?.startsWith("neither") === true;\n`,
  },
  "file-size": { at: "src/facts/planted.ts", text: Array.from({ length: MAX_FILE_LINES + 1 }, (_, i) => `export const x${i} = ${i};`).join("\n") + "\n" },
  "function-size": {
    at: "src/facts/planted.ts",
    text: `export function long(): number {\n  let n = 0;\n${"  n++;\n".repeat(MAX_FUNCTION_LINES)}  return n;\n}\n`,
  },
};

describe("each rule fails on a planted copy (a test of the test)", () => {
  for (const [rule, plant] of Object.entries(PLANTS) as [RuleName, (typeof PLANTS)[RuleName]][]) {
    it(`${rule}: found in ${plant.at}${plant.home ? `, not in its home ${plant.home}` : ""}`, () => {
      const found = checkFile({ path: plant.at, text: plant.text }).filter((v) => v.rule === rule);
      expect(found.length, show(found)).toBeGreaterThan(0);
      if (plant.home) expect(checkFile({ path: plant.home, text: plant.text }).filter((v) => v.rule === rule)).toEqual([]);
    });
  }

  it("state-letter also catches a switch over the state and a list of letters; a multi-letter state (a run's) is not a letter", () => {
    const text = `export function f(p: { state: string }) {\n  switch (p.state) {\n    case "D": return 1;\n  }\n  if (["Z", "X"].includes(p.state)) return 2;\n  return p.state === "exited" ? 3 : 0;\n}\n`;
    expect(checkFile({ path: "src/acpx/planted.ts", text }).map((v) => v.detail)).toEqual([
      "a switch over a state letter (D)",
      "a list of state letters searched by hand",
    ]);
  });

  it("cgroup-procs-write also catches a shell redirection and a name passed on; a read, and prose naming the file, are not writes", () => {
    const text = [
      "import { readFileSync, writeFileSync } from 'node:fs';",
      "import { join } from 'node:path';",
      "export const shim = 'echo 0 > \"$1/cgroup.procs\" && exec \"$@\"';",
      "export const put = (d: string) => writeFileSync(join(d, 'cgroup.procs'), '0');",
      "export const members = (d: string) => readFileSync(join(d, 'cgroup.procs'), 'utf8');",
      "export const why = (d: string) => `uid 1 cannot write ${d}/cgroup.procs (ask for Delegate=yes)`;",
    ].join("\n");
    expect(checkFile({ path: "src/supervisor/planted.ts", text }).map((v) => v.line)).toEqual([3, 4]);
  });

  it("lease-transition also catches the store's advance()", () => {
    const text = `export async function close(store: { advance(id: string, step: () => { to: string }): Promise<void> }) {\n  await store.advance("lease-1", () => ({ to: "closed" }));\n}\n`;
    expect(checkFile({ path: "src/acpx/planted.ts", text }).filter((v) => v.rule === "lease-transition").map((v) => v.line)).toEqual([2]);
    expect(checkFile({ path: "src/ownership/lifecycle.ts", text }).filter((v) => v.rule === "lease-transition")).toEqual([]);
  });

  it("layer-import also catches a dynamic import and a re-export, and sessions importing anything of ours", () => {
    const text = `export { settleLease } from "../ownership/index.js";\nexport const load = () => import("../supervisor/index.js");\n`;
    expect(checkFile({ path: "src/containment/planted.ts", text }).filter((v) => v.rule === "layer-import")).toHaveLength(2);
    expect(checkFile({ path: "src/sessions/planted.ts", text: `import { isAlive } from "../facts/liveness.js";\nexport const a = isAlive;\n` })).toHaveLength(1);
    expect(checkFile({ path: "src/acpx/planted.ts", text: `import { isAlive } from "../facts/liveness.js";\nexport const a = isAlive;\n` })).toEqual([]);
  });

  it("prose-decision also catches a regex tested against a why and an includes on a message or reason; a code compared, and prose built, are not decisions", () => {
    const text = [
      "export function f(o: { why: string; code: string; message: string }, g: { reason: string }, detail: string) {",
      "  if (/native addon unavailable/.test(o.why)) return 1;",
      "  if (o.message.includes('ENOSPC') || g.reason.endsWith('ancestor')) return 2;",
      "  if (detail.match(/x/)) return 3;",
      "  if (o.code === 'not-the-wrapper') return 4;",
      "  return `${o.why}: ${detail}`.length;",
      "}",
    ].join("\n");
    expect(checkFile({ path: "src/cli/planted.ts", text }).filter((v) => v.rule === "prose-decision").map((v) => v.line)).toEqual([2, 3, 3, 4]);
  });

  it("an allowance covers only its own file and function, and only up to its size", () => {
    const long = PLANTS["function-size"].text;
    const at = { path: "src/supervisor/supervisor.ts", text: long };
    expect(checkTree([at], [{ rule: "function-size", file: at.path, name: "long", max: 200, why: "test" }])).toEqual([]);
    expect(checkTree([at], [{ rule: "function-size", file: at.path, name: "other", max: 200, why: "test" }])).toHaveLength(1);
    expect(checkTree([at], [{ rule: "function-size", file: at.path, name: "long", max: 81, why: "test" }])).toHaveLength(1);
    const letters = { path: "src/supervisor/kill-tree.ts", text: PLANTS["state-letter"].text };
    expect(checkTree([letters], [{ rule: "state-letter", file: letters.path, max: 1, why: "test" }])).toHaveLength(1);
    expect(checkTree([letters], [{ rule: "state-letter", file: letters.path, max: 2, why: "test" }])).toEqual([]);
  });

  describe("in a temp copy of the tree", () => {
    const copy = mkdtempSync(join(tmpdir(), "proclease-architecture-"));
    afterAll(() => rmSync(copy, { recursive: true, force: true }));

    it("each planted file is found by its rule, and nothing else changes", () => {
      cpSync(join(ROOT, "src"), join(copy, "src"), { recursive: true });
      const before = checkTree(readSourceTree(copy), ALLOW);
      expect(before, show(before)).toEqual([]);
      const planted = new Map<string, RuleName>();
      for (const [rule, plant] of Object.entries(PLANTS) as [RuleName, (typeof PLANTS)[RuleName]][]) {
        const file = plant.at.replace(/planted\.ts$/, `planted-${rule}.ts`);
        writeFileSync(join(copy, file), plant.text);
        planted.set(file, rule);
      }
      const after = checkTree(readSourceTree(copy), ALLOW);
      for (const [file, rule] of planted) expect(after.some((v) => v.file === file && v.rule === rule), `${rule} in ${file}\n${show(after)}`).toBe(true);
      expect(after.filter((v) => !planted.has(v.file)), "only the planted files are flagged").toEqual([]);
    });
  });
});
