/**
 * The native backend's ProcessSnapshot: a view over the columns and lookup
 * tables the addon's worker thread built (native/snapshot_index.cc), so
 * taking a snapshot costs the main thread O(1) whatever the process count.
 * A record becomes a ProcessInfo object only when someone asks for it (get,
 * childrenOf, groupMembers, iteration), once per snapshot.
 *
 * The tables answer what buildSnapshot (snapshot.ts) answers for the other
 * backends, and test/facts/equivalence.test.ts holds them to it on a live
 * system: pids in walk order; a negative ppid or pgid (unknown) is nobody's
 * parent or group.
 */
import type { NativeSnapshot } from "./native-binding.js";
import { INT_FIELDS, REC_EXITING, REC_KERNEL_THREAD, REC_ZOMBIE_LEADER } from "./native-binding.js";
import type { ProcessInfo, ProcessSnapshot } from "./types.js";

const EMPTY: readonly ProcessInfo[] = Object.freeze([]);

/** One table of the index: [bits, m, keys[cap], start[cap], count[cap], order[m]]. */
class KeyTable {
  private readonly shift: number;
  private readonly mask: number;
  private readonly keysAt: number;
  private readonly startAt: number;
  private readonly countAt: number;
  readonly orderAt: number;
  /** where the next table starts */
  readonly end: number;

  constructor(
    private readonly t: Int32Array,
    base: number,
  ) {
    const bits = t[base]!;
    const m = t[base + 1]!;
    const cap = 1 << bits;
    this.shift = 32 - bits;
    this.mask = cap - 1;
    this.keysAt = base + 2;
    this.startAt = this.keysAt + cap;
    this.countAt = this.startAt + cap;
    this.orderAt = this.countAt + cap;
    this.end = this.orderAt + m;
  }

  /** The slot holding `key`, or -1. Keys are int32 >= 0; anything else is in no table. */
  private find(key: number): number {
    if (!(key >= 0 && key <= 0x7fffffff) || !Number.isInteger(key)) return -1;
    // the same Fibonacci hash as Slot() in snapshot_index.cc
    let h = Math.imul(key, 0x9e3779b1) >>> this.shift;
    for (;;) {
      const k = this.t[this.keysAt + h]!;
      if (k === key) return h;
      if (k === -1) return -1;
      h = (h + 1) & this.mask;
    }
  }

  /** [first, count] of key's run in order, or null. */
  run(key: number): [number, number] | null {
    const s = this.find(key);
    return s === -1 ? null : [this.t[this.startAt + s]!, this.t[this.countAt + s]!];
  }

  recordAt(orderPos: number): number {
    return this.t[this.orderAt + orderPos]!;
  }
}

class Columns {
  private readonly records: Array<ProcessInfo | undefined>;
  constructor(
    readonly count: number,
    private readonly ints: Int32Array,
    private readonly starts: Float64Array,
  ) {
    this.records = new Array<ProcessInfo | undefined>(count);
  }

  record(i: number): ProcessInfo {
    return (this.records[i] ??= this.make(i));
  }

  private make(i: number): ProcessInfo {
    const o = i * INT_FIELDS;
    const ints = this.ints;
    const flags = ints[o + 6]!;
    return Object.freeze({
      pid: ints[o]!,
      ppid: ints[o + 1]!,
      pgid: ints[o + 2]!,
      sid: ints[o + 3]!,
      uid: ints[o + 4]!,
      state: String.fromCharCode(ints[o + 5]!),
      startTime: String(this.starts[i]!),
      kernelThread: (flags & REC_KERNEL_THREAD) !== 0,
      zombieLeader: (flags & REC_ZOMBIE_LEADER) !== 0,
      exiting: (flags & REC_EXITING) !== 0,
    });
  }
}

/**
 * The records by pid, as a ReadonlyMap. A walk lists each pid once (/proc's
 * readdir goes through pids in increasing order), so size is the record count.
 */
class RecordMap implements ReadonlyMap<number, ProcessInfo> {
  constructor(
    private readonly cols: Columns,
    private readonly pids: KeyTable,
  ) {}

  get size(): number {
    return this.cols.count;
  }

  get(pid: number): ProcessInfo | undefined {
    const r = this.pids.run(pid);
    // the last of a run, as a Map fed in walk order would keep
    return r === null ? undefined : this.cols.record(this.pids.recordAt(r[0] + r[1] - 1));
  }

  has(pid: number): boolean {
    return this.pids.run(pid) !== null;
  }

  forEach(
    cb: (value: ProcessInfo, key: number, map: ReadonlyMap<number, ProcessInfo>) => void,
    thisArg?: unknown,
  ): void {
    for (let i = 0; i < this.cols.count; i++) {
      const p = this.cols.record(i);
      cb.call(thisArg, p, p.pid, this);
    }
  }

  *values(): MapIterator<ProcessInfo> {
    for (let i = 0; i < this.cols.count; i++) yield this.cols.record(i);
  }

  *keys(): MapIterator<number> {
    for (let i = 0; i < this.cols.count; i++) yield this.cols.record(i).pid;
  }

  *entries(): MapIterator<[number, ProcessInfo]> {
    for (let i = 0; i < this.cols.count; i++) {
      const p = this.cols.record(i);
      yield [p.pid, p];
    }
  }

  [Symbol.iterator](): MapIterator<[number, ProcessInfo]> {
    return this.entries();
  }
}

export function nativeSnapshot(takenAt: number, raw: NativeSnapshot): ProcessSnapshot {
  const cols = new Columns(raw.count, raw.ints, raw.starts);
  const pids = new KeyTable(raw.index, 0);
  const parents = new KeyTable(raw.index, pids.end);
  const groups = new KeyTable(raw.index, parents.end);
  const members = (table: KeyTable, key: number): readonly ProcessInfo[] => {
    const r = table.run(key);
    if (r === null) return EMPTY;
    const out = new Array<ProcessInfo>(r[1]);
    for (let j = 0; j < r[1]; j++) out[j] = cols.record(table.recordAt(r[0] + j));
    return out;
  };
  return {
    takenAt,
    processes: new RecordMap(cols, pids),
    childrenOf: (pid) => members(parents, pid),
    groupMembers: (pgid) => members(groups, pgid),
  };
}
