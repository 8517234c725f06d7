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
import { atomicWrite, ensurePrivateDir, readOwnedFile } from "../../ownership/leases/fs-safe.js";
import { hostFault } from "../../ownership/leases/host-faults.js";
import { buildSessionOwner, type AcpSessionOwner } from "../../sessions/index.js";
import type { AcpRuntimeEnsureInput } from "../connection/types.js";

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
  /** a durable session's handshake facts, for its re-adoption (durable/adopt-record.ts; checked when read) */
  adoption?: unknown;
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

/**
 * A key's record file that exists but cannot be used: over MAX_RECORD_BYTES
 * (an earlier version stored an agent's oversized session id), not JSON, not
 * a record, not a regular file, a symlink, or another uid's. The key's
 * session is then found through the lease store (the lease names its key),
 * so it can still be closed and the key ensured again; the file goes once
 * the key's lease is settled.
 */
export interface DamagedSessionRecord {
  kind: "damaged";
  sessionKey: string;
  why: string;
}

export interface SessionStore {
  readonly dir: string;
  /** null when the key has no record; a transient read failure (EMFILE, EIO) rejects */
  get(sessionKey: string): Promise<StoredSessionRecord | DamagedSessionRecord | null>;
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

/** A record file that exists and can never be read as a record (readRecord). */
class DamagedRecordError extends Error {}

export async function openSessionStore(stateDir: string): Promise<SessionStore> {
  const dir = join(stateDir, "acpx", "sessions");
  // the same refusals and the same atomic, fsynced, symlink-refusing writes as the lease store (fs-safe.ts)
  await ensurePrivateDir(stateDir);
  await ensurePrivateDir(join(stateDir, "acpx"));
  await ensurePrivateDir(dir);
  const fileOf = (key: string) => join(dir, sessionFileName(key));

  /** the record, null when missing; a file that exists but is unusable is DamagedRecordError, a transient failure rethrown */
  async function readRecord(file: string): Promise<StoredSessionRecord | null> {
    const r = await readOwnedFile(file, MAX_RECORD_BYTES);
    if (r.kind === "missing") return null;
    if (r.kind === "unreadable" && r.code !== undefined) throw new Error(`session record ${file}: ${r.detail}`);
    if (r.kind !== "ok")
      throw new DamagedRecordError(
        `session record ${file} refused: ${r.kind === "unreadable" ? r.detail : r.kind === "foreign-owner" ? `owned by uid ${r.uid}` : "a symlink"}`,
      );
    let value: unknown;
    try {
      value = JSON.parse(r.text);
    } catch (err) {
      throw new DamagedRecordError(`session record ${file} is not JSON: ${(err as Error).message}`);
    }
    const parsed = parseSessionRecord(value);
    if (!parsed) throw new DamagedRecordError(`not a session record: ${file}`);
    return parsed;
  }

  return {
    dir,
    async get(sessionKey) {
      let rec: StoredSessionRecord | null;
      try {
        rec = await readRecord(fileOf(sessionKey));
      } catch (err) {
        if (err instanceof DamagedRecordError) return { kind: "damaged", sessionKey, why: err.message };
        throw err;
      }
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
        if (hostFault(err) === "missing") return false;
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
