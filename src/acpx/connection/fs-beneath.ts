/**
 * The policy of confined file access (client-fs.ts serves it to the agent):
 * which root a path belongs to, and what each outcome of the addon's
 * confined jobs (native/beneath_posix.cc: the mechanism, and why it is
 * race-free and never blocks) means to the agent. A path is normalised
 * lexically (`a/../b` is `b`), matched against a root's configured or real
 * spelling, and resolved beneath that root's descriptor by the kernel; the
 * root itself is pinned by device and inode when the session starts.
 */
import { constants as BUFFER } from "node:buffer";
import { constants as OS } from "node:os";
import { realpath, stat } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { loadNative } from "../../facts/native.js";
import { BENEATH_STEP, type NativeBeneathResult, type NativeBinding } from "../../facts/native-binding.js";

/** Why an fs request was refused (the `refusal` in the ACP error's data). */
export type FsRefusal =
  | "wrong-session"
  | "not-absolute"
  | "outside-roots"
  | "not-found"
  | "not-a-file"
  | "symlink"
  | "too-large"
  | "io-error";

/** One root as the session pinned it. */
export interface PinnedRoot {
  /** the spelling the session was given, resolved */
  given: string;
  /** its real path, which the jobs open */
  real: string;
  dev: bigint;
  ino: bigint;
}

export type BeneathOutcome =
  { ok: true; data: Buffer; created: boolean } | { ok: false; refusal: FsRefusal; why: string };

/**
 * Confined jobs in flight at once, process-wide. Each is short and never
 * blocks, but a flood of 10 MiB reads must not take every thread of the
 * pool the gateway's own files need (libuv's default is four).
 */
const MAX_JOBS = 2;
let running = 0;
const waiting: (() => void)[] = [];

async function limited<T>(job: () => Promise<T>): Promise<T> {
  if (running >= MAX_JOBS) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await job();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** Each usable root's identity; one that cannot be resolved is reported and left out. */
export async function pinRoots(
  roots: readonly string[],
  warn: (root: string, why: string) => void,
): Promise<PinnedRoot[]> {
  const out: PinnedRoot[] = [];
  for (const r of roots) {
    try {
      const given = resolve(r);
      const real = await realpath(given);
      const st = await stat(real, { bigint: true });
      if (!st.isDirectory()) throw new Error("not a folder");
      out.push({ given, real, dev: st.dev, ino: st.ino });
    } catch (e) {
      warn(r, (e as Error).message);
    }
  }
  return out;
}

function under(root: string, path: string): string | undefined {
  const rel = relative(root, path);
  if (rel === "") return "";
  if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return undefined;
  return rel;
}

/** The first root the (absolute) path is lexically under, and the path relative to it. */
export function locate(path: string, roots: readonly PinnedRoot[]): { root: PinnedRoot; rel: string } | undefined {
  const norm = resolve(path);
  for (const root of roots) {
    const rel = under(root.given, norm) ?? under(root.real, norm);
    if (rel !== undefined) return { root, rel };
  }
  return undefined;
}

export interface BeneathCall {
  root: PinnedRoot;
  rel: string;
  /** shown in refusals: the path the agent asked for */
  path: string;
  /** resolve by the no-symlink walk even where openat2 exists (tests of the fallback) */
  walkOnly?: boolean;
}

const NO_ADDON: BeneathOutcome = {
  ok: false,
  refusal: "io-error",
  why: "confined file access needs the native addon, which is not loaded (PROCLEASE_DISABLE_NATIVE=1 or no build)",
};

/** The most a read can return: the longest string V8 makes (a larger maxReadBytes reads no more). */
const READ_CAP = Math.min(BUFFER.MAX_STRING_LENGTH, 0x7fffffff);

export async function readBeneath(c: BeneathCall, maxBytes: number): Promise<BeneathOutcome> {
  const native = loadNative();
  if (!native) return NO_ADDON;
  const max = Math.min(maxBytes, READ_CAP);
  const r = await limited(() =>
    native.readBeneath(c.root.real, c.root.dev, c.root.ino, c.rel, c.walkOnly === true, max),
  );
  return outcome(r, c, max);
}

export async function writeBeneath(c: BeneathCall, data: Buffer): Promise<BeneathOutcome> {
  const native: NativeBinding | null = loadNative();
  if (!native) return NO_ADDON;
  const r = await limited(() =>
    native.writeBeneath(c.root.real, c.root.dev, c.root.ino, c.rel, c.walkOnly === true, data),
  );
  return outcome(r, c, data.length);
}

const E = OS.errno;

function fileKind(mode: number): string {
  switch (mode & 0o170000) {
    case 0o010000:
      return "a FIFO";
    case 0o020000:
      return "a character device";
    case 0o060000:
      return "a block device";
    case 0o040000:
      return "a folder";
    case 0o140000:
      return "a socket";
    default:
      return "not a regular file";
  }
}

const errName = (err: number): string => Object.entries(E).find(([, n]) => n === -err)?.[0] ?? `errno ${-err}`;

/** What a job's result means to the agent. */
function outcome(r: NativeBeneathResult, c: BeneathCall, bound: number): BeneathOutcome {
  const p = JSON.stringify(c.path);
  const no = (refusal: FsRefusal, why: string): BeneathOutcome => ({ ok: false, refusal, why });
  switch (r.step) {
    case BENEATH_STEP.done:
      return { ok: true, data: r.data, created: r.created };
    case BENEATH_STEP.rootMoved:
      return no("outside-roots", `the root ${c.root.real} was moved or replaced since the session started`);
    case BENEATH_STEP.type:
      if ((r.mode & 0o170000) === 0o120000)
        return no("symlink", `${p} is a symlink, and symlinks are not followed here`);
      return no("not-a-file", `${p} is ${fileKind(r.mode)}; only regular files are read or written`);
    case BENEATH_STEP.tooLarge:
      return no("too-large", `${p} is over the read limit of ${bound} bytes`);
    case BENEATH_STEP.resolve:
      if (r.err === -E.ENOENT) return no("not-found", `${p} does not exist`);
      if (r.err === -E.EXDEV) return no("outside-roots", `${p} leads outside ${c.root.real} (through a symlink or ..)`);
      if (r.err === -E.ELOOP) return no("symlink", `${p} goes through a symlink that is not followed here`);
      if (r.err === -E.ENOTDIR) return no("not-found", `a component of ${p} is not a folder`);
      break;
    case BENEATH_STEP.open:
      if (r.err === -E.EEXIST)
        return no("symlink", `${p} is a dangling symlink, or kept changing while it was written`);
      break;
  }
  const where = Object.entries(BENEATH_STEP).find(([, n]) => n === r.step)?.[0] ?? String(r.step);
  return no("io-error", `${p}: ${errName(r.err)} at ${where}`);
}
