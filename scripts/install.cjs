// npm "install" script. A platform with a prebuilt addon in prebuilds/ (Linux
// x64 ships one) compiles nothing and prints nothing. Elsewhere it says in one
// line what is compiled and why, then lets node-gyp-build compile native/. A
// failed compile does not fail the install: proclease then runs on its
// pure-TypeScript backends (procfs on Linux, ps elsewhere), and
// `npx proclease doctor` says what that costs.
"use strict";
const { spawnSync } = require("node:child_process");
const { join } = require("node:path");

const root = join(__dirname, "..");
let found = null;
try {
  found = require("node-gyp-build").path(root);
} catch {
  // nothing prebuilt or built for this platform, Node ABI and libc
}
if (found === null) {
  console.log(
    `proclease: no prebuilt addon for ${process.platform}-${process.arch}; compiling native/ with node-gyp ` +
      "(C++17 compiler and Python needed, about a minute) for exact start times and race-free signals",
  );
  const r = spawnSync(process.execPath, [require.resolve("node-gyp-build/bin.js")], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.log("proclease: the addon did not compile; proclease still works through its TypeScript backends (see `npx proclease doctor`)");
  }
}
