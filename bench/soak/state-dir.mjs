// The soak's own reads of the state dir (independent of the library's store):
// the lease files, live and archived, a new one for a key, and quarantine.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Lease files on disk, read directly (an independent look at the store). */
export function diskLeases(leaseDir) {
  const byId = new Map();
  const read = (dir, where) => {
    let names = [];
    try {
      names = readdirSync(dir).filter((n) => n.endsWith(".json") && !n.startsWith("."));
    } catch {
      return;
    }
    for (const n of names) {
      try {
        const l = JSON.parse(readFileSync(join(dir, n), "utf8"));
        const id = typeof l.leaseId === "string" ? l.leaseId : n;
        // the archive copy wins over a live one left by an interrupted move (lease-store.ts)
        if (where === "archive" || !byId.has(id)) byId.set(id, { ...l, leaseId: id, where });
      } catch (e) {
        byId.set(n, { leaseId: n, state: "unparseable", where, error: String(e.message) });
      }
    }
  };
  read(join(leaseDir, "archive"), "archive");
  read(leaseDir, "live");
  return byId;
}

/** Every file under any folder named "quarantine" in the state dir. */
export function quarantined(dir) {
  const out = [];
  let entries = [];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!e.isDirectory()) continue;
    const p = join(dir, e.name);
    if (e.name === "quarantine") for (const f of readdirSync(p)) out.push(join(p, f));
    else out.push(...quarantined(p));
  }
  return out;
}

/** New lease file for key, not among `before` (poll). */
export function newLeaseFor(leaseDir, key, before) {
  let names = [];
  try {
    names = readdirSync(leaseDir).filter((n) => n.endsWith(".json") && !before.has(n));
  } catch {
    return null;
  }
  for (const n of names) {
    try {
      const l = JSON.parse(readFileSync(join(leaseDir, n), "utf8"));
      if (l.sessionKey === key) return l;
    } catch {
      /* mid-write */
    }
  }
  return null;
}
