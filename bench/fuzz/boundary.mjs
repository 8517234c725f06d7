// The lease cgroup's boundary (docs/containment.md, "The boundary"): an
// adapter's tree cannot move a process across its lease cgroup only where
// cgroup2 is mounted with nsdelegate. A host without it (this project's build
// machine) lets a root agent write its escapee into the root cgroup, a
// documented limit. So the fuzzer judges the boundary as a host that has it
// would: as root it remounts cgroup2 with nsdelegate for its own run and
// restores the mount's options afterwards (it changes nothing for a process
// in the host's cgroup namespace, which is every process but the adapters
// and terminals it starts). With --no-nsdelegate, or where the remount is
// refused, the host is fuzzed as it is and an escapee outside the lease's
// cgroup after such a write is counted as that limit, not as a failure.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

function optionsOf(mount) {
  const line = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .find((l) => l.includes(" - cgroup2 ") && l.split(" ")[4] === mount);
  return line === undefined ? null : line.split(" - ")[1].split(" ")[2].split(",");
}

/** { held, why, restore() }: whether the boundary holds for this run, and how to put the mount back. */
export function holdBoundary(mount, { off = false } = {}) {
  const none = { restore() {} };
  if (!mount) return { ...none, held: false, why: "no cgroup2: no containment" };
  const options = optionsOf(mount);
  if (options === null) return { ...none, held: false, why: `${mount} is not in /proc/self/mountinfo` };
  if (options.includes("nsdelegate")) return { ...none, held: true, why: `${mount} is mounted with nsdelegate` };
  if (off) return { ...none, held: false, why: `${mount} as it is, without nsdelegate` };
  try {
    execFileSync("mount", ["-o", `remount,${[...options, "nsdelegate"].join(",")}`, "cgroup2", mount], {
      stdio: "pipe",
    });
  } catch (e) {
    return {
      ...none,
      held: false,
      why: `${mount} could not be remounted with nsdelegate: ${e.message.split("\n")[0]}`,
    };
  }
  let restored = false;
  return {
    held: true,
    why: `${mount} remounted with nsdelegate for this run (put back at its end)`,
    restore() {
      if (restored) return;
      restored = true;
      execFileSync("mount", ["-o", `remount,${options.join(",")}`, "cgroup2", mount], { stdio: "pipe" });
    },
  };
}
