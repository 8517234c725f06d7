/**
 * The gateway instance id: minted once per state directory, then read back
 * forever. It tells this gateway's leases (and processes, through
 * OPENCLAW_GATEWAY_INSTANCE_ID) from another gateway's.
 */
import { randomUUID } from "node:crypto";
import { link, unlink } from "node:fs/promises";
import { join } from "node:path";
import { assertPrivate, ensurePrivateDir, fsyncDir, readOwnedFile, writeTemp } from "./fs-safe.js";
import { hostFault } from "./host-faults.js";
import type { GatewayInstanceId } from "./types.js";

export const INSTANCE_ID_FILE = "gateway-instance-id";
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{7,127}$/;

export class GatewayInstanceIdError extends Error {
  override name = "GatewayInstanceIdError";
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
  }
}

/**
 * Reads <stateDir>/gateway-instance-id, or creates it. Creation writes the
 * full id to a 0600 temp file, fsyncs it, then link()s it into place: link is
 * create-exclusive, so of two processes racing on the first start exactly one
 * wins and the other reads the winner's complete file (never a half-written
 * one). A corrupt, empty, symlinked or foreign-owned file is an error naming
 * the file: we never silently mint a second identity.
 */
export async function loadOrCreateGatewayInstanceId(stateDir: string): Promise<GatewayInstanceId> {
  if (typeof stateDir !== "string" || stateDir.length === 0) throw new TypeError("stateDir must be a non-empty string");
  await ensurePrivateDir(stateDir);
  const file = join(stateDir, INSTANCE_ID_FILE);
  const existing = await readId(file);
  if (existing !== null) return existing;
  const id = randomUUID();
  const tmp = await writeTemp(stateDir, INSTANCE_ID_FILE, `${id}\n`, true);
  try {
    await link(tmp, file);
  } catch (e) {
    if (hostFault(e) !== "exists") throw e;
    const winner = await readId(file);
    if (winner === null) throw new GatewayInstanceIdError(file, "vanished while another process was creating it");
    return winner;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
  await fsyncDir(stateDir);
  return id;
}

/**
 * The instance id of a state dir, read-only: null when the dir or the file
 * does not exist (nothing is created). The same refusals as the writer's.
 */
export async function readGatewayInstanceId(stateDir: string): Promise<GatewayInstanceId | null> {
  if (typeof stateDir !== "string" || stateDir.length === 0) throw new TypeError("stateDir must be a non-empty string");
  if (!(await ensurePrivateDir(stateDir, false))) return null;
  return readId(join(stateDir, INSTANCE_ID_FILE));
}

async function readId(file: string): Promise<string | null> {
  const r = await readOwnedFile(file, 4096);
  switch (r.kind) {
    case "missing":
      return null;
    case "symlink":
      throw new GatewayInstanceIdError(file, "is a symlink; refusing to trust it");
    case "foreign-owner":
      throw new GatewayInstanceIdError(file, `is owned by uid ${r.uid}; refusing to trust it`);
    case "unreadable":
      throw new GatewayInstanceIdError(file, `unreadable: ${r.detail}`);
    case "ok": {
      assertPrivate(file, r, "file");
      const id = r.text.trim();
      if (id.length === 0)
        throw new GatewayInstanceIdError(
          file,
          "is empty; refusing to mint a second identity (restore or delete it deliberately)",
        );
      if (!ID_RE.test(id))
        throw new GatewayInstanceIdError(file, "is corrupt (not an instance id); refusing to mint a second identity");
      return id;
    }
  }
}
