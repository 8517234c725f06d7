/**
 * Installs the wrapper under `<stateDir>/acpx/wrappers/`, so every state
 * directory (every gateway installation) has its own `wrapperRoot` and
 * verification can tell one installation's wrappers from another's by the
 * live argv[1] alone.
 *
 * Decision: the installed file is a generated CommonJS shim that requires
 * the package's bundled wrapper (dist/acpx/wrapper.cjs, one file built by
 * scripts/bundle-wrapper.mjs at `npm run build`) by absolute path, not a
 * copy, after handing it the path of the addon this gateway would load (so
 * the wrapper skips node-gyp-build's search; without it, or when that file
 * no longer loads, the bundle searches relative to its own location). CommonJS
 * on purpose: an ESM entry would start Node's ESM loader, a measurable part of
 * every session's start (bench/wrapper.bench.mjs). The shim keeps a single
 * source of truth and its path is what the kernel reports as argv[1]. The
 * shim's name carries a hash of its content, so a package upgrade installs a
 * new file next to the old one instead of rewriting a file a running wrapper
 * was started from.
 *
 * Decision (issue 41, docs/wrapper.md): on Linux, where the package has the
 * native wrapper (`proclease-wrapper`, built by binding.gyp beside the addon),
 * that executable is installed instead: copied (not linked) to
 * `<wrapperRoot>/acpx-wrapper-<hash>` and spawned directly, so the live
 * root's executable is under wrapperRoot and a session costs no second Node.
 * The Node wrapper stays the fallback where the binary is absent, and is
 * chosen by PROCLEASE_WRAPPER=node or PROCLEASE_DISABLE_NATIVE=1;
 * PROCLEASE_WRAPPER=native makes a missing binary an error.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { lstat, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ADDON_PATH_GLOBAL, nativeAddonPath } from "../facts/native.js";
import { atomicWrite, ensurePrivateDir, readOwnedFile } from "../ownership/leases/fs-safe.js";

export type WrapperKind = "native" | "node";

export interface InstalledWrapper {
  /** `<stateDir>/acpx/wrappers` */
  wrapperRoot: string;
  /** under wrapperRoot: the native executable (spawned as `<wrapperPath> …`) or the shim (`node <wrapperPath> …`) */
  wrapperPath: string;
  /** the package file the shim imports, or the packaged native executable that was copied */
  sourcePath: string;
  kind: WrapperKind;
}

/** The packaged native wrapper's file name, beside the addon (build/Release/, prebuilds/<platform>/). */
export const NATIVE_WRAPPER_FILE = "proclease-wrapper";

/**
 * The one rule telling the two kinds apart once installed: the native copy
 * is `acpx-wrapper-<hash>` with no extension, the shim ends in `.cjs`.
 */
export function wrapperKindOf(wrapperPath: string): WrapperKind {
  return /^acpx-wrapper-[0-9a-f]{12}$/.test(basename(wrapperPath)) ? "native" : "node";
}

/**
 * The packaged native wrapper to install, or null for the Node wrapper:
 * Linux only, beside the addon this gateway loads, unless the environment
 * asks for the Node wrapper (PROCLEASE_WRAPPER=node) or no native code at
 * all (PROCLEASE_DISABLE_NATIVE=1). PROCLEASE_WRAPPER=native without the
 * binary throws, naming where it looked.
 */
export function packagedNativeWrapper(addonPath: string | null = nativeAddonPath()): string | null {
  const asked = process.env.PROCLEASE_WRAPPER;
  if (asked !== undefined && asked !== "" && asked !== "node" && asked !== "native") {
    throw new TypeError(`PROCLEASE_WRAPPER must be "node" or "native", got ${JSON.stringify(asked)}`);
  }
  if (asked === "node" || process.env.PROCLEASE_DISABLE_NATIVE === "1") return null;
  const candidate =
    process.platform === "linux" && addonPath !== null ? join(dirname(addonPath), NATIVE_WRAPPER_FILE) : null;
  if (candidate !== null && existsSync(candidate)) return candidate;
  if (asked === "native") {
    throw new Error(
      `PROCLEASE_WRAPPER=native but no native wrapper was found (${candidate ?? `none on ${process.platform}, or no addon`}); run \`npx node-gyp rebuild\``,
    );
  }
  return null;
}

/**
 * The bundled wrapper of this package. From dist/ it is the sibling
 * `wrapper.cjs`; when this module runs from src/ (tests through vitest)
 * the package's dist/ build is used instead (build first).
 */
