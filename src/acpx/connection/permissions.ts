/**
 * session/request_permission, answered by the controller option
 * `onPermissionRequest(request, { handle, signal })`. Fail closed:
 * - no hook: "cancelled" (the agent never runs a tool that asks);
 * - a hook that throws, returns something that is not an answer, names an
 *   option the agent did not offer, or takes longer than
 *   `permissionTimeoutMs`: "cancelled", and the logger says why;
 * - the turn is cancelled, the session closes or the agent withdraws the
 *   request: `signal` aborts and the answer is "cancelled" at once, whatever
 *   the hook does later (ACP: a client answers pending permission requests
 *   of a cancelled turn with "cancelled").
 * The hook may answer with the ACP response (`{ outcome: { outcome:
 * "selected", optionId } }`) or the bare outcome (`{ outcome: "selected",
 * optionId }`).
 */
import type {
  RequestPermissionOutcome,
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import type { ControllerLogger } from "../report/logger.js";
import type { AcpRuntimeHandle } from "./types.js";

/** default bound on one permission answer: a human may be asked */
export const DEFAULT_PERMISSION_TIMEOUT_MS = 300_000;

export interface PermissionContext {
  handle: AcpRuntimeHandle;
  /** aborts when the answer is no longer wanted (turn cancelled, session closed, request withdrawn, timeout) */
  signal: AbortSignal;
}

export type PermissionAnswer = RequestPermissionResponse | RequestPermissionOutcome;
export type PermissionHook = (
  request: RequestPermissionRequest,
  ctx: PermissionContext,
) => PermissionAnswer | Promise<PermissionAnswer>;

const CANCELLED: RequestPermissionResponse = Object.freeze({
  outcome: Object.freeze({ outcome: "cancelled" as const }),
});

export class PermissionBroker {
  private readonly pending = new Set<AbortController>();
  /** set by cancelAll until the next turn starts: a request arriving in a cancelled turn is answered "cancelled" at once */
  private refusing: string | undefined;

  constructor(
    private readonly hook: PermissionHook | undefined,
    private readonly timeoutMs: number,
    private readonly handle: () => AcpRuntimeHandle | undefined,
    private readonly log: ControllerLogger,
  ) {}

  /** The AcpClient's session/request_permission handler. */
  readonly answer = async (
    request: RequestPermissionRequest,
    requestSignal: AbortSignal,
  ): Promise<RequestPermissionResponse> => {
    const handle = this.handle();
    if (this.hook === undefined || handle === undefined) return CANCELLED;
    if (this.refusing !== undefined) {
      this.log.info?.(
        `permission request of ${JSON.stringify(handle.sessionKey)} answered "cancelled": ${this.refusing}`,
        { sessionKey: handle.sessionKey },
      );
      return CANCELLED;
    }
    const ac = new AbortController();
    this.pending.add(ac);
    const onWithdrawn = (): void => ac.abort(new Error("the agent withdrew the permission request"));
    requestSignal.addEventListener("abort", onWithdrawn, { once: true });
    const timer = setTimeout(() => ac.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    timer.unref();
    try {
      const aborted = new Promise<"aborted">((resolve) =>
        ac.signal.addEventListener("abort", () => resolve("aborted"), { once: true }),
      );
      const hook = this.hook;
      const answer = await Promise.race([
        Promise.resolve().then(() => hook(request, { handle, signal: ac.signal })),
        aborted,
      ]);
      if (answer === "aborted") {
        this.log.warn?.(
          `permission request of ${JSON.stringify(handle.sessionKey)} answered "cancelled": ${errText(ac.signal.reason)}`,
          { sessionKey: handle.sessionKey },
        );
        return CANCELLED;
      }
      return this.checked(request, answer, handle);
    } catch (err) {
      this.log.warn?.(
        `onPermissionRequest threw for ${JSON.stringify(handle.sessionKey)}; answered "cancelled": ${errText(err)}`,
        { sessionKey: handle.sessionKey },
      );
      return CANCELLED;
    } finally {
      clearTimeout(timer);
      requestSignal.removeEventListener("abort", onWithdrawn);
      this.pending.delete(ac);
    }
  };

  /** Every pending request, and every one until the next turn starts, is answered "cancelled" (turn cancelled, session closing). */
  cancelAll(why: string): void {
    this.refusing = why;
    for (const ac of this.pending) ac.abort(new Error(why));
  }

  /** A new turn: its requests go to the hook again. */
  turnStarted(): void {
    this.refusing = undefined;
  }

  private checked(
    request: RequestPermissionRequest,
    answer: unknown,
    handle: AcpRuntimeHandle,
  ): RequestPermissionResponse {
    const outcome = outcomeOf(answer);
    if (outcome === undefined) {
      this.log.warn?.(
        `onPermissionRequest returned no ACP permission outcome for ${JSON.stringify(handle.sessionKey)}; answered "cancelled"`,
        { sessionKey: handle.sessionKey },
      );
      return CANCELLED;
    }
    if (outcome.outcome === "cancelled") return CANCELLED;
    if (!request.options.some((o) => o.optionId === outcome.optionId)) {
      this.log.warn?.(
        `onPermissionRequest selected ${JSON.stringify(outcome.optionId)}, which the agent did not offer (${request.options.map((o) => o.optionId).join(", ")}); answered "cancelled"`,
        { sessionKey: handle.sessionKey },
      );
      return CANCELLED;
    }
    return { outcome: { outcome: "selected", optionId: outcome.optionId } };
  }
}

function outcomeOf(answer: unknown): { outcome: "cancelled" } | { outcome: "selected"; optionId: string } | undefined {
  if (typeof answer !== "object" || answer === null) return undefined;
  const a = answer as { outcome?: unknown; optionId?: unknown };
  const o =
    typeof a.outcome === "object" && a.outcome !== null ? (a.outcome as { outcome?: unknown; optionId?: unknown }) : a;
  if (o.outcome === "cancelled") return { outcome: "cancelled" };
  if (o.outcome === "selected" && typeof o.optionId === "string" && o.optionId !== "")
    return { outcome: "selected", optionId: o.optionId };
  return undefined;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The option of a permission request whose kind is `kind` (allow_once, allow_always, reject_once, reject_always), for hooks. */
export function permissionOption(request: RequestPermissionRequest, kind: string): PermissionAnswer | undefined {
  const o = request.options.find((x) => x.kind === kind);
  return o === undefined ? undefined : { outcome: { outcome: "selected", optionId: o.optionId } };
}
