/**
 * ACP client file access (`clientCapabilities.fs`): fs/read_text_file and
 * fs/write_text_file for the agent, confined to the session's cwd and the
 * configured roots. Every path is resolved through its symlinks (realpath)
 * before the check, so a link inside a root that points outside is refused;
 * the final open uses O_NOFOLLOW, so a link swapped in after the check is
 * refused too. Sizes are bounded both ways. Anything else is a typed
 * refusal: an ACP error whose data names it (`{ refusal, path }`), and a
 * line in the controller's logger. Each direction is advertised only when on.
 */
import { constants as FS } from "node:fs";
import { lstat, mkdir, open, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { RequestError, type ReadTextFileRequest, type ReadTextFileResponse, type WriteTextFileRequest } from "@agentclientprotocol/sdk";
import type { ControllerLogger } from "./logger.js";

export const DEFAULT_MAX_READ_BYTES = 10 * 1024 * 1024;
export const DEFAULT_MAX_WRITE_BYTES = 10 * 1024 * 1024;

/** The controller option `clientCapabilities.fs`. */
export interface ClientFsOptions {
  /** absolute folders the agent may use besides the session's cwd */
  roots?: readonly string[];
  /** serve fs/read_text_file (default true) */
  read?: boolean;
  /** serve fs/write_text_file (default true) */
  write?: boolean;
  /** largest file read (default 10 MiB) */
  maxReadBytes?: number;
  /** largest content written (default 10 MiB) */
  maxWriteBytes?: number;
}

export interface ClientFsHandlers {
  read?: (p: ReadTextFileRequest) => Promise<ReadTextFileResponse>;
  write?: (p: WriteTextFileRequest) => Promise<void>;
}

/** Why an fs request was refused (the `refusal` in the ACP error's data). */
export type FsRefusal = "wrong-session" | "not-absolute" | "outside-roots" | "not-found" | "not-a-file" | "too-large" | "io-error";

export function assertFsOptions(v: unknown, name: string): asserts v is ClientFsOptions | undefined {
  if (v === undefined) return;
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new TypeError(`${name} must be an object { roots?, read?, write?, maxReadBytes?, maxWriteBytes? }`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!["roots", "read", "write", "maxReadBytes", "maxWriteBytes"].includes(k)) throw new TypeError(`${name}.${k} is not an option (roots, read, write, maxReadBytes, maxWriteBytes)`);
  }
  if (o.roots !== undefined) {
    if (!Array.isArray(o.roots)) throw new TypeError(`${name}.roots must be an array of absolute paths`);
    o.roots.forEach((r: unknown, i: number) => {
      if (typeof r !== "string" || !isAbsolute(r)) throw new TypeError(`${name}.roots[${i}] must be an absolute path`);
    });
  }
  for (const k of ["read", "write"]) if (o[k] !== undefined && typeof o[k] !== "boolean") throw new TypeError(`${name}.${k} must be a boolean`);
  for (const k of ["maxReadBytes", "maxWriteBytes"]) {
    const x = o[k];
    if (x !== undefined && (typeof x !== "number" || !Number.isSafeInteger(x) || x < 1)) throw new TypeError(`${name}.${k} must be a positive integer`);
  }
}

/**
 * The handlers for one session. `cwd` is the session's; `sessionId()` its
 * agent session id (a request naming another session is refused).
 */
