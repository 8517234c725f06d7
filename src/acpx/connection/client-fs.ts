/**
 * ACP client file access (`clientCapabilities.fs`): fs/read_text_file and
 * fs/write_text_file for the agent, confined to the session's cwd and the
 * configured roots. The agent is hostile input: every path is resolved
 * beneath its root's descriptor by the kernel at the moment it is opened,
 * only a regular file is ever opened for reading or writing, and nothing
 * blocks on a FIFO or a device (fs-beneath.ts and the addon's
 * beneath_posix.cc say how). Sizes are bounded both ways. Anything else is a
 * typed refusal: an ACP error whose data names it (`{ refusal, path }`),
 * and a line in the controller's logger. Each direction is advertised only
 * when on.
 */
import { isAbsolute } from "node:path";
import {
  RequestError,
  type ReadTextFileRequest,
  type ReadTextFileResponse,
  type WriteTextFileRequest,
} from "@agentclientprotocol/sdk";
import {
  locate,
  pinRoots,
  readBeneath,
  writeBeneath,
  type BeneathOutcome,
  type FsRefusal,
  type PinnedRoot,
} from "./fs-beneath.js";
import type { ControllerLogger } from "../report/logger.js";
import type { AnswerBudget } from "./session-budget.js";

export type { FsRefusal } from "./fs-beneath.js";

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

/** the JSON-RPC envelope around a read's content, counted with it */
const ANSWER_ENVELOPE_BYTES = 256;

export interface ClientFsHandlers {
  /** `answer`: the request's share of the session's answer budget, charged with the read limit before reading */
  read?: (p: ReadTextFileRequest, answer?: AnswerBudget) => Promise<ReadTextFileResponse>;
  write?: (p: WriteTextFileRequest) => Promise<void>;
}

export function assertFsOptions(v: unknown, name: string): asserts v is ClientFsOptions | undefined {
  if (v === undefined) return;
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${name} must be an object { roots?, read?, write?, maxReadBytes?, maxWriteBytes? }`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!["roots", "read", "write", "maxReadBytes", "maxWriteBytes"].includes(k))
      throw new TypeError(`${name}.${k} is not an option (roots, read, write, maxReadBytes, maxWriteBytes)`);
  }
  if (o.roots !== undefined) {
    if (!Array.isArray(o.roots)) throw new TypeError(`${name}.roots must be an array of absolute paths`);
    o.roots.forEach((r: unknown, i: number) => {
      if (typeof r !== "string" || !isAbsolute(r)) throw new TypeError(`${name}.roots[${i}] must be an absolute path`);
    });
  }
  for (const k of ["read", "write"])
    if (o[k] !== undefined && typeof o[k] !== "boolean") throw new TypeError(`${name}.${k} must be a boolean`);
  for (const k of ["maxReadBytes", "maxWriteBytes"]) {
    const x = o[k];
    if (x !== undefined && (typeof x !== "number" || !Number.isSafeInteger(x) || x < 1))
      throw new TypeError(`${name}.${k} must be a positive integer`);
  }
}

/**
 * The handlers for one session. `cwd` is the session's; `sessionId()` its
 * agent session id (a request naming another session is refused).
 */
export function createClientFs(
  opts: ClientFsOptions,
  cwd: string,
  sessionId: () => string | undefined,
  log: ControllerLogger,
): ClientFsHandlers {
  const rootsP = pinRoots([cwd, ...(opts.roots ?? [])], (root, why) =>
    log.warn?.(`fs root ${root} is not usable and is ignored: ${why}`, { root }),
  );
  const maxRead = opts.maxReadBytes ?? DEFAULT_MAX_READ_BYTES;
  const maxWrite = opts.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES;
  const refuse = (refusal: FsRefusal, path: string, why: string): never => {
    log.warn?.(`fs request refused (${refusal}): ${why}`, { refusal, path });
    throw new RequestError(refusal === "not-found" ? -32002 : -32602, `proclease refused the fs request: ${why}`, {
      refusal,
      path,
    });
  };
  const target = async (p: {
    sessionId: string;
    path: string;
  }): Promise<{ root: PinnedRoot; rel: string; path: string }> => {
    if (p.sessionId !== sessionId())
      refuse("wrong-session", p.path, `the request names session ${JSON.stringify(p.sessionId)}, not this one`);
    if (typeof p.path !== "string" || !isAbsolute(p.path))
      refuse("not-absolute", String(p.path), `ACP fs paths must be absolute, got ${JSON.stringify(p.path)}`);
    if (p.path.includes("\0"))
      refuse("io-error", p.path, `${JSON.stringify(p.path)} contains a NUL byte, which no file name can`);
    const at = locate(p.path, await rootsP);
    if (at === undefined) return refuse("outside-roots", p.path, `${p.path} is outside the session's cwd and roots`);
    return { ...at, path: p.path };
  };
  const settle = (path: string, o: BeneathOutcome): Buffer => (o.ok ? o.data : refuse(o.refusal, path, o.why));
  const out: ClientFsHandlers = {};
  if (opts.read !== false) {
    out.read = async (p, answer) => {
      const t = await target(p);
      // the answer can be as large as the read limit: its room in the session's answer queue is taken first
      await answer?.reserve(maxRead + ANSWER_ENVELOPE_BYTES);
      const data = settle(p.path, await readBeneath(t, maxRead));
      answer?.resize(data.length + ANSWER_ENVELOPE_BYTES);
      return { content: sliceLines(data.toString("utf8"), p.line, p.limit) };
    };
  }
  if (opts.write !== false) {
    out.write = async (p) => {
      const t = await target(p);
      if (typeof p.content !== "string") refuse("io-error", p.path, "content must be a string");
      const bytes = Buffer.from(p.content, "utf8");
      if (bytes.length > maxWrite)
        refuse("too-large", p.path, `${bytes.length} bytes exceed the write limit of ${maxWrite}`);
      settle(p.path, await writeBeneath(t, bytes));
    };
  }
  return out;
}

/** ACP's `line` (1-based) and `limit` (lines). */
function sliceLines(text: string, line: number | null | undefined, limit: number | null | undefined): string {
  if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text;
  const lines = text.split("\n");
  const from = Math.max(0, (line ?? 1) - 1);
  const to = limit === undefined || limit === null ? lines.length : from + Math.max(0, limit);
  return lines.slice(from, to).join("\n");
}
