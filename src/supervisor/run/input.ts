/** The checks a `SpawnInput` passes before anything (registry record, lease, cgroup) is made for it. */
import { checkCwd } from "../../ownership/index.js";
import type { SpawnInput } from "../shared/types.js";

/** TypeError naming the field for a malformed input; a CwdUnusableError naming an unusable cwd. */
export function validateSpawnInput(input: SpawnInput): void {
  if (input === null || typeof input !== "object") throw new TypeError("spawn input must be an object");
  if (typeof input.sessionId !== "string") throw new TypeError("sessionId must be a string");
  if (typeof input.backendId !== "string") throw new TypeError("backendId must be a string");
  if (input.mode === "child") {
    if (typeof input.argv === "string")
      throw new TypeError(
        'argv must be an argv array, got a string: give the program and each argument as its own entry (["sh", "-c", "…"] for a shell line)',
      );
    if (!Array.isArray(input.argv) || input.argv.length === 0) throw new TypeError("argv must be a non-empty array");
    input.argv.forEach((a: unknown, i) => {
      if (typeof a !== "string") throw new TypeError(`argv[${i}] must be a string`);
    });
    if (input.argv[0] === "") throw new TypeError("argv[0] must be a non-empty program name");
    if (input.stdinMode !== undefined && !["inherit", "pipe-open", "pipe-closed"].includes(input.stdinMode)) {
      throw new TypeError(`stdinMode must be inherit, pipe-open or pipe-closed, got ${String(input.stdinMode)}`);
    }
  } else if (input.mode === "pty") {
    if (typeof input.ptyCommand !== "string" || input.ptyCommand.trim() === "") {
      throw new TypeError("ptyCommand must be a non-empty command string (PTY runs never rebuild one from argv)");
    }
  } else {
    throw new TypeError(`mode must be "child" or "pty", got ${JSON.stringify((input as { mode?: unknown }).mode)}`);
  }
  // exists, is a directory, may be entered: else a CwdUnusableError naming it, before any lease or cgroup is made
  if (input.cwd !== undefined) checkCwd(input.cwd);
}
