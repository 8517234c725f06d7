/**
 * The teardown the CLI's cgroup tests share: every cgroup below a test's top
 * folders killed (cgroup.kill), then removed deepest first, waiting for the
 * kernel to let each go.
 */
import { readdirSync, rmdirSync, writeFileSync } from "node:fs";
import { waitFor } from "../supervisor/helpers.js";

/** Every cgroup below `dir`, deepest first. */
export function cgroupsBelow(dir: string): string[] {
  let out: string[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
  for (const n of names) out = out.concat(cgroupsBelow(`${dir}/${n}`), [`${dir}/${n}`]);
  return out;
}

/** Kills what runs in each top folder and below, then removes them all (ENOENT counts as removed). */
export async function removeCgroupTrees(tops: string[]): Promise<void> {
  for (const top of tops.splice(0)) {
    for (const cg of [...cgroupsBelow(top), top]) {
      try {
        writeFileSync(`${cg}/cgroup.kill`, "1");
      } catch {
        // gone, or no cgroup.kill: the caller's SIGKILLs ended its children
      }
    }
    for (const cg of [...cgroupsBelow(top), top]) {
      await waitFor(() => {
        try {
          rmdirSync(cg);
          return true;
        } catch (e) {
          return (e as NodeJS.ErrnoException).code === "ENOENT";
        }
      }, 10_000);
    }
  }
}
