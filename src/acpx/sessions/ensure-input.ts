/**
 * ensureSession's (and spawnRawAdapter's) input, parsed once at the edge:
 * every field checked here, in one order (the first wrong field is the one
 * named), and copied into a frozen EnsureInput. Nothing downstream checks it
 * again, and nothing downstream can be handed an unparsed input (the type is
 * branded). A rejection is a TypeError naming the field, or a
 * CwdUnusableError for a cwd that cannot be entered, always before any lease
 * or cgroup is made. The rules a field shares with the OpenClaw plugin's
 * options keep their homes: envRemove (wrapper-env.ts), auth (handshake.ts),
 * limits (session-limits.ts).
 */
import type { McpServer } from "@agentclientprotocol/sdk";
import { checkCwd } from "../../ownership/index.js";
import { assertOwnerKeys } from "../../sessions/index.js";
import { assertAuthInput } from "../connection/handshake-steps.js";
import { assertSessionLimits, enforcedLimits, type EnforcedLimits } from "./session-limits.js";
import type { AcpAuthInput, AcpRuntimeEnsureInput } from "../connection/types.js";
import { assertEnvRemove } from "../launch/wrapper-env.js";

declare const parsedBrand: unique symbol;

/** ensureSession's input once parsed: checked, copied and frozen; `limits` holds only the limits that constrain something. */
export type EnsureInput = Readonly<Omit<AcpRuntimeEnsureInput, "env" | "limits">> & {
  readonly env?: Readonly<Record<string, string>>;
  /** the positive limits asked for ("max" and absent keys ask for nothing) */
  readonly limits: Readonly<EnforcedLimits>;
  readonly [parsedBrand]: true;
};

/** ensureSession's input: the spawn's fields, then the reuse fields. */
export function parseEnsureInput(input: unknown): EnsureInput {
  const spawn = parseSpawnFields(input);
  return Object.freeze({ ...spawn, ...parseReuseFields(input as Record<string, unknown>) }) as EnsureInput;
}

/** spawnRawAdapter's input: the spawn's fields only (its plugin speaks ACP, so MCP servers and resume are not read). */
export function parseRawAdapterInput(input: unknown): EnsureInput {
  return Object.freeze(parseSpawnFields(input)) as EnsureInput;
}

/** The parsed input with the agent session ensureSession takes back. */
export function withResumeSessionId(input: EnsureInput, resumeSessionId: string): EnsureInput {
  return Object.freeze({ ...input, resumeSessionId }) as EnsureInput;
}

type SpawnFields = Omit<EnsureInput, typeof parsedBrand | "mcpServers" | "resumeSessionId" | "resume" | "replace">;

function parseSpawnFields(input: unknown): SpawnFields {
  if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
  const i = input as Record<string, unknown>;
  const sessionKey = i.sessionKey;
  if (typeof sessionKey !== "string" || sessionKey.length === 0) {
    throw new TypeError("input.sessionKey must be a non-empty string");
  }
  assertNoControlCharacters(sessionKey, "input.sessionKey");
  const agentId = i.agentId;
  if (typeof agentId !== "string" || agentId.length === 0)
    throw new TypeError("input.agentId must be a non-empty string");
  const command = parseCommand(i.command);
  const cwd = i.cwd;
  if (cwd !== undefined && (typeof cwd !== "string" || cwd.length === 0)) {
    throw new TypeError("input.cwd must be a non-empty string when given");
  }
  const env = i.env === undefined ? undefined : parseEnv(i.env);
  const envRemove = i.envRemove;
  // the markers can never be removed: a TypeError names them
  if (envRemove !== undefined) assertEnvRemove(envRemove, "input.envRemove");
  const auth = i.auth;
  if (auth !== undefined) assertAuthInput(auth, "input.auth");
  const limits = i.limits;
  if (limits !== undefined) assertSessionLimits(limits, "input.limits");
  // exists, is a directory, may be entered: else a CwdUnusableError naming it, before any lease or cgroup is made
  if (cwd !== undefined) checkCwd(cwd);
  return {
    sessionKey,
    agentId,
    command,
    ...(cwd !== undefined ? { cwd } : {}),
    ...(env !== undefined ? { env } : {}),
    ...(envRemove !== undefined ? { envRemove: Object.freeze([...envRemove]) } : {}),
    ...(auth !== undefined ? { auth: copyAuth(auth) } : {}),
    limits: Object.freeze(enforcedLimits(limits)),
    ...ownerFields(i),
  };
}

