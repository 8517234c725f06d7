// A read-only view of a state dir's leases, for callers outside the lifecycle
// (a status page, a CI check, an operator tool). It holds no lock and can
// change nothing: the store it wraps is opened read-only, and only its two
// reads are handed out, so a lease still moves only through lifecycle.ts.
import { openLeaseStore } from "./lease-store.js";
import type { LeaseListFilter, LeaseProblem } from "./lease-store-api.js";
import type { ProcessLease } from "./types.js";

export interface LeaseReader {
  /** <stateDir>/acpx/leases */
  readonly dir: string;
  /** null when absent, or when the file is unreadable or malformed */
  get(leaseId: string): Promise<ProcessLease | null>;
  /** Every readable lease matching the filter, sorted by startedAt; bad files come back as problems (never moved). */
  list(filter?: LeaseListFilter): Promise<{ leases: ProcessLease[]; problems: LeaseProblem[] }>;
}

/** Opens `stateDir`'s leases for reading; a state dir without leases lists none. Throws TypeError for an empty path. */
export async function openLeaseReader(stateDir: string): Promise<LeaseReader> {
  const store = await openLeaseStore(stateDir, { readOnly: true });
  return Object.freeze({
    dir: store.dir,
    get: (leaseId: string) => store.get(leaseId),
    list: (filter?: LeaseListFilter) => store.list(filter),
  });
}
