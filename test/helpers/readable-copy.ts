/**
 * A checkout may sit in a 0700 folder (/root/…, a mktemp -d): a child run as
 * another uid cannot read a fixture or the addon from there. It gets them
 * from a world-readable temp copy instead, and runs with that folder as its
 * cwd. Removed once the test file that made it has run (a test worker can
 * end without an "exit" event, so that event alone is not enough).
 */
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll } from "vitest";

const made: string[] = [];
const removeAll = () => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
};
afterAll(removeAll);
process.once("exit", removeAll);

/** Copies each file into one fresh 0755 folder (files 0755: the addon is dlopen'ed); returns the folder and the copies, in order. */
export function worldReadableCopies(files: readonly string[]): { dir: string; paths: string[] } {
  const dir = mkdtempSync(join(tmpdir(), "proclease-readable-"));
  made.push(dir);
  chmodSync(dir, 0o755);
  const paths = files.map((f) => {
    const to = join(dir, basename(f));
    copyFileSync(f, to);
    chmodSync(to, 0o755);
    return to;
  });
  return { dir, paths };
}
