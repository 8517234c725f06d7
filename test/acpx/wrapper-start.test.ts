/**
 * What the wrapper loads: started the way
 * the controller starts it (the installed .cjs shim requiring the bundle), a
 * CommonJS hook notes every user file Node loaded and every ESM-loader module
 * it initialised over the wrapper's whole life (start, adapter exit, sweep).
 * The answer must be one module graph: the shim, the bundle and the addon
 * the shim names (node-gyp-build only when that path no longer loads); no
 * zod, no ACP SDK, none of tsc's per-file output, and no more of Node's ESM
 * loader than a bare `node -e 0` initialises. The timing and
 * PSS targets live in bench/wrapper.bench.mjs (ratios, not timed tests).
 * Build first (`npm run build`).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  installWrapper,
  packagedNativeWrapper,
  packagedWrapperPath,
  wrapperKindOf,
  wrapperShimSource,
} from "../../src/acpx/launch/install-wrapper.js";
import { rootArgvFor } from "../../src/acpx/launch/launch.js";
import { nativeAddonPath } from "../../src/facts/native.js";
import { cleanupAll, ROOT, tempStateDir } from "./controller-helpers.js";

afterAll(() => cleanupAll());

const HOOK = `
process.on("exit", () => {
  const esm = process.moduleLoadList.filter((m) => m.startsWith("NativeModule internal/modules/esm/"));
  require("node:fs").writeSync(2, "\\nLOADED " + JSON.stringify({ files: Object.keys(require.cache), esm }) + "\\n");
});
`;

function loaded(args: string[], dir: string): { files: string[]; esm: string[] } {
  const hook = join(dir, "hook.cjs");
  writeFileSync(hook, HOOK);
  const r = spawnSync(process.execPath, ["--require", hook, ...args], { encoding: "utf8", timeout: 30_000 });
  const line = r.stderr.split("\n").find((l) => l.startsWith("LOADED "));
  if (!line) throw new Error(`no LOADED line (exit ${r.status}, stderr ${r.stderr.slice(-500)})`);
  const v = JSON.parse(line.slice("LOADED ".length)) as { files: string[]; esm: string[] };
  return { files: v.files.filter((f) => f !== hook), esm: v.esm };
}

describe.skipIf(process.platform !== "linux")(
  "the wrapper's module graph (Linux: the addon is loaded at start for its prctls)",
  () => {
    it("is the shim, the bundle and the addon: no zod, no SDK, no per-file dist, no ESM loader beyond node -e 0's", async () => {
      const bundle = packagedWrapperPath();
      expect(bundle).toBe(join(ROOT, "dist/acpx/wrapper.cjs"));
      const dir = tempStateDir("wrapper-start");
      const { wrapperPath, kind } = await installWrapper(dir, { kind: "node" });
      expect(kind).toBe("node");
      expect(wrapperPath.endsWith(".cjs")).toBe(true);

      const w = loaded([wrapperPath, "--grace-ms", "100", "--", "/bin/true"], dir);
      const bare = loaded(["-e", "0"], dir);

      expect(w.files.filter((f) => /zod|@agentclientprotocol/.test(f))).toEqual([]);
      // the shim hands the bundle the addon this process would load: node-gyp-build's search is not run
      const addon = nativeAddonPath();
      expect(addon).not.toBeNull();
      expect(readFileSync(wrapperPath, "utf8")).toContain(JSON.stringify(addon));
      expect(w.files.sort()).toEqual([wrapperPath, bundle, addon!].sort());
      expect(w.esm.sort()).toEqual(bare.esm.sort());
    });

    it("a shim that hands a path which no longer loads: node-gyp-build finds the addon, and the wrapper starts its adapter", async () => {
      const dir = tempStateDir("wrapper-start-moved");
      const { wrapperRoot } = await installWrapper(dir, { kind: "node" });
      const shim = join(wrapperRoot, "moved.cjs");
      writeFileSync(shim, wrapperShimSource(packagedWrapperPath(), join(dir, "gone", "proclease.node")));
      const marker = join(dir, "adapter-ran");
      const w = loaded([shim, "--grace-ms", "100", "--", "/bin/sh", "-c", ': > "$1"', "sh", marker], dir);
      expect(existsSync(marker)).toBe(true);
      expect(w.files).toContain(nativeAddonPath());
      expect(w.files.some((f) => f.includes("/node_modules/node-gyp-build/"))).toBe(true);
    });
  },
);

const NATIVE = process.platform === "linux" ? packagedNativeWrapper() : null;
const NO_NATIVE =
  NATIVE === null
    ? " (skipped: no native wrapper beside the addon on this host; `npx node-gyp rebuild` builds it on Linux)"
    : "";

describe("the native wrapper's installation", () => {
  it.skipIf(NATIVE === null)(
    `is a private copy under wrapperRoot named by its bytes' hash, spawned as its own executable${NO_NATIVE}`,
    async () => {
      const dir = tempStateDir("wrapper-native");
      const a = await installWrapper(dir);
      expect(a.kind).toBe("native");
      expect(a.sourcePath).toBe(NATIVE);
      expect(dirname(a.wrapperPath)).toBe(a.wrapperRoot);
      expect(basename(a.wrapperPath)).toMatch(/^acpx-wrapper-[0-9a-f]{12}$/);
      expect(wrapperKindOf(a.wrapperPath)).toBe("native");
      expect(readFileSync(a.wrapperPath).equals(readFileSync(NATIVE!))).toBe(true);
      expect(statSync(a.wrapperPath).mode & 0o777).toBe(0o700);
      // installing again keeps the same file
      const ino = statSync(a.wrapperPath).ino;
      const b = await installWrapper(dir);
      expect(b.wrapperPath).toBe(a.wrapperPath);
      expect(statSync(b.wrapperPath).ino).toBe(ino);
      // the root's argv: no node in front, the installed path twice (it runs from a sealed copy and is known by argv[1]); what the lease's commandHash covers
      expect(rootArgvFor("/usr/bin/node", a.wrapperPath, ["agent", "--x"], 250)).toEqual([
        a.wrapperPath,
        a.wrapperPath,
        "--grace-ms",
        "250",
        "--",
        "agent",
        "--x",
      ]);
    },
  );

  it("PROCLEASE_WRAPPER=node (or no native code) installs the Node wrapper; an unknown value is refused by name", async () => {
    const saved = process.env.PROCLEASE_WRAPPER;
    try {
      process.env.PROCLEASE_WRAPPER = "node";
      const n = await installWrapper(tempStateDir("wrapper-env-node"));
      expect(n.kind).toBe("node");
      expect(wrapperKindOf(n.wrapperPath)).toBe("node");
      expect(rootArgvFor("/usr/bin/node", n.wrapperPath, ["agent"], 250)).toEqual([
        "/usr/bin/node",
        n.wrapperPath,
        "--grace-ms",
        "250",
        "--",
        "agent",
      ]);
      process.env.PROCLEASE_WRAPPER = "rust";
      await expect(installWrapper(tempStateDir("wrapper-env-bad"))).rejects.toThrow(
        /PROCLEASE_WRAPPER must be "node" or "native", got "rust"/,
      );
    } finally {
      if (saved === undefined) delete process.env.PROCLEASE_WRAPPER;
      else process.env.PROCLEASE_WRAPPER = saved;
    }
  });
});
