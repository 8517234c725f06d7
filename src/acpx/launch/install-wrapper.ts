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
 *
 * Decision (issue 46, docs/wrapper.md "What runs is what was installed"):
 * the copy under the state dir is writable by the gateway's uid, so by an
 * agent of that uid, and a later session (another agent's, with its
 * credentials in its environment) would run whatever was put there. So the
 * native wrapper is not executed from that file: its bytes, read from the
 * package once, go into a sealed memfd (the addon's sealedCopy), which no
 * write can change afterwards, and every wrapper is exec'd from it
 * (`/proc/self/fd/N`, argv[0] and argv[1] the installed path, by which
 * verification knows it). Where the host refuses to exec a memfd
 * (vm.memfd_noexec=2, a seccomp policy), and for the Node wrapper's shim
 * (Node opens its script by path), the installed file is checked right
 * before each spawn and put back when it changed (`check`), with a warning;
 * that leaves a window between the check and the exec which an agent of
 * the gateway's uid can race, and says so in the docs.
 */
import { spawn } from "node:child_process";
import { loadNative } from "../../facts/native.js";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { lstat, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ADDON_PATH_GLOBAL, nativeAddonPath } from "../../facts/native.js";
import { atomicWrite, ensurePrivateDir, readOwnedFile } from "../../ownership/leases/fs-safe.js";

export type WrapperKind = "native" | "node";

export interface InstalledWrapper {
  /** `<stateDir>/acpx/wrappers` */
  wrapperRoot: string;
  /** under wrapperRoot: the native executable (spawned as `<wrapperPath> …`) or the shim (`node <wrapperPath> …`) */
  wrapperPath: string;
  /** the package file the shim imports, or the packaged native executable that was copied */
  sourcePath: string;
  kind: WrapperKind;
  /**
   * The native wrapper's executable for spawn: `/proc/self/fd/N` of the
   * sealed copy ("sealed"), or wrapperPath ("file"). Node: the shim's path.
   */
  execPath: string;
  /** "sealed": what runs cannot differ from the bytes verified at install; "file": checked (and restored) by check() */
  holds: "sealed" | "file";
  /**
   * Right before a spawn: nothing for a sealed copy; else the installed file
   * is compared with what was installed and put back when it differs.
   * Resolves with what was found (null: intact), rejects when it cannot be
   * put back.
   */
  check(): Promise<string | null>;
}

/** One sealed copy per distinct binary per process, held for the process's life (a closed descriptor's number could name another file at a spawn). */
const sealedCopies = new Map<string, number>();

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
 * The bundled wrapper of this package. From dist/acpx/launch/ it is
 * `../wrapper.cjs`; when this module runs from src/ (tests through vitest)
 * the package's dist/ build is used instead (build first).
 */
export function packagedWrapperPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, "..", "wrapper.cjs");
  if (existsSync(sibling)) return sibling;
  const fromSrc = resolve(here, "..", "..", "..", "dist", "acpx", "wrapper.cjs");
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
    const bytes = readFileSync(native);
    const wrapperPath = await installNative(stateDir, wrapperRoot, bytes);
    const base = { wrapperRoot, wrapperPath, sourcePath: native, kind: "native" as const };
    const sealed = sealedCopyOf(bytes);
    if (sealed !== null && (await runsHere(sealed, wrapperPath))) {
      return { ...base, execPath: sealed, holds: "sealed", check: () => Promise.resolve(null) };
    }
    // a state dir on a noexec mount cannot run it: the Node wrapper then, unless the native one was insisted on
    if (
      (await runsHere(wrapperPath, wrapperPath)) ||
      opts?.kind === "native" ||
      process.env.PROCLEASE_WRAPPER === "native"
    )
      return {
        ...base,
        execPath: wrapperPath,
        holds: "file",
        check: () => restoreNative(wrapperRoot, wrapperPath, bytes),
      };
  }
  const sourcePath = opts?.sourcePath ?? packagedWrapperPath();
  const text = wrapperShimSource(sourcePath, nativeAddonPath());
  const digest = createHash("sha256").update(text).digest("hex").slice(0, 12);
  const wrapperPath = join(wrapperRoot, `acpx-wrapper-${digest}.cjs`);
  await ensurePrivateDir(join(resolve(stateDir), "acpx"));
  await ensurePrivateDir(wrapperRoot);
  // the shim every wrapper runs from: the same refusals and atomic write as the lease store
  const restoreShim = async (): Promise<string | null> => {
    const current = await readOwnedFile(wrapperPath, 64 * 1024);
    if (current.kind === "ok" && current.text === text) return null;
    await atomicWrite(wrapperRoot, basename(wrapperPath), text, true);
    return current.kind === "missing"
      ? `the wrapper shim ${wrapperPath} was missing; it was written again`
      : `the wrapper shim ${wrapperPath} was not the one installed (${current.kind === "ok" ? "its content changed" : current.kind}); it was put back`;
  };
  await restoreShim();
  return {
    wrapperRoot,
    wrapperPath,
    sourcePath,
    kind: "node",
    execPath: wrapperPath,
    holds: "file",
    check: restoreShim,
  };
}

