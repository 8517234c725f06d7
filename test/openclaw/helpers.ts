/**
 * Helpers for the OpenClaw backend tests: a runtime on a temp state dir
 * with the fixture agent, disposed after each test (its controller goes on
 * the list controller-helpers' disposeAfterEach empties, and every lease a
 * handle names is tracked for the safety net), and turn collectors.
 */
import {
  createOpenClawAcpRuntime,
  type OpenClawAcpRuntime,
  type ProcleaseOpenClawHandle,
} from "../../src/openclaw/runtime.js";
import type { OpenClawAcpRuntimeOptions } from "../../src/openclaw/options.js";
import type {
  OpenClawEnsureInput,
  OpenClawLiveEvent,
  OpenClawRuntimeEvent,
  OpenClawRuntimeTurn,
} from "../../src/openclaw/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { AGENT, GRACE_MS, tempStateDir, trackLease } from "../acpx/controller-helpers.js";

export type Runtime = OpenClawAcpRuntime;

/** The fixture agent's argv with its knobs. */
export function fixture(...knobs: string[]): string[] {
  return [process.execPath, AGENT, ...knobs];
}

export async function newRuntime(
  controllers: AcpxLifecycleController[],
  label: string,
  extra: Partial<OpenClawAcpRuntimeOptions> = {},
  stateDir = tempStateDir(`oc-${label}`),
): Promise<Runtime> {
  const rt = createOpenClawAcpRuntime({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    agents: { fixture: { command: fixture() } },
    ...extra,
  });
  await rt.ready;
  controllers.push(await rt.controller());
  return rt;
}

let seq = 0;
export async function ensure(rt: Runtime, over: Partial<OpenClawEnsureInput> = {}): Promise<ProcleaseOpenClawHandle> {
  const h = await rt.ensureSession({
    sessionKey: `agent:main:acp:t${++seq}`,
    agentId: "main",
    agent: "fixture",
    mode: "persistent",
    ...over,
  });
  trackLease(h.leaseId);
  return h;
}

export async function drain(turn: OpenClawRuntimeTurn): Promise<OpenClawLiveEvent[]> {
  const out: OpenClawLiveEvent[] = [];
  for await (const e of turn.events) out.push(e);
  return out;
}

export async function collect(events: AsyncIterable<OpenClawRuntimeEvent>): Promise<OpenClawRuntimeEvent[]> {
  const out: OpenClawRuntimeEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

/** The reply text of a turn's events (output text_delta only). */
export function replyText(events: readonly OpenClawRuntimeEvent[]): string {
  return events.map((e) => (e.type === "text_delta" && e.stream === "output" ? e.text : "")).join("");
}

let req = 0;
export function turnInput(handle: ProcleaseOpenClawHandle, text: string, extra: { signal?: AbortSignal } = {}) {
  return { handle, text, mode: "prompt" as const, requestId: `req-${++req}`, ...extra };
}

/** The error a promise rejects with (fails the test when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<Record<string, unknown> & Error> {
  try {
    await p;
  } catch (e) {
    return e as Record<string, unknown> & Error;
  }
  throw new Error("expected a rejection");
}
