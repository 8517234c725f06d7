// npm's prepack hook: runs before every `npm pack` and `npm publish` (never on
// an install, and not for a git dependency, where npm runs only prepare), so
// no tarball leaves without its prebuilt addons. It builds
// prebuilds/linux-x64 and prebuilds/linux-arm64 from the sources in the
// checkout (scripts/prebuild-linux.mjs), after removing whatever prebuilds/
// held, so a stale addon can never ship. npm then runs prepare, which builds
// dist/.
//
// From a fresh clone with no node_modules, `npm pack` alone works: this
// installs the locked dependencies first (`npm ci --ignore-scripts`, which
// compiles nothing), because the build needs typescript, vite and
// node-addon-api. A node_modules that is there but lacks one of them is
// someone's work in progress: this stops and says so instead of replacing it.
//
// `npm pack --ignore-scripts` skips this hook and would pack no prebuilds; the
// tarball check in .ci/run packs without that flag.
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ADDON_FILE, EXECUTABLES, PREBUILD_DIRS } from "./prebuild-files.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const NEEDED = ["typescript", "vite", "node-addon-api", "node-gyp-build"];

const missing = () => NEEDED.filter((p) => !existsSync(join(root, "node_modules", p, "package.json")));

if (!existsSync(join(root, "node_modules"))) {
  console.log("prepack: no node_modules: installing the locked dependencies (npm ci --ignore-scripts)");
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
}
const still = missing();
if (still.length > 0) {
  console.error(`prepack: node_modules lacks ${still.join(", ")}: run npm ci, then pack again`);
  process.exit(1);
}

rmSync(join(root, "prebuilds"), { recursive: true, force: true });
execFileSync(process.execPath, [join(root, "scripts/prebuild-linux.mjs")], { cwd: root, stdio: "inherit" });
for (const dir of PREBUILD_DIRS) {
  for (const file of [ADDON_FILE, ...EXECUTABLES]) {
    if (!existsSync(join(root, "prebuilds", dir, file))) {
      console.error(`prepack: prebuilds/${dir}/${file} was not built: no tarball without it`);
      process.exit(1);
    }
  }
}
