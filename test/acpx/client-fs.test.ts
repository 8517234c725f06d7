/**
 * ACP client file access through the controller, driven by the fixture
 * agent's own fs/read_text_file and fs/write_text_file requests: confined to
 * the session's cwd and the configured roots, symlinks resolved, sizes
 * bounded, typed refusals; off unless asked for (then advertised as off and
 * answered "method not found"). Build first (`npm run build`).
 */
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpxLifecycleControllerOptions } from "../../src/acpx/sessions/types.js";
import { answer, handlers, SESSION } from "../adversarial/fs-helpers.js";
import { agentArgv, disposeAfterEach, GRACE_MS, say as sayIn, tempStateDir, trackLease } from "./controller-helpers.js";

const controllers = disposeAfterEach();

/** each test's folder tree, removed once the file's tests ran */
const bases: string[] = [];
afterAll(() => {
  for (const d of bases) rmSync(d, { recursive: true, force: true });
});

function tree() {
  const base = realpathSync(mkdtempSync(join(tmpdir(), "proclease-fs-")));
  bases.push(base);
  const cwd = join(base, "work");
  const root = join(base, "extra");
  const outside = join(base, "outside");
  for (const d of [cwd, root, outside]) mkdirSync(d);
  writeFileSync(join(cwd, "a.txt"), "one\ntwo\nthree\n");
  writeFileSync(join(root, "b.txt"), "from the extra root");
  writeFileSync(join(outside, "secret.txt"), "secret");
  symlinkSync(join(outside, "secret.txt"), join(cwd, "link-out.txt"));
  symlinkSync(outside, join(cwd, "dir-out"));
  return { base, cwd, root, outside };
}

async function session(label: string, fs: AcpxLifecycleControllerOptions["clientCapabilities"], cwd: string) {
  const ctl = await createAcpxLifecycleController({
    stateDir: tempStateDir(label),
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    clientCapabilities: fs,
  });
  controllers.push(ctl);
  const h = await ctl.ensureSession({ sessionKey: `k-${label}`, agentId: "main", command: agentArgv({}), cwd });
  trackLease(h.leaseId);
  const say = (prompt: string): Promise<string> => sayIn(ctl, h, prompt);
  return { ctl, h, say };
}

