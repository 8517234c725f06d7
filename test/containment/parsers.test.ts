// Pure parts of containment: the /proc/self/mountinfo and /proc/PID/cgroup
// parsers on fixture text from real layouts (hybrid, pure v2, v1-only, a
// container's subtree, escaped paths), and the controller plan as a matrix.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  planControllers,
  type ControllerPlanInput,
  type ControllerProblemCode,
} from "../../src/containment/controllers.js";
import { parseControllerList, parsePopulated } from "../../src/containment/files.js";
import {
  findCgroup2Mount,
  fsPathOf,
  parseMountInfo,
  parseProcCgroup,
  unescapeMountField,
} from "../../src/containment/mountinfo.js";
import { CGROUP_NAME_RE } from "../../src/containment/paths.js";

const FIX = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "containment");
const fixture = (name: string) => readFileSync(join(FIX, name), "utf8");

/** Where a gateway with this mountinfo and /proc/self/cgroup finds its own cgroup. */
function ownCgroupDir(layout: string): string | null {
  const entries = parseMountInfo(fixture(`mountinfo-${layout}.txt`));
  const v2 = parseProcCgroup(fixture(`cgroup-${layout}.txt`)).v2;
  if (v2 === null) return null;
  const mount = findCgroup2Mount(entries, v2);
  return mount === null ? null : fsPathOf(mount, v2);
}

describe("mountinfo", () => {
  it("hybrid host: cgroup2 is the unified mount, the v1 controllers stay v1", () => {
    const entries = parseMountInfo(fixture("mountinfo-hybrid.txt"));
    const v2 = entries.filter((e) => e.fsType === "cgroup2");
    expect(v2.map((e) => e.mountPoint)).toEqual(["/sys/fs/cgroup/unified"]);
    const memory = entries.find((e) => e.fsType === "cgroup" && e.superOptions.includes("memory"));
    expect(memory?.mountPoint).toBe("/sys/fs/cgroup/memory");
    expect(findCgroup2Mount(entries, "/")).toEqual({
      mountPoint: "/sys/fs/cgroup/unified",
      root: "/",
      readOnly: false,
    });
    expect(ownCgroupDir("hybrid")).toBe("/sys/fs/cgroup/unified");
  });

  it("pure v2 host: a systemd unit's cgroup under /sys/fs/cgroup", () => {
    expect(ownCgroupDir("v2")).toBe("/sys/fs/cgroup/system.slice/openclaw-gateway.service");
    const e = parseMountInfo(fixture("mountinfo-v2.txt")).find((x) => x.fsType === "cgroup2");
    expect(e?.superOptions).toEqual(["rw", "nsdelegate", "memory_recursiveprot"]);
    expect(e?.mountOptions).toContain("noexec");
  });

  it("v1-only host: no cgroup2 mount and no 0:: line", () => {
    const entries = parseMountInfo(fixture("mountinfo-v1.txt"));
    expect(findCgroup2Mount(entries)).toBeNull();
    const cg = parseProcCgroup(fixture("cgroup-v1.txt"));
    expect(cg.v2).toBeNull();
    expect(cg.v1.get("memory")).toBe("/system.slice/gw.service");
    expect(cg.v1.get("cpuacct")).toBe("/system.slice/gw.service");
    expect(cg.v1.get("name=systemd")).toBe("/system.slice/gw.service");
  });

  it("container: the mount shows only the container's subtree (root field), read-only", () => {
    const entries = parseMountInfo(fixture("mountinfo-container.txt"));
    const m = findCgroup2Mount(entries, "/docker/4f1c0ffee5/app");
    expect(m).toEqual({ mountPoint: "/sys/fs/cgroup", root: "/docker/4f1c0ffee5", readOnly: true });
    expect(ownCgroupDir("container")).toBe("/sys/fs/cgroup/app");
    expect(fsPathOf(m!, "/docker/4f1c0ffee5")).toBe("/sys/fs/cgroup");
    // a sibling container's cgroup is not visible through this mount
    expect(fsPathOf(m!, "/docker/4f1c0ffee5x/app")).toBeNull();
    expect(fsPathOf(m!, "/docker/other/app")).toBeNull();
    expect(findCgroup2Mount(entries, "/docker/other/app")).toBeNull();
  });

  it("a cgroup outside this cgroup namespace ('/..') has no filesystem path", () => {
    const v2 = parseProcCgroup(fixture("cgroup-outside-ns.txt")).v2!;
    expect(v2.startsWith("/../")).toBe(true);
    const entries = parseMountInfo(fixture("mountinfo-v2.txt"));
    expect(findCgroup2Mount(entries, v2)).toBeNull();
    expect(fsPathOf({ mountPoint: "/sys/fs/cgroup", root: "/", readOnly: false }, v2)).toBeNull();
  });

  it("escaped paths (\\040 space, \\011 tab) are unescaped; the mount with the longest matching root wins", () => {
    const entries = parseMountInfo(fixture("mountinfo-spaces.txt"));
    expect(entries[1]?.mountPoint).toBe("/mnt/my cgroups\tx");
    expect(entries[1]?.root).toBe("/gw slice");
    expect(ownCgroupDir("spaces")).toBe("/mnt/my cgroups\tx/openclaw gateway.service");
    expect(unescapeMountField("a\\134b\\012c")).toBe("a\\b\nc");
  });

  it("of two mounts showing the same root, the read-write one wins", () => {
    const text =
      "30 24 0:26 / /ro-view ro,relatime - cgroup2 cgroup2 rw\n31 24 0:26 / /rw-view rw,relatime - cgroup2 cgroup2 rw\n";
    expect(findCgroup2Mount(parseMountInfo(text), "/a")).toEqual({
      mountPoint: "/rw-view",
      root: "/",
      readOnly: false,
    });
  });

  it("skips malformed lines instead of half-parsing them", () => {
    const text = [
      "garbage",
      "1 2 3",
      "x 1 0:1 / /a rw - cgroup2 cgroup2 rw",
      "40 30 0:37 / /u rw,relatime - cgroup2 cgroup2 rw",
      "41 30 0:38 / /v rw -",
    ].join("\n");
    const entries = parseMountInfo(text);
    expect(entries.map((e) => e.mountPoint)).toEqual(["/u"]);
  });

  it("optional fields before the separator do not shift the filesystem type", () => {
    const [e] = parseMountInfo(
      "30 24 0:26 / /sys/fs/cgroup rw shared:4 master:1 propagate_from:2 unbindable - cgroup2 cgroup2 rw\n",
    );
    expect(e?.fsType).toBe("cgroup2");
    expect(e?.source).toBe("cgroup2");
  });
});

