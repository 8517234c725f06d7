/**
 * The wrapper's command line: `[--grace-ms N] -- <adapter argv...>`. The
 * `--` is required so an adapter argv can never be read as wrapper options.
 */
import { assertGraceMs, DEFAULT_GRACE_MS } from "./protocol.js";

export interface WrapperArgs {
  graceMs: number;
  command: string[];
}

/** Throws TypeError/RangeError naming the bad argument. */
export function parseWrapperArgs(argv: readonly string[]): WrapperArgs {
  let graceMs = DEFAULT_GRACE_MS;
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") break;
    let value: string | undefined;
    if (a === "--grace-ms") {
      value = argv[++i];
      if (value === undefined) throw new TypeError("--grace-ms needs a value");
    } else if (a.startsWith("--grace-ms=")) {
      value = a.slice("--grace-ms=".length);
    } else {
      throw new TypeError(`unknown wrapper option ${JSON.stringify(a)} (adapter argv goes after "--")`);
    }
    const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
    assertGraceMs(Number.isNaN(n) ? value : n, "--grace-ms");
    graceMs = n;
  }
  if (i >= argv.length) throw new TypeError('missing "--" before the adapter argv');
  const command = argv.slice(i + 1);
  if (command.length === 0 || command[0] === "") throw new TypeError('missing adapter command after "--"');
  return { graceMs, command };
}