export function packagedWrapperPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, "wrapper.cjs");
  if (existsSync(sibling)) return sibling;
  const fromSrc = resolve(here, "..", "..", "dist", "acpx", "wrapper.cjs");
  if (existsSync(fromSrc)) return fromSrc;
  throw new Error(
    `the proclease wrapper entry was not found (looked for ${sibling} and ${fromSrc}); run \`npm run build\` first`,
  );
}

/**
 * The shim's text. With `addonPath` (the addon this gateway loads), the shim
 * hands it to the bundle's loader first (ADDON_PATH_GLOBAL), so a wrapper's
 * start skips node-gyp-build's search; a path that no longer loads falls back
 * to that search.
 */
export function wrapperShimSource(sourcePath: string, addonPath: string | null = null): string {
  return (
    "// Generated by proclease: the ACPX process wrapper for this state directory.\n" +
    "// Do not edit; it is replaced (under a new name) when the package changes.\n" +
    (addonPath === null
      ? ""
      : `globalThis[Symbol.for(${JSON.stringify(ADDON_PATH_GLOBAL)})] = ${JSON.stringify(addonPath)};\n`) +
    `require(${JSON.stringify(sourcePath)});\n`
  );
}

export async function installWrapper(
  stateDir: string,
  opts?: { sourcePath?: string; kind?: WrapperKind },
): Promise<InstalledWrapper> {
  const wrapperRoot = join(resolve(stateDir), "acpx", "wrappers");
  const native = opts?.kind === "node" || opts?.sourcePath !== undefined ? null : packagedNativeWrapper();
  if (opts?.kind === "native" && native === null)
    throw new Error("the native wrapper was asked for but is not available (Linux with the built addon only)");
  if (native !== null) {
    const installed = await installNative(stateDir, wrapperRoot, native);
    // a state dir on a noexec mount cannot run it: the Node wrapper then, unless the native one was insisted on
    if (
      (await runsHere(installed.wrapperPath)) ||
      opts?.kind === "native" ||
      process.env.PROCLEASE_WRAPPER === "native"
    )
      return installed;
  }
  const sourcePath = opts?.sourcePath ?? packagedWrapperPath();
  const text = wrapperShimSource(sourcePath, nativeAddonPath());
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 12);
  const wrapperPath = join(wrapperRoot, `acpx-wrapper-${digest}.cjs`);
  await ensurePrivateDir(join(resolve(stateDir), "acpx"));
  await ensurePrivateDir(wrapperRoot);
  // the shim every wrapper runs from: the same refusals and atomic write as the lease store
  const current = await readOwnedFile(wrapperPath, 64 * 1024);
  if (current.kind !== "ok" || current.text !== text) await atomicWrite(wrapperRoot, basename(wrapperPath), text, true);
  return { wrapperRoot, wrapperPath, sourcePath, kind: "node" };
}

/**
 * Whether the installed executable can be started from where it lies: run
 * once without arguments it refuses them (exit 2); a mount with noexec, or a
 * binary for another machine, fails the exec instead.
 */
function runsHere(path: string): Promise<boolean> {
  return new Promise((resolveRun) => {
    const child = spawn(path, [], { stdio: "ignore" });
    child.once("error", () => resolveRun(false));
    child.once("exit", (code) => resolveRun(code === 2));
  });
}

/**
 * Copies the native executable to `<wrapperRoot>/acpx-wrapper-<hash of its
 * bytes>` (0700, exclusive temp file, fsync, rename), unless a regular file
 * with the same bytes is there already. A copy, not a link: the live root's
 * executable must be under wrapperRoot for verification, and a package
 * upgrade must not change a file a running wrapper was started from.
 */
async function installNative(stateDir: string, wrapperRoot: string, sourcePath: string): Promise<InstalledWrapper> {
  const bytes = readFileSync(sourcePath);
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 12);
  const wrapperPath = join(wrapperRoot, `acpx-wrapper-${digest}`);
  await ensurePrivateDir(join(resolve(stateDir), "acpx"));
  await ensurePrivateDir(wrapperRoot);
  const st = await lstat(wrapperPath).catch(() => null);
  const same =
    st !== null &&
    st.isFile() &&
    (st.mode & 0o777) === 0o700 &&
    (await readFile(wrapperPath).catch(() => null))?.equals(bytes) === true;
  if (!same) {
    const tmp = join(wrapperRoot, `.tmp-acpx-wrapper-${digest}-${process.pid}-${Date.now().toString(36)}`);
    const fh = await open(tmp, "wx", 0o700);
    try {
      await fh.writeFile(bytes);
      await fh.chmod(0o700);
      await fh.sync();
      await fh.close();
      await rename(tmp, wrapperPath);
    } catch (err) {
      await fh.close().catch(() => undefined);
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
  }
  return { wrapperRoot, wrapperPath, sourcePath, kind: "native" };
}
