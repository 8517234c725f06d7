// What a Linux prebuild folder holds, in one place: scripts/prebuild-linux.mjs
// builds these files and scripts/prepack.mjs refuses to pack without them. This
// module only reads binding.gyp (no build runs on import), so both can load it.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** the addon's name in each folder; the `glibc` tag keeps node-gyp-build from handing it to a musl Node */
export const ADDON_FILE = "proclease.napi.glibc.node";

/** the folders under prebuilds/, one per architecture prebuild-linux.mjs targets */
export const PREBUILD_DIRS = ["linux-x64", "linux-arm64"];

/**
 * The C executables built beside the addon: binding.gyp's targets whose
 * OS=='linux' branch makes an executable, each named after its target, so a
 * new executable in binding.gyp is built and checked without editing a list.
 */
export const EXECUTABLES = JSON.parse(readFileSync(join(root, "binding.gyp"), "utf8"))
  .targets.filter((t) => (t.conditions ?? []).some(([c, linux]) => c === "OS=='linux'" && linux?.type === "executable"))
  .map((t) => t.target_name);
