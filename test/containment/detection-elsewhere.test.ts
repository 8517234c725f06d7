// Containment detection from elsewhere than this test process: as an
// unprivileged user without delegation, and from inside the gateway leaf.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmdirSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GATEWAY_LEAF, isPopulated, type ContainmentSupport } from "../../src/containment/index.js";
import { waitFor } from "../supervisor/helpers.js";
import { FIX, NOTE, on, ROOT, SKIP, support } from "./cgroup-setup.js";

const children: ChildProcess[] = [];
let seq = 0;

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/**
 * A built copy of dist/containment + dist/facts and the detect fixture in a
 * world-readable temp dir: a child running as another uid may not be able to
 * read the checkout. Rebuilds first when a source it loads is newer.
 */
let copyDir = "";
beforeAll(() => {
  if (SKIP) return;
  const built = join(ROOT, "dist", "containment", "index.js");
  const newest = Math.max(
    ...["src/containment", "src/facts"].flatMap((d) =>
      readdirSync(join(ROOT, d))
        .filter((f) => f.endsWith(".ts"))
        .map((f) => statSync(join(ROOT, d, f)).mtimeMs),
    ),
  );
  if (!existsSync(built) || statSync(built).mtimeMs < newest) {
    const r = spawnSync("npm", ["run", "build"], { cwd: ROOT, stdio: "inherit" });
    if (!existsSync(built) || statSync(built).mtimeMs < newest)
      throw new Error(`build failed (tsc exit ${r.status}); ${built} missing or stale`);
  }
  copyDir = mkdtempSync(join(tmpdir(), "proclease-containment-"));
  for (const d of ["containment", "facts"])
    cpSync(join(ROOT, "dist", d), join(copyDir, "dist", d), { recursive: true });
  cpSync(join(FIX, "detect.mjs"), join(copyDir, "detect.mjs"));
  const open = (p: string) => {
    const dir = statSync(p).isDirectory();
    chmodSync(p, dir ? 0o755 : 0o644);
    if (dir) for (const n of readdirSync(p)) open(join(p, n));
  };
  open(copyDir);
}, 120_000);
afterAll(() => {
  if (copyDir) rmSync(copyDir, { recursive: true, force: true });
});

interface DetectRun {
  uid: number;
  cgroup: string | null;
  support: ContainmentSupport;
}
function parseRun(stdout: string, stderr: string): DetectRun {
  const line = stdout.trim().split("\n").pop();
  if (!line) throw new Error(`detect.mjs printed nothing; stderr: ${stderr}`);
  return JSON.parse(line) as DetectRun;
}

describe("detection elsewhere", () => {
  const nobodyReason = process.getuid?.() !== 0 ? "not root, cannot start a child as uid 65534" : null;
  if (nobodyReason) console.log(`containment/detection-elsewhere.test: uid 65534 detection skipped: ${nobodyReason}`);
  it.skipIf(SKIP || nobodyReason)(
    `as uid 65534 without delegation: unavailable, with a why an operator can act on${SKIP ? NOTE : nobodyReason ? ` [skipped: ${nobodyReason}]` : ""}`,
    () => {
      const run = spawnSync(
        process.execPath,
        [join(copyDir, "detect.mjs"), join(copyDir, "dist", "containment", "index.js")],
        {
          uid: 65534,
          gid: 65534,
          cwd: copyDir,
          encoding: "utf8",
          timeout: 20_000,
        },
      );
      const r = parseRun(run.stdout, run.stderr);
      expect(r.uid).toBe(65534);
      expect(r.support.available).toBe(false);
      if (r.support.available) return;
      expect(r.support.code).toBe("not-delegated");
      expect(r.support.why).toMatch(/not root \(uid 65534\)/);
      expect(r.support.why).toMatch(/Delegate=yes/);
      console.log(`containment/detection-elsewhere.test: uid 65534 sees: ${r.support.why}`);
    },
  );

  it.skipIf(SKIP)(`a gateway started inside its own _gateway leaf keeps the same lease root${NOTE}`, async () => {
    const s = on(support);
    // a private base next to ours, so the real proclease/ root is untouched
    const base = `${s.base}/proclease-test-base-${process.pid}-${++seq}`;
    mkdirSync(base);
    mkdirSync(`${base}/proclease`);
    mkdirSync(`${base}/proclease/${GATEWAY_LEAF}`);
    try {
      const leaf = `${base}/proclease/${GATEWAY_LEAF}`;
      const script = `echo $$ > '${leaf}/cgroup.procs' && exec '${process.execPath}' '${join(copyDir, "detect.mjs")}' '${join(copyDir, "dist", "containment", "index.js")}'`;
      const run = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
        const c = spawn("/bin/sh", ["-c", script], { stdio: ["ignore", "pipe", "pipe"] });
        children.push(c);
        let stdout = "";
        let stderr = "";
        c.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
        c.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
        c.on("close", () => resolve({ stdout, stderr }));
      });
      const r = parseRun(run.stdout, run.stderr);
      expect(r.cgroup).toBe(leaf);
      expect(r.support).toMatchObject({
        available: true,
        base,
        root: `${base}/proclease`,
        gatewayCgroup: leaf,
        movedGateway: false,
      });
    } finally {
      await waitFor(async () => (await isPopulated(base)) === "empty", 10_000);
      for (const d of [`${base}/proclease/${GATEWAY_LEAF}`, `${base}/proclease`, base]) rmdirSync(d);
    }
  });
});
