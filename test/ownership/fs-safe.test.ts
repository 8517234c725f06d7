// The state dir's reads, atomic writes and removals take one of two paths: a job of
// the addon (native/files_posix.cc) where it loads, fs/promises where it does
// not. Every case here runs on both, and the two must agree to the field.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadNative } from "../../src/facts/native.js";
import {
  atomicWrite,
  moveDurably,
  readOwnedFile,
  readOwnedFiles,
  removeDurably,
  type SafeRead,
} from "../../src/ownership/leases/fs-safe.js";

const isRoot = process.getuid?.() === 0;
const nativeLoads = loadNative() !== null;
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "own-fs-safe-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs fn with the addon's file jobs, then without them (PROCLEASE_DISABLE_NATIVE is read on every call). */
async function onBothPaths<T>(fn: () => Promise<T>): Promise<{ native: T; portable: T }> {
  const saved = process.env.PROCLEASE_DISABLE_NATIVE;
  try {
    delete process.env.PROCLEASE_DISABLE_NATIVE;
    const native = await fn();
    process.env.PROCLEASE_DISABLE_NATIVE = "1";
    const portable = await fn();
    return { native, portable };
  } finally {
    if (saved === undefined) delete process.env.PROCLEASE_DISABLE_NATIVE;
    else process.env.PROCLEASE_DISABLE_NATIVE = saved;
  }
}

async function readBoth(path: string, maxBytes = 1024): Promise<SafeRead> {
  const { native, portable } = await onBothPaths(() => readOwnedFile(path, maxBytes));
  expect(native).toEqual(portable);
  return native;
}

async function writeError(fn: () => Promise<void>): Promise<NodeJS.ErrnoException> {
  try {
    await fn();
  } catch (e) {
    return e as NodeJS.ErrnoException;
  }
  throw new Error("the write was expected to fail");
}

const temps = (d: string) => readdirSync(d).filter((n) => n.startsWith(".tmp-"));

/** A non-empty directory where a file of that name is expected: no write or removal may succeed on it. */
function occupyWithDir(name: string): void {
  mkdirSync(join(dir, name));
  writeFileSync(join(dir, name, "inside"), "x");
}

