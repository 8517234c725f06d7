/**
 * What the real-cgroup containment tests share: the repository's paths, and
 * whether they run, which is the independent probe's call (never
 * detectContainment()'s), with the note a skipped test carries.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { detectContainment, type ContainmentSupport } from "../../src/containment/index.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, "..", "..");
export const FIX = join(ROOT, "test", "fixtures", "containment");

// Whether these tests run is the independent probe's call (a child moved into
// a cgroup of our own by hand), never detectContainment()'s: a detection that
// wrongly says "off" fails them instead of skipping them.
export const probe = await probeCgroup2();
export const support: ContainmentSupport = await detectContainment();
export const SKIP = probe.writable ? null : probe.why;
export const NOTE = containmentSkipNote(probe);
export const on = (s: ContainmentSupport) => {
  if (!s.available) throw new Error(s.why);
  return s;
};
