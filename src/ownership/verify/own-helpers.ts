/**
 * This process's own helper processes: its keeper (keeper.ts registers it
 * while it runs). A helper is this process's child, not yet reaped, so its
 * pid names no one else while it is registered; it carries no lease's
 * markers (its environment is scrubbed) and may be unreadable to a process
 * that is not root (it makes itself non-dumpable). A search for what carries
 * a lease's markers therefore skips it rather than counting it as a process
 * it could not judge, which would keep a lease closing.
 */
const helpers = new Set<number>();

export function registerOwnHelper(pid: number): void {
  helpers.add(pid);
}

export function unregisterOwnHelper(pid: number): void {
  helpers.delete(pid);
}

export function isOwnHelper(pid: number): boolean {
  return helpers.has(pid);
}
