// Host hygiene for the suite. Every controller or supervisor a test makes has
// its own gateway instance id, and so its own folder of lease cgroups under
// `<our cgroup>/proclease` (see containment's model). A test that ends
// without dispose()/shutdown() leaves that folder, and sometimes an empty
// lease cgroup in it, on the host for good (one suite left 53 folders and 10
// lease cgroups, all empty). At the end of the run, each folder that appeared
// during it is removed when it holds no process; a lease cgroup that still
// holds one is a leak, named and left alone.
import { readdirSync } from "node:fs";
import { detectContainment, removeCgroup, removeOwnerFolder } from "../src/containment/cgroup.js";

function ownerFolders(root: string): Set<string> {
  try {
    return new Set(readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory() && !d.name.startsWith("_")).map((d) => d.name));
  } catch {
    return new Set();
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  const support = await detectContainment();
  if (!support.available) return async () => undefined;
  const before = ownerFolders(support.root);
  return async () => {
    let folders = 0;
    let leases = 0;
    const populated: string[] = [];
    for (const owner of ownerFolders(support.root)) {
      if (before.has(owner)) continue;
      const dir = `${support.root}/${owner}`;
      for (const name of ownerFolders(dir)) {
        const r = await removeCgroup(`${dir}/${name}`, { waitMs: 0 });
        if (r.outcome === "removed") leases++;
        else if (r.outcome === "busy" && r.populated) populated.push(`${dir}/${name}`);
      }
      if ((await removeOwnerFolder(support, owner)) === "removed") folders++;
    }
    console.log(`test teardown: removed ${folders} instance folder(s) and ${leases} empty lease cgroup(s) the run left under ${support.root}`);
    for (const p of populated) console.log(`test teardown: LEAK: ${p} still holds processes; left alone`);
  };
}
