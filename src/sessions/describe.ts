/** Small shared helpers for error messages and shape checks (not exported from the package). */

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * `obj[key]` when `obj` has it as its OWN property, else undefined. Every
 * field the visibility rule, the a2a policy and the owner readers take from
 * caller data goes through here: an inherited value (a polluted
 * Object.prototype, a row built on a hostile prototype) is never a fact.
 */
export function own(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

export function isNonEmptyString(v: unknown): v is string {
  return typeof v === "string" && v.length > 0;
}

/** Short, log-safe description of a bad value for a TypeError message. */
export function describeValue(v: unknown): string {
  if (typeof v === "string") return v.length > 60 ? `${JSON.stringify(v.slice(0, 60))}…` : JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}