function parseCommand(command: unknown): readonly string[] {
  if (typeof command === "string") {
    throw new TypeError(
      'input.command must be an argv array, got a string: give the program and each argument as its own entry (["npx", "@agentclientprotocol/codex-acp"]); a command is never run through a shell',
    );
  }
  if (!Array.isArray(command)) {
    throw new TypeError(
      `input.command must be an argv array (the adapter's program and its arguments), got ${command === null ? "null" : typeof command}`,
    );
  }
  if (command.length === 0) throw new TypeError("input.command must be a non-empty argv array, got an empty array");
  command.forEach((a: unknown, i: number) => {
    if (typeof a !== "string") throw new TypeError(`input.command[${i}] must be a string`);
  });
  if (command[0] === "") throw new TypeError("input.command[0] (the adapter executable) must be a non-empty string");
  return Object.freeze([...(command as string[])]);
}

function parseEnv(env: unknown): Readonly<Record<string, string>> {
  if (typeof env !== "object" || env === null) throw new TypeError("input.env must be an object of strings");
  const entries = Object.entries(env);
  for (const [k, v] of entries) {
    if (typeof v !== "string") throw new TypeError(`input.env.${k} must be a string`);
  }
  return Object.freeze(Object.fromEntries(entries) as Record<string, string>);
}

/** A resolver is kept as given; `{ methodId }` is copied, so a later change by the caller cannot reach the handshake. */
function copyAuth(auth: AcpAuthInput): AcpAuthInput {
  return typeof auth === "function" ? auth : Object.freeze({ methodId: auth.methodId });
}

type OwnerFields = Pick<AcpRuntimeEnsureInput, "spawnedBy" | "parentSessionKey" | "ownerSessionKey">;

/** Who the session belongs to: checked here, before any lease or spawn, by the owner record's own rule (sessions/owner.ts). */
function ownerFields(i: Record<string, unknown>): OwnerFields {
  assertOwnerKeys(i);
  const out: OwnerFields = {};
  for (const f of ["spawnedBy", "parentSessionKey", "ownerSessionKey"] as const) {
    if (i[f] !== undefined) out[f] = i[f] as string;
  }
  return out;
}

type ReuseFields = Pick<EnsureInput, "mcpServers" | "resumeSessionId" | "resume" | "replace">;

function parseReuseFields(i: Record<string, unknown>): ReuseFields {
  const { resumeSessionId, resume, replace, mcpServers } = i;
  if (resumeSessionId !== undefined && (typeof resumeSessionId !== "string" || resumeSessionId === "")) {
    throw new TypeError("input.resumeSessionId must be a non-empty string when given");
  }
  if (resume !== undefined && typeof resume !== "boolean") throw new TypeError("input.resume must be a boolean");
  if (replace !== undefined && typeof replace !== "boolean") throw new TypeError("input.replace must be a boolean");
  if (mcpServers !== undefined) {
    if (!Array.isArray(mcpServers)) throw new TypeError("input.mcpServers must be an array of ACP MCP server configs");
    mcpServers.forEach((m: unknown, n: number) => {
      if (typeof m !== "object" || m === null || typeof (m as { name?: unknown }).name !== "string") {
        throw new TypeError(`input.mcpServers[${n}] must be an ACP MCP server config with a name`);
      }
    });
  }
  return {
    ...(resumeSessionId !== undefined ? { resumeSessionId } : {}),
    ...(resume !== undefined ? { resume } : {}),
    ...(replace !== undefined ? { replace } : {}),
    // the list is ours; each server's config goes to the agent as given
    ...(mcpServers !== undefined ? { mcpServers: Object.freeze([...(mcpServers as McpServer[])]) } : {}),
  };
}

// Unicode's control characters (category Cc): C0 (U+0000–U+001F), DEL (U+007F) and C1 (U+0080–U+009F)
const CONTROL_CHARACTER = /\p{Cc}/u;

/**
 * A session key lands in lease records, logs and every operator's terminal
 * (`proclease status`): a control character in it could rewrite what those
 * show (an escape sequence, a carriage return), so it is refused, whatever
 * the caller meant by it.
 */
function assertNoControlCharacters(value: string, what: string): void {
  const m = CONTROL_CHARACTER.exec(value);
  if (m === null) return;
  const code = `U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
  throw new TypeError(`${what} must not contain control characters (C0, DEL or C1); found ${code} at index ${m.index}`);
}
