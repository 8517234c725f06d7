/**
 * The model and thinking level OpenClaw may ask for when it ensures a
 * session. ACP carries both as session config options (the agent offers a
 * "model" option, and a thinking one under one of OpenClaw's names for it),
 * so they are set right after the session opens. An explicit choice the
 * agent does not offer fails the ensure (fail closed, the session is closed
 * again); an inherited default it does not offer is reported `dropped`, as
 * OpenClaw's contract asks, and the agent keeps its own default.
 */
import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import type { AcpRuntimeHandle } from "../acpx/connection/types.js";
import type { AcpxLifecycleController } from "../acpx/controller/types.js";
import { failure, type OpenClawFailure } from "./errors.js";
import type { OpenClawEnsureInput, OpenClawRuntimeHandle } from "./types.js";

const THINKING_IDS = new Set(["thinking", "effort", "reasoning_effort", "thought_level"]);

type Applied = Pick<OpenClawRuntimeHandle, "appliedModel" | "appliedThinking">;

export type AppliedOptions = { ok: true; applied: Applied } | { ok: false; failure: OpenClawFailure };

export async function applyRequestedOptions(
  ctl: AcpxLifecycleController,
  handle: AcpRuntimeHandle,
  input: OpenClawEnsureInput,
  backendId: string,
): Promise<AppliedOptions> {
  if (input.model === undefined && input.thinking === undefined) return { ok: true, applied: {} };
  const options = (await ctl.sessionStatus(handle)).configOptions ?? [];
  const applied: Applied = {};
  if (input.model !== undefined) {
    const option = options.find((o) => o.id.toLowerCase() === "model" || o.category === "model");
    const r = await applyOne(ctl, handle, option, input.model);
    if (r === "applied") applied.appliedModel = { kind: "applied", model: input.model };
    else if (input.modelExplicit === true)
      return { ok: false, failure: unavailable(backendId, "model", input.model, option) };
    else applied.appliedModel = { kind: "dropped" };
  }
  if (input.thinking !== undefined) {
    const option = options.find((o) => THINKING_IDS.has(o.id.toLowerCase()) || o.category === "thought_level");
    const r = await applyOne(ctl, handle, option, input.thinking);
    if (r === "applied") applied.appliedThinking = { kind: "applied", thinking: input.thinking };
    else if (input.thinkingExplicit === true)
      return { ok: false, failure: unavailable(backendId, "thinking level", input.thinking, option) };
    else applied.appliedThinking = { kind: "dropped" };
  }
  return { ok: true, applied };
}

async function applyOne(
  ctl: AcpxLifecycleController,
  handle: AcpRuntimeHandle,
  option: SessionConfigOption | undefined,
  value: string,
): Promise<"applied" | "not-offered"> {
  if (option === undefined || option.type !== "select" || !offered(option).includes(value)) return "not-offered";
  if (option.currentValue !== value) await ctl.setConfigOption(handle, option.id, value);
  return "applied";
}

function offered(option: SessionConfigOption & { type: "select" }): string[] {
  const out: string[] = [];
  for (const o of option.options as Array<{ value?: string; options?: Array<{ value: string }> }>) {
    if (typeof o.value === "string") out.push(o.value);
    for (const v of o.options ?? []) out.push(v.value);
  }
  return out;
}

function unavailable(
  backendId: string,
  what: string,
  value: string,
  option: SessionConfigOption | undefined,
): OpenClawFailure {
  const why =
    option === undefined
      ? `the agent offers no ${what} option`
      : option.type === "select"
        ? `the agent offers ${offered(option).join(", ")}`
        : `the agent's ${JSON.stringify(option.id)} option is not a choice of values`;
  return failure(
    "ACP_INVALID_RUNTIME_OPTION",
    `${what.toUpperCase().replace(" ", "_")}_UNAVAILABLE`,
    backendId,
    `${what} ${JSON.stringify(value)} was asked for explicitly and is not available: ${why}; the session was closed again`,
    false,
  );
}
