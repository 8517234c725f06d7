/**
 * Birth inside the lease's cgroup (docs/containment.md). Node's spawn cannot
 * pass CLONE_INTO_CGROUP, and moving the child from here after the spawn
 * races its first fork. So a contained run starts as a shell shim that moves
 * ITSELF (containment's enterCgroupShell: the writer joins) and then execs
 * the real command: the exec keeps the pid, the start time and the process group,
 * so the identity the lease records is the command's, and once the exec is
 * done its argv is the one the lease's command hash covers. Everything the
 * command forks is born inside the cgroup.
 *
 * A move that fails runs nothing: the shim prints why and exits with
 * SHIM_REFUSED_EXIT. A lease never names a cgroup while its command runs
 * outside it (the cgroup stays empty; populated 0 then settles the lease).
 */
import { execFile } from "node:child_process";
import { accessSync, constants as fsConstants, existsSync, statSync } from "node:fs";
import { delimiter, isAbsolute, resolve } from "node:path";
import { enterCgroupShell } from "../../containment/enter.js";

/** The shim's exit status when it could not enter the cgroup (and ran nothing). */
export const SHIM_REFUSED_EXIT = 125;

export const SHIM_SHELL = "/bin/sh";
/** the child shim's last exec: sets exactly the run's environment (see containedChild) */
export const SHIM_ENV = "/usr/bin/env";

// the join is containment's one rule, in its shell form (enter.ts)
const enter = `${enterCgroupShell('"$1"')} || { echo "proclease: the command was not run: it could not enter its lease cgroup $1" >&2; exit ${SHIM_REFUSED_EXIT}; }; shift; `;

/**
 * A run's own cgroup namespace, rooted at its cgroup, as the wrappers give
 * each adapter (docs/containment.md, "The boundary"): on a cgroup2 mounted
 * with nsdelegate a terminal's tree then cannot write itself out of its
 * cgroup, nor others into it, root included. util-linux's unshare without
 * --fork makes the namespace and execs in the same process, so the pid,
 * start time and group the lease records stay the command's. Whether it
 * works here (CAP_SYS_ADMIN, the program present) is probed once per
 * process, before the first contained run; until then, and where it does
 * not, runs start without it, contained as before.
 */
export const SHIM_UNSHARE = "/usr/bin/unshare";
let namespaceExec: string | null | undefined;

/** Probes once whether SHIM_UNSHARE can give a run its own cgroup namespace here; never rejects. */
export function probeRunNamespace(): Promise<string | null> {
  if (namespaceExec !== undefined) return Promise.resolve(namespaceExec);
  return new Promise((resolve) => {
    if (!existsSync(SHIM_UNSHARE)) {
      namespaceExec = null;
      resolve(null);
      return;
    }
    execFile(SHIM_UNSHARE, ["-C", "--", SHIM_SHELL, "-c", ":"], { timeout: 5000 }, (err) => {
      namespaceExec = err === null ? SHIM_UNSHARE : null;
      resolve(namespaceExec);
    });
  });
}

/** `exec unshare -C -- ` where the probe said it works, else `exec ` */
function execPrefix(): string {
  return namespaceExec ? `exec ${namespaceExec} -C -- ` : "exec ";
}

/**
 * Child runs: the shell starts with the two lease markers only (so the shim
 * itself verifies as the run's during its instant) and execs `env -i -- NAME=VALUE… argv`.
 * env then sets the environment exactly as given: a shell would drop names
 * that are not identifiers and rewrite PWD, which a child run (argv, no shell)
 * must not see. env looks argv[0] up in that environment's PATH, as Node does.
 */
const childShim = (): string => `${enter}${execPrefix()}${SHIM_ENV} -i -- "$@"`;
/** PTY runs: the command is `/bin/sh -c <ptyCommand>` already, which treats its environment as the shim's shell does. */
const ptyShim = (): string => `${enter}${execPrefix()}"$@"`;

/** Why this host cannot use the shim, or null when it can (both programs are the fixed paths above). */
export function shimUnavailable(): string | null {
  for (const p of [SHIM_SHELL, SHIM_ENV]) {
    if (!existsSync(p)) return `${p} is missing: a supervised run cannot be started inside its cgroup`;
  }
  return null;
}

export interface ShimCommand {
  file: string;
  args: string[];
}

/**
 * The child shim: `/bin/sh -c <shim> sh <cgroup> NAME=VALUE… <argv…>`, run
 * with the lease markers as its only environment. null when argv[0] contains
 * "=" (env would read it as an assignment) or a name is empty (env cannot set
 * it): such a run cannot go through the shim.
 */
export function containedChild(
  cgroupPath: string,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ShimCommand | null {
  if (argv.length === 0 || argv[0]!.includes("=")) return null;
  const pairs: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    // an empty name: env(1) cannot set it
    if (k === "") return null;
    pairs.push(`${k}=${v}`);
  }
  return { file: SHIM_SHELL, args: ["-c", childShim(), "sh", cgroupPath, ...pairs, ...argv] };
}

/** The PTY shim: `/bin/sh -c <shim> sh <cgroup> <argv…>` (argv = ptyArgv). */
export function containedPty(cgroupPath: string, argv: readonly string[]): ShimCommand {
  return { file: SHIM_SHELL, args: ["-c", ptyShim(), "sh", cgroupPath, ...argv] };
}

/**
 * Would an exec of `file` find an executable regular file (the lookup execvp
 * makes: a name with a slash relative to `cwd`, else each PATH entry of `env`)?
 * A program that cannot be found is spawned without the shim, so that Node
 * reports its spawn error as for any run (the shim would only exit 127).
 */
export function executableFound(file: string, env: NodeJS.ProcessEnv, cwd: string): boolean {
  if (file.includes("/")) return isExecutable(resolve(cwd, file));
  // Node (libuv) and env(1) both fall back to a default PATH when the environment has none
  const path = env.PATH ?? "/usr/bin:/bin";
  return path.split(delimiter).some((dir) => isExecutable(resolve(cwd, dir === "" ? "." : dir, file)));
}

function isExecutable(p: string): boolean {
  if (!isAbsolute(p)) return false;
  try {
    accessSync(p, fsConstants.X_OK);
    return statSync(p).isFile();
  } catch {
    return false;
  }
}