describe("client fs", () => {
  it("reads and writes inside the session's cwd and roots; line and limit apply; missing folders are made", async () => {
    const t = tree();
    const { say } = await session("fs-ok", { fs: { roots: [t.root] } }, t.cwd);
    expect(await say(`/read ${join(t.cwd, "a.txt")}`)).toBe("read: one\ntwo\nthree\n");
    expect(await say(`/read ${join(t.root, "b.txt")}`)).toBe("read: from the extra root");
    expect(await say(`/write ${join(t.cwd, "new/deep/c.txt")} hello world`)).toBe("written");
    expect(readFileSync(join(t.cwd, "new/deep/c.txt"), "utf8")).toBe("hello world");
  });

  it("refuses paths outside, through a symlink (file or folder), relative paths and files over the limit", async () => {
    const t = tree();
    writeFileSync(join(t.cwd, "big.txt"), "x".repeat(2000));
    const { say } = await session("fs-refuse", { fs: { maxReadBytes: 1000, maxWriteBytes: 10 } }, t.cwd);
    expect(await say(`/read ${join(t.outside, "secret.txt")}`)).toMatch(/^refused: -32602 \{"refusal":"outside-roots"/);
    expect(await say(`/read ${join(t.cwd, "link-out.txt")}`)).toMatch(/"refusal":"outside-roots"/);
    expect(await say(`/read ${join(t.cwd, "dir-out", "secret.txt")}`)).toMatch(/"refusal":"outside-roots"/);
    expect(await say(`/write ${join(t.cwd, "dir-out", "planted.txt")} x`)).toMatch(/"refusal":"outside-roots"/);
    expect(await say(`/write ${join(t.cwd, "link-out.txt")} x`)).toMatch(/"refusal":"outside-roots"/);
    expect(readFileSync(join(t.outside, "secret.txt"), "utf8")).toBe("secret");
    expect(await say("/read relative/a.txt")).toMatch(/"refusal":"not-absolute"/);
    expect(await say(`/read ${join(t.cwd, "big.txt")}`)).toMatch(/"refusal":"too-large"/);
    expect(await say(`/write ${join(t.cwd, "w.txt")} 0123456789abc`)).toMatch(/"refusal":"too-large"/);
    expect(await say(`/read ${join(t.cwd, "missing.txt")}`)).toMatch(/^refused: -32002 \{"refusal":"not-found"/);
  });

  it("read-only: writes are not served; without fs nothing is (method not found)", async () => {
    const t = tree();
    const ro = await session("fs-ro", { fs: { write: false } }, t.cwd);
    expect(await ro.say(`/read ${join(t.cwd, "a.txt")}`)).toBe("read: one\ntwo\nthree\n");
    expect(await ro.say(`/write ${join(t.cwd, "x.txt")} no`)).toMatch(/^refused: -32601/);
    expect(JSON.parse(await ro.say("/whoami")).clientCapabilities).toMatchObject({
      fs: { readTextFile: true, writeTextFile: false },
      terminal: false,
    });
    const off = await session("fs-off", undefined, t.cwd);
    expect(await off.say(`/read ${join(t.cwd, "a.txt")}`)).toMatch(/^refused: -32601/);
    expect(JSON.parse(await off.say("/whoami")).clientCapabilities).toMatchObject({
      fs: { readTextFile: false, writeTextFile: false },
      terminal: false,
    });
  });
});

/** the handlers the ACP client calls, for cases the fixture agent has no command for */
describe("client fs handlers", () => {
  const read = (fs: ReturnType<typeof handlers>, path: string) => answer(fs.read({ sessionId: SESSION, path }));
  const write = (fs: ReturnType<typeof handlers>, path: string, content: string) =>
    answer(fs.write({ sessionId: SESSION, path, content }));

  it("follows a relative symlink that stays beneath its root; refuses an absolute one (even to inside) and one into another root", async () => {
    const t = tree();
    symlinkSync("a.txt", join(t.cwd, "rel-in.txt"));
    symlinkSync(join(t.cwd, "a.txt"), join(t.cwd, "abs-in.txt"));
    symlinkSync("../extra/b.txt", join(t.cwd, "to-root.txt"));
    const fs = handlers(t.cwd, { roots: [t.root] });
    expect(await read(fs, join(t.cwd, "rel-in.txt"))).toEqual({ ok: true, content: "one\ntwo\nthree\n" });
    expect(await write(fs, join(t.cwd, "rel-in.txt"), "through the link")).toEqual({ ok: true, content: "" });
    expect(readFileSync(join(t.cwd, "a.txt"), "utf8")).toBe("through the link");
    expect(await read(fs, join(t.cwd, "abs-in.txt"))).toMatchObject({ ok: false, refusal: "outside-roots" });
    expect(await read(fs, join(t.cwd, "to-root.txt"))).toMatchObject({ ok: false, refusal: "outside-roots" });
    expect(await read(fs, join(t.root, "b.txt"))).toEqual({ ok: true, content: "from the extra root" });
  });

  it("normalises .. lexically, refuses the root itself and a root replaced after the session pinned it", async () => {
    const t = tree();
    const fs = handlers(t.cwd);
    expect(await read(fs, `${t.cwd}/x/../a.txt`)).toEqual({ ok: true, content: "one\ntwo\nthree\n" });
    expect(await read(fs, `${t.cwd}/../outside/secret.txt`)).toMatchObject({ ok: false, refusal: "outside-roots" });
    expect(await read(fs, t.cwd)).toMatchObject({ ok: false, refusal: "not-a-file" });
    expect(await read(fs, `${t.cwd}/a.txt\0/x`)).toMatchObject({
      ok: false,
      refusal: "io-error",
      message: expect.stringContaining("NUL"),
    });
    expect(await read(handlers(t.cwd, { maxReadBytes: 2 ** 40 }), join(t.cwd, "a.txt"))).toEqual({
      ok: true,
      content: "one\ntwo\nthree\n",
    });
    // the agent moves its cwd away and puts a link to outside in its place
    renameSync(t.cwd, `${t.cwd}-moved`);
    symlinkSync(t.outside, t.cwd);
    expect(await read(fs, join(t.cwd, "secret.txt"))).toMatchObject({
      ok: false,
      refusal: "outside-roots",
      message: expect.stringContaining("moved or replaced"),
    });
    expect(await write(fs, join(t.cwd, "planted.txt"), "x")).toMatchObject({ ok: false, refusal: "outside-roots" });
    expect(readFileSync(join(t.outside, "secret.txt"), "utf8")).toBe("secret");
  });

  it("a hardlink to a file outside is that file: read and written, by design (docs/conversation.md)", async () => {
    const t = tree();
    linkSync(join(t.outside, "secret.txt"), join(t.cwd, "hard.txt"));
    const fs = handlers(t.cwd);
    expect(await read(fs, join(t.cwd, "hard.txt"))).toEqual({ ok: true, content: "secret" });
    expect(await write(fs, join(t.cwd, "hard.txt"), "same file")).toEqual({ ok: true, content: "" });
    expect(readFileSync(join(t.outside, "secret.txt"), "utf8")).toBe("same file");
  });

  it("without the addon every request is refused, naming it (fails closed: there is no confined access without it)", async () => {
    const t = tree();
    const fs = handlers(t.cwd);
    const before = process.env.PROCLEASE_DISABLE_NATIVE;
    process.env.PROCLEASE_DISABLE_NATIVE = "1";
    try {
      expect(await read(fs, join(t.cwd, "a.txt"))).toMatchObject({
        ok: false,
        refusal: "io-error",
        message: expect.stringContaining("native addon"),
      });
      expect(await write(fs, join(t.cwd, "z.txt"), "x")).toMatchObject({ ok: false, refusal: "io-error" });
    } finally {
      if (before === undefined) delete process.env.PROCLEASE_DISABLE_NATIVE;
      else process.env.PROCLEASE_DISABLE_NATIVE = before;
    }
  });
});
