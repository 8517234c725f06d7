/**
 * What one verification reads or works out once and asks many times:
 * process details, resolved paths, command hashes.
 *
 * Details are fetched in batches (facts.inspectMany:
 * on the native backend worker-thread jobs for each batch, so the reads of
 * /proc/PID/cmdline and environ, which can wait on the target's memory lock,
 * never run on the event loop) and kept for the rest of that verification.
 *
 * The pids are this process and pids of the verification's snapshot, so
 * they are read as listed (InspectOptions.listed): no status read per pid.
 *
 * Each pid's answer is independent: null = no such process, undefined = the
 * facts layer could not answer for it (unknown). A batch that fails as a
 * whole is asked again pid by pid, so one unreadable process costs only its
 * own answer.
 */
import { realpath } from "node:fs/promises";
import { resolve } from "node:path";
import type { ProcessDetails, ProcessFacts } from "../../facts/types.js";
import { computeCommandHash } from "../leases/command-hash.js";
import { isUnder } from "../leases/fs-safe.js";

export type Details = ProcessDetails | null | undefined;

export class DetailsBatch {
  private readonly got = new Map<number, Details>();

  constructor(
    private readonly facts: ProcessFacts,
    private readonly envKeys: readonly string[],
  ) {}

  /** Reads every pid not read yet, in one batch. Never rejects. */
  async fetch(pids: Iterable<number>): Promise<void> {
    const want = [...new Set(pids)].filter((pid) => !this.got.has(pid));
    if (want.length === 0) return;
    // listed: every pid a verification reads is this process, a lease root
    // found in its snapshot, or a candidate taken from it, and each answer's
    // start time is compared with that record (sameProcess) before it counts
    const opts = { envKeys: this.envKeys, listed: true };
    try {
      const out = await this.facts.inspectMany(want, opts);
      want.forEach((pid, i) => this.got.set(pid, out[i] ?? null));
    } catch {
      await Promise.all(
        want.map(async (pid) => {
          this.got.set(pid, await this.facts.inspect(pid, opts).catch(() => undefined));
        }),
      );
    }
  }

  /** Reads these pids again, in one batch: an answer read a moment ago may have changed (an exec in progress). */
  async refetch(pids: readonly number[]): Promise<void> {
    for (const pid of pids) this.got.delete(pid);
    await this.fetch(pids);
  }

  /** What was read for pid; a pid never fetched reads as unknown. */
  get(pid: number): Details {
    return this.got.get(pid);
  }
}

/**
 * Resolved paths for one verification: loaded together up front, then
 * answered synchronously. realpath where the path exists here, else the
 * normalised path (a live argv may name a file we cannot see).
 */
export class PathCache {
  private readonly real = new Map<string, string>();
  private readonly inside = new Map<string, boolean>();

  async load(paths: Iterable<string>): Promise<void> {
    const want = [...new Set(paths)].filter((p) => !this.real.has(p));
    if (want.length === 0) return;
    const got = await Promise.all(want.map((p) => realpath(p).catch(() => resolve(p))));
    want.forEach((p, i) => this.real.set(p, got[i]!));
  }

  get(p: string): string {
    return this.real.get(p) ?? resolve(p);
  }

  /** isUnder of two resolved paths, remembered: every lease of one gateway asks the same pair. */
  under(child: string, parent: string): boolean {
    const key = `${parent}\0${child}`;
    let v = this.inside.get(key);
    if (v === undefined) this.inside.set(key, (v = isUnder(child, parent)));
    return v;
  }
}

/** computeCommandHash, remembered per argv: the roots of one gateway mostly share theirs. */
export class CommandHashes {
  private readonly memo = new Map<string, string>();

  of(argv: readonly string[]): string {
    // no argv element can hold a NUL, so the join is unique per argv
    const key = argv.join("\0");
    let h = this.memo.get(key);
    if (h === undefined) this.memo.set(key, (h = computeCommandHash(argv)));
    return h;
  }
}
