/** Output sinks for CLI commands, so tests can capture them without spawning. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

/** Thrown for bad flags or arguments; main() maps it to exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * Minimal flag parser: `--flag`, `--key value`, `--key=value`, repeated keys
 * collect into arrays. Unknown flags are a UsageError, never ignored.
 */
export function parseArgs(
  args: readonly string[],
  spec: { booleans?: readonly string[]; strings?: readonly string[]; multi?: readonly string[] },
): { flags: Record<string, string | boolean | string[]>; positionals: string[] } {
  const flags: Record<string, string | boolean | string[]> = {};
  const positionals: string[] = [];
  const booleans = new Set(spec.booleans ?? []);
  const strings = new Set(spec.strings ?? []);
  const multi = new Set(spec.multi ?? []);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (!a.startsWith("--")) {
      positionals.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    const key = eq === -1 ? a.slice(2) : a.slice(2, eq);
    if (booleans.has(key)) {
      if (eq !== -1) throw new UsageError(`--${key} takes no value`);
      flags[key] = true;
    } else if (strings.has(key) || multi.has(key)) {
      let value: string | undefined;
      if (eq !== -1) value = a.slice(eq + 1);
      else value = args[++i];
      if (value === undefined) throw new UsageError(`--${key} needs a value`);
      if (multi.has(key)) {
        const prev = flags[key];
        flags[key] = Array.isArray(prev) ? [...prev, value] : [value];
      } else flags[key] = value;
    } else {
      throw new UsageError(`unknown option --${key}`);
    }
  }
  return { flags, positionals };
}
