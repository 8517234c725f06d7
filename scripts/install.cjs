// npm "install" script. npm 11 names it two ways: its install-time warning
// lists "install: node scripts/install.cjs" (this file), and
// `npm install-scripts ls` lists "install: node-gyp rebuild" (npm's name for
// any package with a binding.gyp). Both mean this file, which runs
// `node-gyp rebuild` only where no prebuilt addon fits:
// - linux-x64 and linux-arm64 on glibc ship one (prebuilds/, built for
//   glibc >= 2.28 by scripts/prebuild-linux.mjs): when it loads, nothing is
//   compiled and nothing is printed.
// - Elsewhere (macOS, musl/Alpine, other architectures, an older glibc) it
//   says in one line what it runs and why, then lets node-gyp-build run
//   node-gyp rebuild on native/. A failed compile does not fail the install: proclease then runs
//   on its pure-TypeScript backends (procfs on Linux, ps elsewhere), and
//   `npx proclease doctor` says what that costs.
"use strict";
const { spawnSync } = require("node:child_process");
const { existsSync } = require("node:fs");
const { join, relative } = require("node:path");

const root = join(__dirname, "..");
let found = null;
try {
  found = require("node-gyp-build").path(root);
} catch {
  // nothing prebuilt or built for this platform, Node ABI and libc
}
// A prebuild that fits the platform tag can still fail to load (a glibc older
// than the one it was linked for): then compile, as where none fits. It is
// loaded in a child Node, so even a load that crashes cannot fail the install.
let loadFailure = null;
if (found !== null) {
  const probe = spawnSync(process.execPath, ["-e", "require(process.argv[1])", found], { encoding: "utf8" });
  if (probe.status !== 0) {
    const lines = `${probe.stderr ?? ""}`.split("\n").filter((l) => /error/i.test(l));
    loadFailure = lines[0]?.trim() ?? `exit ${probe.status ?? probe.signal}`;
  }
}
if (found === null || loadFailure !== null) {
  // the libc node-gyp-build matched prebuilds against (its own rule)
  const libc =
    process.platform === "linux" ? (process.env.LIBC ?? (existsSync("/etc/alpine-release") ? "musl" : "glibc")) : "";
  const why =
    found === null
      ? `no prebuilt addon for ${process.platform}-${process.arch}${libc ? ` (${libc})` : ""}`
      : `${relative(root, found)} does not load here (${loadFailure})`;
  console.log(
    `proclease: install: ${why}; running node-gyp rebuild ` +
      "(needs a C++17 compiler and Python, about a minute) for exact start times and race-free signals",
  );
  const r = spawnSync(process.execPath, [require.resolve("node-gyp-build/bin.js")], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.log(
      "proclease: install: node-gyp rebuild failed; proclease still works through its TypeScript backends (see `npx proclease doctor`)",
    );
  }
}
