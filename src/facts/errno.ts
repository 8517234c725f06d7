/**
 * The facts layer's one errno map: what an errno from reading /proc or from
 * kill(2) means here. Nothing else in src/facts names an errno; a caller
 * reads the FactsFault (a closed union, so comparing it with an errno name
 * fails to type-check) and decides what it means there. The layers above
 * read their own map (containment/errors.ts, ownership/leases/host-faults.ts)
 * or this one: the session wrapper asks it, since host-faults.ts reads
 * /proc/self/limits when loaded and every wrapper start would pay for it;
 * test/architecture.test.ts finds an errno named anywhere else.
 *
 * - missing: ENOENT (the /proc entry is gone; for the wrapper, the command it spawns)
 * - no-process: ESRCH
 * - denied: EACCES, EPERM
 * - invalid: EINVAL
 * - name-too-long: ENAMETOOLONG (a link target longer than a page)
 * - no-descriptors: EMFILE, ENFILE
 * - other: anything else, or no errno at all
 */
export type FactsFault = "missing" | "no-process" | "denied" | "invalid" | "name-too-long" | "no-descriptors" | "other";

const BY_ERRNO: Readonly<Record<string, FactsFault>> = Object.freeze({
  ENOENT: "missing",
  ESRCH: "no-process",
  EACCES: "denied",
  EPERM: "denied",
  EINVAL: "invalid",
  ENAMETOOLONG: "name-too-long",
  EMFILE: "no-descriptors",
  ENFILE: "no-descriptors",
});

/** The fault an errno name stands for ("other" for none). */
export function factsFaultOfCode(code: string | undefined): FactsFault {
  return (code !== undefined && Object.hasOwn(BY_ERRNO, code) ? BY_ERRNO[code] : undefined) ?? "other";
}

/** The fault of a thrown error, by its `code`. */
export function factsFault(err: unknown): FactsFault {
  const c =
    typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;
  return factsFaultOfCode(c);
}
