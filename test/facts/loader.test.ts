/**
 * Backend selection: explicit choice > PROCLEASE_BACKEND > auto. In-process
 * through src, and in a fresh node process through dist (the way an operator
 * or a CI job sets the variables before anything loads).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { loadError, loadNative } from "../../src/facts/native.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const DIST_INDEX = new URL("../../dist/facts/index.js", import.meta.url).href;

interface ChildResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a tiny ESM script in a fresh node with the given env additions. */
function runNode(script: string, env: Record<string, string | undefined>): Promise<ChildResult> {
  const full: NodeJS.ProcessEnv = { ...process.env };
  delete full.PROCLEASE_BACKEND;
  delete full.PROCLEASE_DISABLE_NATIVE;
  for (const [k, v] of Object.entries(env)) if (v !== undefined) full[k] = v;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", script, DIST_INDEX],
      { env: full, timeout: 20_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

const PRINT = `
const m = await import(process.argv[1]);
try {
  const f = m.getProcessFacts();
  const snap = f.backend === "none" ? null : await f.snapshot();
  console.log(JSON.stringify({ backend: f.backend, identityStrength: f.identityStrength, sawSelf: snap ? snap.processes.has(process.pid) : null }));
} catch (e) {
  console.log(JSON.stringify({ error: e.name, message: e.message }));
}`;

describe("getProcessFacts in a fresh process (dist)", () => {
  beforeAll(async () => {
    if (existsSync(fileURLToPath(DIST_INDEX))) return;
    await new Promise<void>((resolve, reject) =>
      execFile("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, timeout: 120_000 }, (err) =>
        existsSync(fileURLToPath(DIST_INDEX)) ? resolve() : reject(err ?? new Error("dist/facts/index.js not built")),
      ),
    );
  }, 150_000);

  const linux = process.platform === "linux";
  (linux ? it : it.skip)(`PROCLEASE_DISABLE_NATIVE=1 → procfs${linux ? "" : " (skipped: Linux only)"}`, async () => {
    const r = await runNode(PRINT, { PROCLEASE_DISABLE_NATIVE: "1" });
    expect(JSON.parse(r.stdout)).toEqual({ backend: "procfs", identityStrength: "exact", sawSelf: true });
  });

  it("PROCLEASE_BACKEND=ps → ps", async () => {
    const r = await runNode(PRINT, { PROCLEASE_BACKEND: "ps" });
    expect(JSON.parse(r.stdout)).toEqual({ backend: "ps", identityStrength: "coarse", sawSelf: true });
  });

  it("PROCLEASE_BACKEND=none → none", async () => {
    const r = await runNode(PRINT, { PROCLEASE_BACKEND: "none" });
    expect(JSON.parse(r.stdout)).toEqual({ backend: "none", identityStrength: "none", sawSelf: null });
  });

  it("an invalid PROCLEASE_BACKEND is a TypeError naming the variable", async () => {
    const r = await runNode(PRINT, { PROCLEASE_BACKEND: "fast" });
    const out = JSON.parse(r.stdout) as { error: string; message: string };
    expect(out.error).toBe("TypeError");
    expect(out.message).toMatch(/PROCLEASE_BACKEND/);
    expect(out.message).toMatch(/"fast"/);
  });

  it("auto with nothing set picks native when the addon loads, else procfs on Linux", async () => {
    const r = await runNode(PRINT, {});
    const expected = loadNative() !== null ? "native" : linux ? "procfs" : "ps";
    expect(JSON.parse(r.stdout)).toMatchObject({ backend: expected, sawSelf: true });
  });

  it("explicit native with the addon disabled throws an Error carrying loadError()", async () => {
    const r = await runNode(
      `const m = await import(process.argv[1]);
       try { m.getProcessFacts({ backend: "native" }); console.log("{}"); }
       catch (e) { console.log(JSON.stringify({ error: e.name, message: e.message })); }`,
      { PROCLEASE_DISABLE_NATIVE: "1" },
    );
    const out = JSON.parse(r.stdout) as { error: string; message: string };
    expect(out.error).toBe("Error");
    expect(out.message).toMatch(/PROCLEASE_DISABLE_NATIVE=1/);
  });
});

describe("getProcessFacts in-process (src)", () => {
  const saved = { backend: process.env.PROCLEASE_BACKEND, disable: process.env.PROCLEASE_DISABLE_NATIVE };
  afterEach(() => {
    for (const [k, v] of [
      ["PROCLEASE_BACKEND", saved.backend],
      ["PROCLEASE_DISABLE_NATIVE", saved.disable],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it("an explicit backend wins over PROCLEASE_BACKEND", () => {
    process.env.PROCLEASE_BACKEND = "ps";
    expect(getProcessFacts({ backend: "none" }).backend).toBe("none");
    expect(getProcessFacts().backend).toBe("ps");
    expect(getProcessFacts({ backend: "auto" }).backend).toBe("ps");
  });

  it("instances are cached per backend", () => {
    expect(getProcessFacts({ backend: "ps" })).toBe(getProcessFacts({ backend: "ps" }));
    expect(getProcessFacts({ backend: "none" })).not.toBe(getProcessFacts({ backend: "ps" }));
  });

  it("an invalid explicit backend is a TypeError", () => {
    expect(() => getProcessFacts({ backend: "fast" as "ps" })).toThrow(TypeError);
  });

  it("an invalid PROCLEASE_BACKEND is a TypeError naming it", () => {
    process.env.PROCLEASE_BACKEND = "Native";
    expect(() => getProcessFacts()).toThrow(/PROCLEASE_BACKEND/);
    expect(() => getProcessFacts()).toThrow(TypeError);
  });

  it("disabling native mid-process is honoured by auto and by an explicit request", () => {
    process.env.PROCLEASE_DISABLE_NATIVE = "1";
    delete process.env.PROCLEASE_BACKEND; // the suite may run under a chosen backend; this is about auto
    if (process.platform === "linux") expect(getProcessFacts().backend).toBe("procfs");
    expect(() => getProcessFacts({ backend: "native" })).toThrow(loadError()!);
  });
});
