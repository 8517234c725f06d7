/**
 * Session records under `<stateDir>/acpx/sessions/`: one JSON file per
 * session key, written atomically (temp file + fsync + rename) so a crash
 * mid-write leaves either the old record or the new one, never half of each.
 *
 * Two shapes live here: the current record (it names its lease) and the
 * legacy record from before leases existed (`{sessionKey, pid, command,
 * wrapperPath?}`), which close still has to handle during the migration.
 */
import { createHash } from "node:crypto";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { atomicWrite, ensurePrivateDir, readOwnedFile } from "../ownership/leases/fs-safe.js";
import { buildSessionOwner, type AcpSessionOwner } from "../sessions/index.js";
import type { AcpRuntimeEnsureInput } from "./types.js";

export interface AcpxSessionRecord {
  sessionKey: string;
  leaseId: string;
  acpSessionId: string;
  owner: AcpSessionOwner;
  /** the agent id given to ensureSession (a resume is offered only to the same agent) */
  agentId?: string;
  /** the adapter argv as given to ensureSession (kept for operators) */
  command?: string[];
  cwd?: string;
  createdAt: number;
  updatedAt: number;
  /** set when closeSession settled the lease (record kept unless discarded) */
  closedAt?: number;
}

/** The owner and the record of a session ensureSession (or spawnRawAdapter) just started. */
export function newSessionRecord(
  input: AcpRuntimeEnsureInput,
  gatewayInstanceId: string,
  leaseId: string,
  acpSessionId: string,
): { owner: AcpSessionOwner; record: AcpxSessionRecord } {
  const owner = buildSessionOwner({
    sessionKey: input.sessionKey,
    agentId: input.agentId,
    gatewayInstanceId,
    ...(input.spawnedBy !== undefined ? { spawnedBy: input.spawnedBy } : {}),
    ...(input.parentSessionKey !== undefined ? { parentSessionKey: input.parentSessionKey } : {}),
    ...(input.ownerSessionKey !== undefined ? { ownerSessionKey: input.ownerSessionKey } : {}),
  });
  const now = Date.now();
  const record: AcpxSessionRecord = {
    sessionKey: input.sessionKey,
    leaseId,
    acpSessionId,
    owner,
    agentId: input.agentId,
    command: [...input.command],
    ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
    createdAt: now,
    updatedAt: now,
  };
  return { owner, record };
}

/** Records written before leases existed. Verified only by the legacy path. */
export interface LegacyAcpxSessionRecord {
  sessionKey: string;
  pid: number;
  command: string[] | string;
  wrapperPath?: string;
}

export type StoredSessionRecord =
  { kind: "lease"; record: AcpxSessionRecord } | { kind: "legacy"; record: LegacyAcpxSessionRecord };

export interface SessionStore {
  readonly dir: string;
  get(sessionKey: string): Promise<StoredSessionRecord | null>;
  put(record: AcpxSessionRecord | LegacyAcpxSessionRecord): Promise<void>;
  remove(sessionKey: string): Promise<boolean>;
  list(): Promise<{ records: StoredSessionRecord[]; problems: { file: string; error: string }[] }>;
}

/**
 * File name for a key: a readable prefix plus a hash, because keys may hold
 * "/" or exceed the file-name limit, and two keys must never share a file.
 */
export function sessionFileName(sessionKey: string): string {
  const readable = sessionKey.replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 64);
  const digest = createHash("sha256").update(sessionKey).digest("hex").slice(0, 16);
  return `${readable}-${digest}.json`;
}

export function parseSessionRecord(value: unknown): StoredSessionRecord | null {
  if (typeof value !== "object" || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.sessionKey !== "string" || v.sessionKey.length === 0) return null;
  if (typeof v.leaseId === "string" && v.leaseId.length > 0) {
    if (typeof v.acpSessionId !== "string" || typeof v.owner !== "object" || v.owner === null) return null;
    return { kind: "lease", record: v as unknown as AcpxSessionRecord };
  }
  const commandOk =
    typeof v.command === "string" || (Array.isArray(v.command) && v.command.every((a) => typeof a === "string"));
  if (typeof v.pid === "number" && commandOk) {
    if (v.wrapperPath !== undefined && typeof v.wrapperPath !== "string") return null;
    return { kind: "legacy", record: v as unknown as LegacyAcpxSessionRecord };
  }
  return null;
}

const MAX_RECORD_BYTES = 256 * 1024;

export async function openSessionStore(stateDir: string): Promise<SessionStore> {
  const dir = join(stateDir, "acpx", "sessions");
  // the same refusals and the same atomic, fsynced, symlink-refusing writes as the lease store (fs-safe.ts)
  await ensurePrivateDir(stateDir);
  await ensurePrivateDir(join(stateDir, "acpx"));
  await ensurePrivateDir(dir);
  const fileOf = (key: string) => join(dir, sessionFileName(key));

  async function readRecord(file: string): Promise<StoredSessionRecord | null> {
    const r = await readOwnedFile(file, MAX_RECORD_BYTES);
    if (r.kind === "missing") return null;
    if (r.kind !== "ok")
      throw new Error(
        `session record ${file} refused: ${r.kind === "unreadable" ? r.detail : r.kind === "foreign-owner" ? `owned by uid ${r.uid}` : "a symlink"}`,
      );
    const text = r.text;
    const parsed = parseSessionRecord(JSON.parse(text));
    if (!parsed) throw new Error(`not a session record: ${file}`);
    return parsed;
  }

  return {
    dir,
    async get(sessionKey) {
      const rec = await readRecord(fileOf(sessionKey));
      // A hash collision or a hand-edited file must not answer for another key.
      return rec && rec.record.sessionKey === sessionKey ? rec : null;
    },
    async put(record) {
      await atomicWrite(dir, sessionFileName(record.sessionKey), `${JSON.stringify(record, null, 2)}\n`, true);
    },
    async remove(sessionKey) {
      try {
        await rm(fileOf(sessionKey));
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
        throw err;
      }
    },
    async list() {
      const records: StoredSessionRecord[] = [];
      const problems: { file: string; error: string }[] = [];
      for (const name of (await readdir(dir)).sort()) {
        if (!name.endsWith(".json")) continue;
        try {
          const rec = await readRecord(join(dir, name));
          if (rec) records.push(rec);
        } catch (err) {
          problems.push({ file: name, error: err instanceof Error ? err.message : String(err) });
        }
      }
      return { records, problems };
    },
  };
}
