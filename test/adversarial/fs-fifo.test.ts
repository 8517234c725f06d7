/**
 * A hostile agent's FIFOs and device files (issue 39, finding 1): opening a
 * FIFO that has no peer blocks, and four such reads once took every thread
 * of libuv's pool, so a normal read hung and closeSession took over 30 s.
 * Every request here must come back with a refusal while a normal read
 * beside them still works, nothing is ever written into a FIFO or a device,
 * and the session still closes. Real FIFOs (mkfifo), a real reader process,
 * real device files, the fixture agent over ACP. Build first (`npm run build`).
 */
import { execFileSync, spawn } from "node:child_process";
import {
  closeSync,
  constants as FS,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { pinRoots, readBeneath, writeBeneath } from "../../src/acpx/connection/fs-beneath.js";
import {
  agentArgv,
  disposeAfterEach,
  GRACE_MS,
  say,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "../acpx/controller-helpers.js";
import { answer, fsTree, handlers, SESSION } from "./fs-helpers.js";

const controllers = disposeAfterEach();

const fifos: string[] = [];
const readlinkOr = (p: string): string | undefined => {
  try {
    return readlinkSync(p);
  } catch {
    return undefined;
  }
};
function mkfifo(path: string): string {
  execFileSync("mkfifo", [path]);
  fifos.push(path);
  return path;
}

// Code that opens a FIFO blocking (the code before the fix) waits for a peer:
// give every FIFO one for a moment, so no pool thread stays stuck after a failure.
afterEach(() => {
  for (const f of fifos.splice(0)) {
    try {
      closeSync(openSync(f, FS.O_RDWR | FS.O_NONBLOCK));
    } catch {
      // removed with its tree
    }
  }
});

describe("FIFOs and device files", () => {
  it("8 reads and 8 writes of a FIFO without a peer are refused while a normal read beside them works", async () => {
    const t = fsTree("fifo");
    const fifo = mkfifo(join(t.cwd, "pipe"));
    const fs = handlers(t.cwd);
    const hostile = [
      ...Array.from({ length: 8 }, () => answer(fs.read({ sessionId: SESSION, path: fifo }))),
      ...Array.from({ length: 8 }, () => answer(fs.write({ sessionId: SESSION, path: fifo, content: "x" }))),
    ];
    // the pool is free: the gateway's own file read and the agent's normal one both finish
    expect(await readFile(join(t.cwd, "a.txt"), "utf8")).toBe("inside\n");
    expect(await answer(fs.read({ sessionId: SESSION, path: join(t.cwd, "a.txt") }))).toEqual({
      ok: true,
      content: "inside\n",
    });
    const answers = await Promise.all(hostile);
    expect(answers.map((a) => (a.ok ? "served" : a.refusal))).toEqual(Array(16).fill("not-a-file"));
    expect(answers[0]).toMatchObject({ message: expect.stringContaining("is a FIFO") });
    expect(statSync(fifo).isFIFO()).toBe(true);
  });

  it("a write to a FIFO with a live reader is refused and the reader gets nothing", async () => {
    const t = fsTree("fifo-reader");
    const fifo = mkfifo(join(t.cwd, "pipe"));
    const cat = trackChild(spawn("cat", [fifo], { stdio: ["ignore", "pipe", "inherit"] }));
    let got = "";
    cat.stdout!.on("data", (d: Buffer) => (got += d.toString()));
    // our own end (O_RDWR never blocks) lets cat open; held until cat has the FIFO open, then closed: cat reads end of file
    const ours = openSync(fifo, FS.O_RDWR | FS.O_NONBLOCK);
    const hasFifo = () =>
      readdirSync(`/proc/${cat.pid}/fd`).some((fd) => readlinkOr(`/proc/${cat.pid}/fd/${fd}`) === fifo);
    expect(await waitFor(hasFifo, 10_000)).toBeGreaterThanOrEqual(0);
    const fs = handlers(t.cwd);
    expect(await answer(fs.write({ sessionId: SESSION, path: fifo, content: "planted" }))).toMatchObject({
      ok: false,
      refusal: "not-a-file",
    });
    closeSync(ours);
    expect(await waitFor(() => cat.exitCode !== null, 10_000)).toBeGreaterThanOrEqual(0);
    expect(got).toBe("");
  });

  it("device files are refused, reads and writes: /dev/zero, /dev/urandom, /dev/null with /dev as a root", async () => {
    const t = fsTree("dev");
    const fs = handlers(t.cwd, { roots: ["/dev"] });
    for (const dev of ["/dev/null", "/dev/zero", "/dev/urandom"]) {
      expect(await answer(fs.write({ sessionId: SESSION, path: dev, content: "x" })), dev).toMatchObject({
        ok: false,
        refusal: "not-a-file",
      });
      expect(await answer(fs.read({ sessionId: SESSION, path: dev })), dev).toMatchObject({
        ok: false,
        refusal: "not-a-file",
        message: expect.stringContaining("character device"),
      });
    }
    // a link under /dev that leads out of it (/dev/stdin → /proc/self/fd/0) is outside
    expect(await answer(fs.read({ sessionId: SESSION, path: "/dev/stdin" }))).toMatchObject({
      ok: false,
      refusal: "outside-roots",
    });
    expect(await answer(fs.read({ sessionId: SESSION, path: "/dev" }))).toMatchObject({
      ok: false,
      refusal: "not-a-file",
      message: expect.stringContaining("a folder"),
    });
  });

  it("the no-symlink walk (where openat2 is missing) refuses FIFOs and links and still reads and writes", async () => {
    const t = fsTree("walk");
    const fifo = mkfifo(join(t.cwd, "pipe"));
    execFileSync("ln", ["-s", "a.txt", join(t.cwd, "link-in.txt")]);
    const [root] = await pinRoots([t.cwd], (r, why) => {
      throw new Error(`${r}: ${why}`);
    });
    const at = (rel: string) => ({ root: root!, rel, path: join(t.cwd, rel), walkOnly: true });
    expect(await readBeneath(at("pipe"), 1000)).toMatchObject({ ok: false, refusal: "not-a-file" });
    expect(await writeBeneath(at("pipe"), Buffer.from("x"))).toMatchObject({ ok: false, refusal: "not-a-file" });
    expect(await readBeneath(at("link-in.txt"), 1000)).toMatchObject({ ok: false, refusal: "symlink" });
    expect(await readBeneath(at("a.txt"), 1000)).toMatchObject({ ok: true, data: Buffer.from("inside\n") });
    expect(await writeBeneath(at("new/deep/b.txt"), Buffer.from("made"))).toMatchObject({ ok: true, created: true });
    expect(readFileSync(join(t.cwd, "new/deep/b.txt"), "utf8")).toBe("made");
    expect(statSync(fifo).isFIFO()).toBe(true);
  });

  it("through the controller and the fixture agent: FIFO requests are refused, a normal read works, the session closes", async () => {
    const t = fsTree("fifo-ctl");
    const fifo = mkfifo(join(t.cwd, "pipe"));
    writeFileSync(join(t.cwd, "b.txt"), "normal");
    const ctl = await createAcpxLifecycleController({
      stateDir: tempStateDir("adv-fifo"),
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      clientCapabilities: { fs: {} },
    });
    controllers.push(ctl);
    const h = await ctl.ensureSession({
      sessionKey: "k-adv-fifo",
      agentId: "main",
      command: agentArgv({}),
      cwd: t.cwd,
    });
    trackLease(h.leaseId);
    expect(await say(ctl, h, `/read ${fifo}`)).toMatch(/^refused: -32602 \{"refusal":"not-a-file"/);
    expect(await say(ctl, h, `/write ${fifo} planted`)).toMatch(/"refusal":"not-a-file"/);
    expect(await say(ctl, h, `/read ${join(t.cwd, "b.txt")}`)).toBe("read: normal");
    await ctl.closeSession({ handle: h, reason: "test over" });
    expect(statSync(fifo).isFIFO()).toBe(true);
  });
});
