import type { Sequence } from "./plan.mjs";

export interface Failure {
  inv: string;
  detail: string;
}
export interface Incident {
  inv: string;
  detail: string;
  /** execution ids of the sequences running when it came */
  active: string[];
  gateway: string;
  at: number;
}
export interface ExecutionResult {
  seq: Sequence;
  id: string;
  gateway: string;
  failures: Failure[];
  incidents: Incident[];
  crashed: boolean;
  gatewayGone: boolean;
  harness: string | null;
  ms: number;
}
export interface HostProbe {
  mount: string | null;
  python: string | null;
  pythonNobody: string | null;
  /** why uid 65534 cannot run a gateway here, or null */
  nobody: string | null;
  runDir: string;
}
export type Plant = "leftover" | "signal" | "block" | "rss";
export const ROOT: string;
export class Runner {
  constructor(o: {
    seed: number;
    concurrency: number;
    keep?: boolean;
    nsdelegate?: "remount" | "as-is";
    log: (line: string) => void;
  });
  readonly incidents: Incident[];
  setup(): Promise<HostProbe>;
  runMany(
    seqs: Sequence[],
    concurrency: number,
    deadline?: number,
    onResult?: (r: ExecutionResult) => void,
  ): Promise<ExecutionResult[]>;
  runAlone(seq: Sequence, plant?: Plant[]): Promise<ExecutionResult>;
  teardown(): Promise<void>;
  emergency(): Promise<void>;
}
