/**
 * Public surface of src/containment: kernel-enforced containment, one
 * cgroup v2 per lease (Linux only).
 *
 * The model. A process's cgroup does not change when it forks, calls setsid,
 * clears its environment or is re-parented to init; only a write to some
 * cgroup.procs moves it (enter.ts, the one such write). So when a lease's
 * first process joins `<gateway cgroup>/proclease/<instance id>/<leaseId>`
 * before it starts anything, every descendant is born there and stays there,
 * and the kernel can answer three questions that a /proc walk cannot answer
 * for an escapee:
 * - who belongs to the lease: cgroup.procs of the lease cgroup (and of any
 *   cgroup below it), whatever their environment or parent;
 * - is anything left: `populated 0|1` in cgroup.events, kept by the kernel,
 *   not a search;
 * - end them all: one write of "1" to cgroup.kill (Linux >= 5.14) sends
 *   SIGKILL to the whole subtree atomically, forks made meanwhile included.
 *
 * The modules, by concern:
 * - mountinfo.ts   the mount table, /proc/PID/cgroup, a process's cgroup as a path
 * - paths.ts       names and layout, "inside that cgroup", the shape checks
 * - files.ts       interface files: populated, members, identity
 * - controllers.ts the controller plan and the no-internal-processes rule
 * - detect.ts      detectContainment: locate, make the root, probe, controllers
 * - handle.ts      LeaseCgroup: a lease cgroup checked once (create, open), listing, instance folders
 * - kill.ts        kill, signal the members, remove
 * - members.ts     what a drain that judges each member needs: freeze, list, move out
 * - boundary.ts    whether an adapter's tree can move processes across its lease cgroup
 * - enter.ts       joining a cgroup (for Node and for a shell)
 * - resources.ts   memory readings and limits
 * - errors.ts      the one errno → outcome map, and the error thrown for bad arguments
 *
 * Outcomes are typed and fail closed: "gone" is said only for a missing
 * file, directory or process; anything unreadable is "unknown", never
 * "empty". Nothing here throws for a missing cgroup, a vanished process or
 * an unsupported kernel; only bad arguments (a programming error) throw a
 * ContainmentArgumentError (a TypeError).
 */
export { CGROUP_NAME_RE, GATEWAY_LEAF, PROCLEASE_DIR, cgroupPathProblem, pathShapeProblem } from "./paths.js";
export { ContainmentArgumentError } from "./errors.js";
export { readCgroupOf } from "./mountinfo.js";
export { readOwnMount } from "./mountinfo.js";
export type { Cgroup2Mount } from "./mountinfo.js";
export { isPopulated, membersOf, subdirectories, waitUntilEmpty } from "./files.js";
export type { MembersResult, PopulatedState } from "./files.js";
export { detectContainment, mountOf } from "./detect.js";
export type { Boundary, BoundaryGap } from "./boundary.js";
export type { ContainmentOffCode, ContainmentSupport, DetectOptions } from "./detect.js";
export type { ControllerProblem, ControllerProblemCode } from "./controllers.js";
export {
  createLeaseCgroup,
  listLeaseCgroups,
  openLeaseCgroup,
  refOf,
  removeEmptyInstanceFolder,
  removeInstanceFolder,
  verifyCgroupIdentity,
} from "./handle.js";
export type {
  CreateLeaseCgroupResult,
  IdentityVerdict,
  LeaseCgroup,
  LeaseCgroupRef,
  ListedCgroup,
  ListResult,
  OpenLeaseCgroupResult,
} from "./handle.js";
export { killCgroup, removeCgroup, signalMembers } from "./kill.js";
export type { KillOptions, KillOutcome, KillRefusal, MemberSignal, RemoveOutcome } from "./kill.js";
export { foreignLeaf, freeze, homesOf, listMembers, moveOut, recordHome, removeForeignLeaf, thaw } from "./members.js";
export type { FreezeOutcome, ListedMember, ListMembers } from "./members.js";
export { enterCgroup, enterCgroupAsync, enterCgroupShell, isInCgroup } from "./enter.js";
export type { EnterOutcome } from "./enter.js";
export { applyLimits, isLimitValue, readMemory } from "./resources.js";
export type { ApplyLimitsResult, Limits, MemoryReading } from "./resources.js";