/** The sealed in-memory copy of `bytes` as `/proc/self/fd/N`, or null where there is none (not Linux, no addon, memfd refused). */
function sealedCopyOf(bytes: Buffer): string | null {
  if (process.platform !== "linux") return null;
  const digest = createHash("sha256").update(bytes).digest("hex");
  let fd = sealedCopies.get(digest);
  if (fd === undefined) {
    const made = loadNative()?.sealedCopy(`proclease-wrapper-${digest.slice(0, 12)}`, bytes);
    if (made === undefined || made < 0) return null;
    fd = made;
    sealedCopies.set(digest, fd);
  }
  return `/proc/self/fd/${fd}`;
}

/**
 * Whether the installed executable can be started from where it lies: run
 * once without arguments it refuses them (exit 2); a mount with noexec, or a
 * binary for another machine, fails the exec instead.
 */
function runsHere(path: string, argv0: string): Promise<boolean> {
  return new Promise((resolveRun) => {
    const child = spawn(path, [], { stdio: "ignore", argv0 });
    child.once("error", () => resolveRun(false));
    child.once("exit", (code) => resolveRun(code === 2));
  });
}

/**
 * Copies the native executable to `<wrapperRoot>/acpx-wrapper-<hash of its
 * bytes>` (0700, exclusive temp file, fsync, rename), unless a regular file
 * with the same bytes is there already; returns its path. A copy, not a
 * link: it names the wrapper (verification knows it by that path), runs it
 * where no sealed copy can be exec'd, and a package upgrade must not change
 * a file a running wrapper was started from.
 */
async function installNative(stateDir: string, wrapperRoot: string, bytes: Buffer): Promise<string> {
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 12);
  const wrapperPath = join(wrapperRoot, `acpx-wrapper-${digest}`);
  await ensurePrivateDir(join(resolve(stateDir), "acpx"));
  await ensurePrivateDir(wrapperRoot);
  await restoreNative(wrapperRoot, wrapperPath, bytes);
  return wrapperPath;
}

/** The installed copy as it must be (a 0700 regular file with these bytes), put back when it is not; what was found, or null when intact. */
async function restoreNative(wrapperRoot: string, wrapperPath: string, bytes: Buffer): Promise<string | null> {
  const st = await lstat(wrapperPath).catch(() => null);
  const same =
    st !== null &&
    st.isFile() &&
    (st.mode & 0o777) === 0o700 &&
    (await readFile(wrapperPath).catch(() => null))?.equals(bytes) === true;
  if (!same) {
    const digest = basename(wrapperPath).slice("acpx-wrapper-".length);
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
  if (same) return null;
  return st === null
    ? `the native wrapper ${wrapperPath} was missing; it was copied again`
    : `the native wrapper ${wrapperPath} was not the one installed; it was put back`;
}