describe(`readOwnedFile(s), atomicWrite, removeDurably and moveDurably agree on both paths${nativeLoads ? "" : " (the addon did not load: both runs take fs/promises)"}`, () => {
  it("reads a file with the stat fields of its fstat", async () => {
    const f = join(dir, "a.json");
    writeFileSync(f, '{"ü":1}\n', { mode: 0o600 });
    const r = await readBoth(f);
    const st = lstatSync(f);
    expect(r).toEqual({
      kind: "ok",
      text: '{"ü":1}\n',
      ino: st.ino,
      dev: st.dev,
      mtimeMs: st.mtimeMs,
      mode: st.mode,
      uid: st.uid,
    });
  });

  it("a missing file, or a path through a file, is missing", async () => {
    writeFileSync(join(dir, "plain"), "x");
    expect(await readBoth(join(dir, "nope.json"))).toEqual({ kind: "missing" });
    expect(await readBoth(join(dir, "plain", "under.json"))).toEqual({ kind: "missing" });
  });

  it("a symlink is refused, not followed", async () => {
    writeFileSync(join(dir, "target"), "secret");
    symlinkSync(join(dir, "target"), join(dir, "link.json"));
    expect(await readBoth(join(dir, "link.json"))).toEqual({ kind: "symlink" });
  });

  it("a FIFO and a directory are not regular files (the FIFO does not block the read)", async () => {
    execFileSync("mkfifo", [join(dir, "fifo.json")]);
    mkdirSync(join(dir, "sub.json"));
    expect(await readBoth(join(dir, "fifo.json"))).toEqual({ kind: "unreadable", detail: "not a regular file" });
    expect(await readBoth(join(dir, "sub.json"))).toEqual({ kind: "unreadable", detail: "not a regular file" });
  });

  it("a file over maxBytes is refused; one of exactly maxBytes is read", async () => {
    writeFileSync(join(dir, "big.json"), "y".repeat(101));
    writeFileSync(join(dir, "fits.json"), "y".repeat(100));
    expect(await readBoth(join(dir, "big.json"), 100)).toEqual({ kind: "unreadable", detail: "larger than 100 bytes" });
    expect(await readBoth(join(dir, "fits.json"), 100)).toMatchObject({ kind: "ok", text: "y".repeat(100) });
  });

  it("an open that fails otherwise names its errno code and Node's message", async () => {
    const r = await readBoth(join(dir, `${"n".repeat(300)}.json`));
    expect(r).toEqual({
      kind: "unreadable",
      code: "ENAMETOOLONG",
      detail: expect.stringMatching(/^ENAMETOOLONG: ENAMETOOLONG: name too long, open '/),
    });
  });

  (isRoot ? it : it.skip)(
    `a file of another uid is foreign-owned${isRoot ? "" : " (skipped: needs root to chown)"}`,
    async () => {
      const f = join(dir, "theirs.json");
      writeFileSync(f, "{}");
      await chown(f, 65534, 65534);
      expect(await readBoth(f)).toEqual({ kind: "foreign-owner", uid: 65534 });
    },
  );

  it("readOwnedFiles answers each path in order, as readOwnedFile does alone, and an empty list with none", async () => {
    writeFileSync(join(dir, "a.json"), "first");
    writeFileSync(join(dir, "big.json"), "x".repeat(40));
    symlinkSync(join(dir, "a.json"), join(dir, "link.json"));
    mkdirSync(join(dir, "sub"));
    const paths = [
      join(dir, "a.json"),
      join(dir, "gone.json"),
      join(dir, "link.json"),
      join(dir, "sub"),
      join(dir, "big.json"),
      join(dir, "a.json"),
    ];
    const { native, portable } = await onBothPaths(async () => ({
      batch: await readOwnedFiles(paths, 16),
      alone: await Promise.all(paths.map((p) => readOwnedFile(p, 16))),
      empty: await readOwnedFiles([], 16),
    }));
    expect(native.batch).toEqual(native.alone);
    expect(native.batch.map((r) => r.kind)).toEqual(["ok", "missing", "symlink", "unreadable", "unreadable", "ok"]);
    expect(native.batch[0]).toMatchObject({ kind: "ok", text: "first" });
    expect(native.empty).toEqual([]);
    expect(portable).toEqual(native);
  });

  it("atomicWrite creates a 0600 file, replaces it whole, and leaves no temp behind", async () => {
    const { native, portable } = await onBothPaths(async () => {
      const name = `w-${process.env.PROCLEASE_DISABLE_NATIVE ?? "native"}.json`;
      await atomicWrite(dir, name, "first\n", true);
      const mode = statSync(join(dir, name)).mode & 0o777;
      await atomicWrite(dir, name, "second, longer\n", false);
      return { mode, text: readFileSync(join(dir, name), "utf8") };
    });
    expect(native).toEqual({ mode: 0o600, text: "second, longer\n" });
    expect(portable).toEqual(native);
    expect(temps(dir)).toEqual([]);
  });

  it("a write that fails has the errno code and syscall of Node's error, and removes its temp", async () => {
    occupyWithDir("occupied.json");
    const { native, portable } = await onBothPaths(async () => {
      const missing = await writeError(() => atomicWrite(join(dir, "no-such-dir"), "x.json", "x", true));
      const onDir = await writeError(() => atomicWrite(dir, "occupied.json", "x", true));
      return [missing, onDir].map((e) => ({
        code: e.code,
        syscall: e.syscall,
        message: e.message.replace(/\.tmp-[^']+/, ".tmp-*"),
      }));
    });
    expect(native[0]).toMatchObject({ code: "ENOENT", syscall: "open" });
    expect(native[1]!.syscall).toBe("rename");
    expect(["EISDIR", "ENOTEMPTY", "EEXIST"]).toContain(native[1]!.code);
    expect(portable).toEqual(native);
    expect(temps(dir)).toEqual([]);
    expect(existsSync(join(dir, "occupied.json", "inside"))).toBe(true);
  });

  it("removeDurably removes a file, durable or not, and a file already gone is no error", async () => {
    const { native, portable } = await onBothPaths(async () => {
      const tag = process.env.PROCLEASE_DISABLE_NATIVE ?? "native";
      const names = [`durable-${tag}.json`, `plain-${tag}.json`];
      for (const n of names) writeFileSync(join(dir, n), "x");
      await removeDurably(dir, names[0]!, true);
      await removeDurably(dir, names[1]!, false);
      await removeDurably(dir, names[0]!, true);
      return names.map((n) => existsSync(join(dir, n)));
    });
    expect(native).toEqual([false, false]);
    expect(portable).toEqual(native);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a removal that fails has the errno code, syscall and path of Node's error, and leaves the file", async () => {
    occupyWithDir("occupied.json");
    const { native, portable } = await onBothPaths(async () => {
      // unlink of a directory: EISDIR on Linux, EPERM where unlink(2) says so
      const onDir = await writeError(() => removeDurably(dir, "occupied.json", true));
      // the removal is done, the directory's sync cannot be: a missing folder is not "already gone"
      const noFolder = await writeError(() => removeDurably(join(dir, "no-such-dir"), "x.json", true));
      return [onDir, noFolder].map((e) => ({ code: e.code, syscall: e.syscall, path: e.path, message: e.message }));
    });
    expect(native[0]).toMatchObject({ syscall: "unlink", path: join(dir, "occupied.json") });
    expect(["EISDIR", "EPERM"]).toContain(native[0]!.code);
    expect(native[1]).toMatchObject({ code: "ENOENT", path: join(dir, "no-such-dir") });
    expect(portable).toEqual(native);
    expect(existsSync(join(dir, "occupied.json", "inside"))).toBe(true);
  });

  it("moveDurably writes the new copy whole (0600), then removes the old one, durable or not; an old copy already gone is no error", async () => {
    const to = join(dir, "archive");
    mkdirSync(to);
    const { native, portable } = await onBothPaths(async () => {
      const tag = process.env.PROCLEASE_DISABLE_NATIVE ?? "native";
      const names = [`durable-${tag}.json`, `plain-${tag}.json`, `gone-${tag}.json`];
      writeFileSync(join(dir, names[0]!), "old");
      writeFileSync(join(dir, names[1]!), "old");
      await moveDurably(to, dir, names[0]!, "new, longer\n", true);
      await moveDurably(to, dir, names[1]!, "new\n", false);
      await moveDurably(to, dir, names[2]!, "only\n", true);
      return names.map((n) => ({
        old: existsSync(join(dir, n)),
        text: readFileSync(join(to, n), "utf8"),
        mode: statSync(join(to, n)).mode & 0o777,
      }));
    });
    expect(native).toEqual([
      { old: false, text: "new, longer\n", mode: 0o600 },
      { old: false, text: "new\n", mode: 0o600 },
      { old: false, text: "only\n", mode: 0o600 },
    ]);
    expect(portable).toEqual(native);
    expect(temps(to)).toEqual([]);
    expect(readdirSync(dir)).toEqual(["archive"]);
  });

  it("a move whose write fails leaves the old copy; one whose removal fails leaves both, the new one whole; each error is Node's", async () => {
    const to = join(dir, "archive");
    mkdirSync(to);
    occupyWithDir("occupied.json");
    writeFileSync(join(dir, "kept.json"), "old");
    mkdirSync(join(to, "kept.json"));
    writeFileSync(join(to, "kept.json", "inside"), "x");
    const { native, portable } = await onBothPaths(async () => {
      const tag = process.env.PROCLEASE_DISABLE_NATIVE ?? "native";
      // the write: its rename meets a directory in the archive
      const write = await writeError(() => moveDurably(to, dir, "kept.json", "new", true));
      // the removal: the old copy's name is a directory (unlink refuses it) after the new copy landed
      mkdirSync(join(dir, `occupied-${tag}.json`));
      writeFileSync(join(dir, `occupied-${tag}.json`, "inside"), "x");
      const removal = await writeError(() => moveDurably(to, dir, `occupied-${tag}.json`, "new", true));
      const landed = readFileSync(join(to, `occupied-${tag}.json`), "utf8");
      return {
        landed,
        errors: [write, removal].map((e) => ({
          code: e.code,
          syscall: e.syscall,
          path: e.path?.replace(/\.tmp-[^/]+$/, ".tmp-*").replace(`occupied-${tag}.json`, "occupied-*.json"),
          dest: (e as { dest?: string }).dest,
        })),
      };
    });
    expect(native.errors[0]).toMatchObject({
      syscall: "rename",
      path: join(to, ".tmp-*"),
      dest: join(to, "kept.json"),
    });
    expect(["EISDIR", "ENOTEMPTY", "EEXIST"]).toContain(native.errors[0]!.code);
    expect(native.errors[1]).toMatchObject({ syscall: "unlink", path: join(dir, "occupied-*.json") });
    expect(["EISDIR", "EPERM"]).toContain(native.errors[1]!.code);
    expect(native.landed).toBe("new");
    expect(portable).toEqual(native);
    expect(readFileSync(join(dir, "kept.json"), "utf8")).toBe("old");
    expect(temps(to)).toEqual([]);
  });
});
