/** `1 snapshot`, `0 snapshots`, `2 processes`: one plural for every report, from the facts rows up to the CLI's tables. */
export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : /(s|sh|ch|x)$/.test(noun) ? "es" : "s"}`;
}