describe("/proc/PID/cgroup", () => {
  it("hybrid: the 0:: line and the v1 lines apart", () => {
    const cg = parseProcCgroup(fixture("cgroup-hybrid.txt"));
    expect(cg.v2).toBe("/");
    expect(cg.v1.get("memory")).toBe("/process_api/eeba4da34cfb837fa22fda10bd76ca34");
    expect(cg.v2Deleted).toBe(false);
  });

  it("a removed cgroup is flagged, not taken for a live path", () => {
    const cg = parseProcCgroup(fixture("cgroup-deleted.txt"));
    expect(cg.v2).toBe("/system.slice/gw.service/proclease/gw-a/lease-1");
    expect(cg.v2Deleted).toBe(true);
  });

  it("a path containing ':' is kept whole", () => {
    expect(parseProcCgroup("0::/a:b/c:d\n").v2).toBe("/a:b/c:d");
  });

  it("empty text (a process that exited mid-read) has no v2 path", () => {
    expect(parseProcCgroup("").v2).toBeNull();
  });
});

describe("small interface-file parsers", () => {
  it("controller lists and populated", () => {
    expect(parseControllerList("cpuset cpu io memory pids\n")).toEqual(["cpuset", "cpu", "io", "memory", "pids"]);
    expect(parseControllerList("\n")).toEqual([]);
    expect(parsePopulated("populated 1\nfrozen 0\n")).toBe("populated");
    expect(parsePopulated("populated 0\nfrozen 0\n")).toBe("empty");
    // a malformed file is no answer, never "empty"
    expect(parsePopulated("frozen 0\n")).toBeNull();
    expect(parsePopulated("populated 2\n")).toBeNull();
  });

  it("cgroup names: no escape from the directory, no interface-file look-alikes, '_' reserved", () => {
    for (const ok of ["3f2a9c1e-0000-4000-8000-000000000000", "lease_1", "a"])
      expect(CGROUP_NAME_RE.test(ok)).toBe(true);
    for (const bad of [
      "",
      "..",
      "../x",
      "a/b",
      "cgroup.procs",
      "memory.max",
      "_gateway",
      "_probe-1",
      "-x",
      "a b",
      "x".repeat(129),
    ]) {
      expect(CGROUP_NAME_RE.test(bad)).toBe(false);
    }
  });
});

