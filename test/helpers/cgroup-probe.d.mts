export type Cgroup2Probe =
  | {
      writable: true;
      mount: string;
      /** this process's cgroup, as a path under the mount */
      own: string;
      /** "unified": cgroup2 alone; "hybrid": v1 hierarchies mounted beside it */
      layout: "unified" | "hybrid";
    }
  | { writable: false; why: string; layout: "unified" | "hybrid" | "none" };

/** Makes a cgroup under this process's own cgroup on a cgroup2 mount, moves a child into it, removes it (once per process). */
export function probeCgroup2(): Promise<Cgroup2Probe>;
/** " [skipped: …]" when the probe says no, "" when it says yes */
export function containmentSkipNote(p: Cgroup2Probe): string;
/** root-hybrid, root-unified, root-no-cgroup2, user-… */
export function hostKind(): Promise<string>;
/** which of `wanted` lease cgroups can use (listed at the cgroup2 root, not bound to v1), and which are bound to a v1 hierarchy */
export function v2ControllersFor(wanted: readonly string[]): Promise<{ usable: string[]; onV1: string[] }>;