export function createClientFs(opts: ClientFsOptions, cwd: string, sessionId: () => string | undefined, log: ControllerLogger): ClientFsHandlers {
  const rootsP = realRoots([cwd, ...(opts.roots ?? [])], log);
  const maxRead = opts.maxReadBytes ?? DEFAULT_MAX_READ_BYTES;
  const maxWrite = opts.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES;
  const refuse = (refusal: FsRefusal, path: string, why: string): never => {
    log.warn?.(`fs request refused (${refusal}): ${why}`, { refusal, path });
    throw new RequestError(refusal === "not-found" ? -32002 : -32602, `proclease refused the fs request: ${why}`, { refusal, path });
  };
  const precheck = (p: { sessionId: string; path: string }): void => {
    if (p.sessionId !== sessionId()) refuse("wrong-session", p.path, `the request names session ${JSON.stringify(p.sessionId)}, not this one`);
    if (typeof p.path !== "string" || !isAbsolute(p.path)) refuse("not-absolute", String(p.path), `ACP fs paths must be absolute, got ${JSON.stringify(p.path)}`);
  };
  const out: ClientFsHandlers = {};
  if (opts.read !== false) {
    out.read = async (p) => {
      precheck(p);
      const real = await realpath(p.path).catch((e: NodeJS.ErrnoException) => refuse(e.code === "ENOENT" ? "not-found" : "io-error", p.path, `${p.path}: ${e.message}`));
      if (!inside(real, await rootsP)) refuse("outside-roots", p.path, `${p.path} (${real}) is outside the session's cwd and roots`);
      return { content: sliceLines(await readBounded(real, maxRead, refuse), p.line, p.limit) };
    };
  }
  if (opts.write !== false) {
    out.write = async (p) => {
      precheck(p);
      if (typeof p.content !== "string") refuse("io-error", p.path, "content must be a string");
      const bytes = Buffer.from(p.content, "utf8");
      if (bytes.length > maxWrite) refuse("too-large", p.path, `${bytes.length} bytes exceed the write limit of ${maxWrite}`);
      const target = await writeTarget(p.path, await rootsP, refuse);
      const fh = await open(target, FS.O_WRONLY | FS.O_CREAT | FS.O_TRUNC | FS.O_NOFOLLOW, 0o644).catch((e: NodeJS.ErrnoException) =>
        refuse(e.code === "ELOOP" ? "outside-roots" : "io-error", p.path, `${target}: ${e.message}`),
      );
      try {
        await fh.writeFile(bytes);
      } finally {
        await fh.close();
      }
    };
  }
  return out;
}

async function realRoots(roots: readonly string[], log: ControllerLogger): Promise<string[]> {
  const out: string[] = [];
  for (const r of roots) {
    try {
      out.push(await realpath(resolve(r)));
    } catch (e) {
      log.warn?.(`fs root ${r} is not usable and is ignored: ${(e as Error).message}`, { root: r });
    }
  }
  return out;
}

function inside(real: string, roots: readonly string[]): boolean {
  return roots.some((root) => {
    const rel = relative(root, real);
    return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
  });
}

type Refuse = (refusal: FsRefusal, path: string, why: string) => never;

async function readBounded(real: string, max: number, refuse: Refuse): Promise<string> {
  const fh = await open(real, FS.O_RDONLY | FS.O_NOFOLLOW).catch((e: NodeJS.ErrnoException) => refuse("io-error", real, `${real}: ${e.message}`));
  try {
    const st = await fh.stat();
    if (!st.isFile()) refuse("not-a-file", real, `${real} is not a regular file`);
    if (st.size > max) refuse("too-large", real, `${real} is ${st.size} bytes, over the read limit of ${max}`);
    return await fh.readFile("utf8");
  } finally {
    await fh.close();
  }
}

/** ACP's `line` (1-based) and `limit` (lines). */
function sliceLines(text: string, line: number | null | undefined, limit: number | null | undefined): string {
  if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
  const lines = text.split("\n");
  const from = Math.max(0, (line ?? 1) - 1);
  const to = limit === undefined || limit === null ? lines.length : from + Math.max(0, limit);
  return lines.slice(from, to).join("\n");
}

/**
 * The real file a write goes to: the nearest existing ancestor resolved
 * through its links and checked, the missing folders made under it, and an
 * existing final link followed only when its target is inside too.
 */
async function writeTarget(path: string, roots: readonly string[], refuse: Refuse): Promise<string> {
  let existing = dirname(path);
  const missing: string[] = [];
  for (;;) {
    try {
      existing = await realpath(existing);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT" || dirname(existing) === existing) return refuse("io-error", path, `${existing}: ${(e as Error).message}`);
      missing.unshift(basename(existing));
      existing = dirname(existing);
    }
  }
  const parent = join(existing, ...missing);
  if (!inside(parent, roots)) refuse("outside-roots", path, `${path} (${parent}) is outside the session's cwd and roots`);
  if (missing.length > 0) await mkdir(parent, { recursive: true });
  const target = join(parent, basename(path));
  const st = await lstat(target).catch(() => undefined);
  if (st?.isSymbolicLink()) {
    const real = await realpath(target).catch((e: NodeJS.ErrnoException) => refuse("io-error", path, `${target}: ${e.message}`));
    if (!inside(real, roots)) refuse("outside-roots", path, `${path} links to ${real}, outside the session's cwd and roots`);
    return real;
  }
  if (st?.isDirectory()) refuse("not-a-file", path, `${target} is a directory`);
  return target;
}