describe("controller plan (no-internal-processes rule)", () => {
  const base: ControllerPlanInput = {
    wanted: ["memory", "pids"],
    baseAvailable: new Set(["memory", "pids"]),
    baseEnabled: new Set(),
    rootEnabled: new Set(),
    hierarchyAvailable: new Set(["memory", "pids", "cpu"]),
    v1Bound: new Map(),
    base: "/sys/fs/cgroup/system.slice/gw.service",
    baseIsHierarchyRoot: false,
    baseProcs: [100],
    selfPid: 100,
    selfInBase: true,
    allowGatewayMove: true,
  };
  const cases: Array<{
    name: string;
    over: Partial<ControllerPlanInput>;
    moveGateway: boolean;
    enableInBase: string[];
    enableInRoot: string[];
    missing: Array<[string, ControllerProblemCode, RegExp?]>;
  }> = [
    {
      name: "delegated unit, gateway alone: move it to the leaf, enable both levels",
      over: {},
      moveGateway: true,
      enableInBase: ["memory", "pids"],
      enableInRoot: ["memory", "pids"],
      missing: [],
    },
    {
      name: "already enabled for the leases: nothing to do",
      over: { baseEnabled: new Set(["memory", "pids"]), rootEnabled: new Set(["memory", "pids"]) },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [],
    },
    {
      name: "enabled in base only: enable in proclease/, no move",
      over: { baseEnabled: new Set(["memory", "pids"]), baseProcs: [] },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: ["memory", "pids"],
      missing: [],
    },
    {
      name: "gateway already in its leaf (restart): no move, base empty",
      over: { selfInBase: false, baseProcs: [] },
      moveGateway: false,
      enableInBase: ["memory", "pids"],
      enableInRoot: ["memory", "pids"],
      missing: [],
    },
    {
      name: "other processes share the gateway's cgroup: refused with the rule named",
      over: { baseProcs: [100, 200, 201] },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [
        ["memory", "base-not-empty", /\(pid 200, 201\)/],
        ["pids", "base-not-empty"],
      ],
    },
    {
      name: "moving the gateway not allowed",
      over: { allowGatewayMove: false },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [
        ["memory", "move-not-allowed"],
        ["pids", "move-not-allowed"],
      ],
    },
    {
      name: "hybrid host: memory on v1, pids not delegated",
      over: {
        baseAvailable: new Set(),
        hierarchyAvailable: new Set(["pids"]),
        v1Bound: new Map([["memory", "/sys/fs/cgroup/memory"]]),
      },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [
        ["memory", "v1-hierarchy", /\/sys\/fs\/cgroup\/memory/],
        ["pids", "not-delegated", /Delegate=/],
      ],
    },
    {
      name: "kernel without the controller",
      over: { wanted: ["memory"], baseAvailable: new Set(), hierarchyAvailable: new Set() },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [["memory", "not-in-kernel"]],
    },
    {
      name: "the real root cgroup: never changes the host-wide subtree_control",
      over: { baseIsHierarchyRoot: true, base: "/sys/fs/cgroup", baseProcs: [1, 100, 300] },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: [],
      missing: [
        ["memory", "host-root"],
        ["pids", "host-root"],
      ],
    },
    {
      name: "the real root with memory enabled: only proclease/ needs it",
      over: { baseIsHierarchyRoot: true, base: "/sys/fs/cgroup", baseEnabled: new Set(["memory"]), wanted: ["memory"] },
      moveGateway: false,
      enableInBase: [],
      enableInRoot: ["memory"],
      missing: [],
    },
    {
      name: "mixed: pids already there, memory needs the move",
      over: { baseEnabled: new Set(["pids"]), rootEnabled: new Set(["pids"]), baseProcs: [100] },
      moveGateway: true,
      enableInBase: ["memory"],
      enableInRoot: ["memory"],
      missing: [],
    },
  ];
  it.each(cases)("$name", ({ over, moveGateway, enableInBase, enableInRoot, missing }) => {
    const plan = planControllers({ ...base, ...over });
    expect(plan.moveGateway).toBe(moveGateway);
    expect(plan.enableInBase).toEqual(enableInBase);
    expect(plan.enableInRoot).toEqual(enableInRoot);
    expect(plan.missing.map((m) => [m.controller, m.code])).toEqual(missing.map(([c, code]) => [c, code]));
    // where it matters, the words name the cause (the pids, the v1 mount) and the fix (Delegate=)
    missing.forEach(([, , words], i) => {
      if (words) expect(plan.missing[i]!.why).toMatch(words);
    });
  });

  it("never plans a move without enabling something in base", () => {
    for (const c of cases) {
      const plan = planControllers({ ...base, ...c.over });
      if (plan.moveGateway) expect(plan.enableInBase.length).toBeGreaterThan(0);
    }
  });
});
