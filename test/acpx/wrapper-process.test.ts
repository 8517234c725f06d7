/**
 * Each wrapper as a process: its started report, stdio passed through and
 * the lifeline kept from the adapter, the exit status passed through, the
 * sweep after the adapter exits, spawn errors, bad arguments, and the lease
 * cgroup the adapter is born in.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import {
  AGENT,
  cgroup,
  cgroupNote,
  describeEachKind,
  leaseCarriers,
  newLease,
  nextSeq,
  readPidfile,
  spawnWrapper,
  stat,
  tmp,
  useWrapperHarness,
  waitFor,
} from "./wrapper-harness.js";

useWrapperHarness();

describeEachKind("$name wrapper (real processes)", () => {
  it("reports started with its own pid and the adapter's pid, which leads its own session and group", async () => {
    const pidfile = join(tmp, `started-${nextSeq()}.json`);
    const w = spawnWrapper(["node", AGENT, `--pidfile=${pidfile}`]);
    const started = await w.report("started");
    const agent = await waitFor("the agent's pidfile", () => readPidfile(pidfile));
    expect(started.wrapperPid).toBe(w.child.pid);
    expect(started.adapterPid).toBe(agent.pid);
    expect(started.pgid).toBe(started.adapterPid);
    const s = stat(started.adapterPid)!;
    expect(s.ppid).toBe(w.child.pid);
    expect(s.pgid).toBe(started.adapterPid);
    expect(s.sid).toBe(started.adapterPid);
    // the wrapper stays outside the adapter's group
    expect(stat(w.child.pid!)!.pgid).not.toBe(started.adapterPid);
  });

  it("passes stdio straight through and never hands the lifeline to the adapter", async () => {
    const cat = spawnWrapper(["cat"]);
    cat.child.stdin!.end("hello through the wrapper\n");
    expect(await cat.closed).toEqual({ code: 0, signal: null });
    expect(cat.out()).toBe("hello through the wrapper\n");

    const fd3 = spawnWrapper(["sh", "-c", "if [ -e /proc/$$/fd/3 ]; then echo fd3-open; else echo fd3-closed; fi"]);
    await fd3.closed;
    expect(fd3.out().trim()).toBe("fd3-closed");
  });

  it("exits with the adapter's exit code, and 128+n when the adapter is killed by a signal", async () => {
    const five = spawnWrapper(["sh", "-c", "exit 5"]);
    expect(await five.closed).toEqual({ code: 5, signal: null });
    expect(five.reports.find((r) => r.type === "exit")).toEqual({ type: "exit", code: 5, signal: null });

    const killed = spawnWrapper(["sh", "-c", "kill -KILL $$"]);
    expect(await killed.closed).toEqual({ code: 137, signal: null });
    expect(killed.reports.find((r) => r.type === "exit")).toEqual({ type: "exit", code: null, signal: "SIGKILL" });
  });

  it("sweeps what the adapter left behind when it exits on its own (setsid grandchild ignoring SIGTERM)", async () => {
    const lease = newLease();
    // the adapter starts an escaped, stubborn grandchild and exits 0 at once
    const w = spawnWrapper(["sh", "-c", "setsid sh -c 'trap \"\" TERM; sleep 600 & wait' & sleep 0.2; exit 0"], {
      lease,
      graceMs: 300,
    });
    expect(await w.exited).toEqual({ code: 0, signal: null });
    const cleanup = await w.report("cleanup");
    expect(cleanup.reason).toBe("adapter-exit");
    expect(leaseCarriers(lease)).toEqual([]);
  });

  it("reports spawn-error and exits 127 for a missing executable", async () => {
    const w = spawnWrapper(["/nonexistent/proclease-no-such-adapter", "--x"]);
    expect(await w.closed).toEqual({ code: 127, signal: null });
    expect(w.reports).toHaveLength(1);
    expect(w.reports[0]).toMatchObject({ type: "spawn-error", code: "ENOENT" });
    expect((w.reports[0] as { message: string }).message).toContain("proclease-no-such-adapter");
  });

  it("a session with limits never starts its adapter outside the lease cgroup: a failed move is a spawn-error ECGROUPMOVE; without limits it runs uncontained", async () => {
    const mark = join(tmp, `adapter-ran-${process.pid}-${Date.now()}`);
    const missing = join(tmp, "no-such-cgroup");
    const limited = spawnWrapper(["sh", "-c", `touch ${mark}`], {
      env: { PROCLEASE_CGROUP: missing, PROCLEASE_CGROUP_REQUIRED: "1" },
    });
    expect(await limited.closed).toEqual({ code: 126, signal: null });
    expect(limited.reports).toHaveLength(1);
    expect(limited.reports[0]).toMatchObject({ type: "spawn-error", code: "ECGROUPMOVE" });
    expect((limited.reports[0] as { message: string }).message).toContain(missing);
    expect(existsSync(mark)).toBe(false);
    const plain = spawnWrapper(["sh", "-c", `touch ${mark}`], { env: { PROCLEASE_CGROUP: missing } });
    await plain.report("started");
    expect(await plain.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(mark)).toBe(true);
  });

  it("a lease cgroup path that is a plain directory is not entered, and nothing is written into it: with limits the adapter does not start", async () => {
    const mark = join(tmp, `adapter-ran-plain-${process.pid}-${Date.now()}`);
    const plain = mkdtempSync(join(tmp, "not-a-cgroup-"));
    const limited = spawnWrapper(["sh", "-c", `touch ${mark}`], {
      env: { PROCLEASE_CGROUP: plain, PROCLEASE_CGROUP_REQUIRED: "1" },
    });
    expect(await limited.closed).toEqual({ code: 126, signal: null });
    expect(limited.reports[0]).toMatchObject({ type: "spawn-error", code: "ECGROUPMOVE" });
    expect(existsSync(mark)).toBe(false);
    // cgroup.procs is opened without O_CREAT: a directory that is not a cgroup gets no file
    expect(readdirSync(plain)).toEqual([]);
  });

  it(`the adapter is born in the lease cgroup and the wrapper is in it by its "started" report${cgroupNote}`, async (ctx) => {
    if (cgroup === null) return ctx.skip();
    const dir = join(cgroup.own, `wrapper-test-${process.pid}-${nextSeq()}`);
    mkdirSync(dir);
    try {
      // the adapter reads its own cgroup first thing; the wrapper's is read at "started"
      const w = spawnWrapper(["sh", "-c", "cat /proc/self/cgroup; exec sleep 600"], {
        env: { PROCLEASE_CGROUP: dir, PROCLEASE_CGROUP_REQUIRED: "1" },
      });
      const started = await w.report("started");
      const rel = `0::${dir.slice(cgroup.mount.length)}\n`;
      expect(readFileSync(`/proc/${started.wrapperPid}/cgroup`, "utf8")).toContain(rel);
      expect(readFileSync(`/proc/${started.adapterPid}/cgroup`, "utf8")).toContain(rel);
      await waitFor("the adapter's cgroup line", () => w.out().includes("0::"));
      if (process.getuid?.() === 0) {
        // the adapter's own cgroup namespace is rooted at the lease cgroup: it sees itself at its root
        expect(started.cgroupNamespace).toBe("entered");
        expect(w.out()).toContain("0::/\n");
      } else {
        // a delegated gateway that is not root cannot make one (EPERM): the adapter runs all the same
        expect(started.cgroupNamespace).toMatch(/^E[A-Z]+$/);
        expect(w.out()).toContain(rel);
      }
      // the variables are the wrapper's, not the adapter's
      const env = readFileSync(`/proc/${started.adapterPid}/environ`, "latin1");
      expect(env).not.toContain("PROCLEASE_CGROUP");
      w.child.kill("SIGTERM");
      await w.exited;
    } finally {
      await waitFor("the test cgroup emptied", () => readFileSync(join(dir, "cgroup.procs"), "utf8").trim() === "");
      rmdirSync(dir);
    }
  });

  it("refuses bad wrapper arguments with exit 2 and a spawn-error report", async () => {
    const w = spawnWrapper([], { raw: ["--grace-ms", "soon", "--", "true"] });
    expect(await w.closed).toEqual({ code: 2, signal: null });
    expect(w.reports[0]).toMatchObject({ type: "spawn-error", code: "EUSAGE" });
    expect(w.err()).toMatch(/--grace-ms/);
  });
});
