/**
 * A bounded turn: one session/prompt, with a timeout and an AbortSignal that
 * send session/cancel, wait a bounded grace for the agent to end the turn,
 * then reject typed. Failures name what the processes did. The streaming of
 * the turn's updates is turn-stream.ts's; this file only bounds the request.
 */
import type { ContentBlock } from "@agentclientprotocol/sdk";
import {
  ACP_MAX_MESSAGE_BYTES,
  DEFAULT_CANCEL_GRACE_MS,
  MAX_PROMPT_TIMEOUT_MS,
  promptOverLimit,
  type AcpClient,
  type PromptAnswer,
} from "./acp-client.js";
import {
  acpErrorOf,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxPromptTooLargeError,
  AcpxSessionClosedError,
  diagnosticsNote,
  type InterruptedTurn,
  type PromptFailureCause,
} from "../report/errors.js";
import type { SessionPipes } from "../launch/launch.js";
import { describeEnd, type SessionEnd } from "../launch/wrapper-end.js";
import type { PromptOptions } from "./types.js";

/** Validates prompt options (signal, timeoutMs, cancelGraceMs); throws TypeError / RangeError naming the field. */
export function assertPromptOptions(opts: unknown): asserts opts is PromptOptions | undefined {
  if (opts === undefined) return;
  if (typeof opts !== "object" || opts === null) throw new TypeError("prompt options must be an object");
  const o = opts as Record<string, unknown>;
  if (o.signal !== undefined) {
    const sig = o.signal as { aborted?: unknown; addEventListener?: unknown } | null;
    if (
      typeof sig !== "object" ||
      sig === null ||
      typeof sig.aborted !== "boolean" ||
      typeof sig.addEventListener !== "function"
    ) {
      throw new TypeError("options.signal must be an AbortSignal");
    }
  }
  if (o.timeoutMs !== undefined) {
    if (typeof o.timeoutMs !== "number" || !Number.isFinite(o.timeoutMs))
      throw new TypeError(`options.timeoutMs must be a number of milliseconds, got ${String(o.timeoutMs)}`);
    if (o.timeoutMs <= 0 || o.timeoutMs > MAX_PROMPT_TIMEOUT_MS) {
      throw new RangeError(`options.timeoutMs must be > 0 and <= ${MAX_PROMPT_TIMEOUT_MS}, got ${o.timeoutMs}`);
    }
  }
  if (o.cancelGraceMs !== undefined) {
    if (typeof o.cancelGraceMs !== "number" || !Number.isInteger(o.cancelGraceMs)) {
      throw new TypeError(
        `options.cancelGraceMs must be an integer number of milliseconds, got ${String(o.cancelGraceMs)}`,
      );
    }
    if (o.cancelGraceMs < 0 || o.cancelGraceMs > 600_000)
      throw new RangeError(`options.cancelGraceMs must be between 0 and 600000, got ${o.cancelGraceMs}`);
  }
}

export interface TurnContext {
  sessionKey: string;
  acpSessionId: string;
  /** text, or ACP content blocks (validated by the caller) */
  prompt: string | readonly ContentBlock[];
  options?: PromptOptions;
  /** the adapter's stderr in error messages too (it is always in the errors' stderrTail) */
  stderrInMessage?: boolean;
  launched: Pick<SessionPipes, "howEnded" | "ended" | "onEnd" | "stderrTail" | "stderrSettled">;
  /** an earlier gateway's session/prompt, re-adopted (durable/adopt.ts): bounded as if sent now, nothing is sent */
  adopted?: Promise<PromptAnswer>;
}

export interface StartedTurn {
  /**
   * The ACP request itself, settling when the agent ends the turn (or the
   * connection closes); null when nothing was sent (aborted before the start).
   * A turn given up on still runs until this settles.
   */
  request: Promise<PromptAnswer> | null;
  /** what prompt() returns: the turn's result, or the typed error */
  result: Promise<PromptAnswer>;
}

/** Why a turn is refused before anything is sent (an aborted signal, an ended session, an oversize prompt), else undefined. */
function refusedBeforeSending(ctx: TurnContext, grace: number): Error | undefined {
  const signal = ctx.options?.signal;
  if (signal?.aborted) {
    const turn: InterruptedTurn = { cancelSent: false, turnEnded: true, cancelGraceMs: grace };
    return new AcpxPromptAbortError(ctx.sessionKey, turn, { cause: signal.reason });
  }
  const over = sessionEndedError(ctx.sessionKey, ctx.launched);
  if (over !== undefined) return over;
  // over the transport's limit the adapter would close the connection: refused here, the session untouched
  const size = promptOverLimit(ctx.acpSessionId, ctx.prompt);
  return size === undefined ? undefined : new AcpxPromptTooLargeError(ctx.sessionKey, size, ACP_MAX_MESSAGE_BYTES);
}

/**
 * Sends one session/prompt and bounds it. On timeout or abort: session/cancel,
 * then up to cancelGraceMs for the agent to end the turn, then a rejection
 * with AcpxPromptTimeoutError / AcpxPromptAbortError (turnEnded says whether
 * the session is free again). When the session's processes end first, an
 * AcpxPromptError names how (a killed wrapper as such). An error answer of
 * the agent becomes AcpxPromptError("agent-error") with its data and the
 * stderr tail. AcpxSessionClosedError (a close) passes through unchanged.
 */
export function startTurn(client: AcpClient, ctx: TurnContext): StartedTurn {
  const opts = ctx.options ?? {};
  const grace = opts.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
  const signal = opts.signal;
  const refused = ctx.adopted === undefined ? refusedBeforeSending(ctx, grace) : undefined;
  if (refused !== undefined) return { request: null, result: Promise.reject(refused) };
  const request = ctx.adopted ?? client.prompt(ctx.acpSessionId, ctx.prompt);
  // the caller may stop waiting before the request settles; it must never be an unhandled rejection
  request.catch(() => undefined);

  const result = new Promise<PromptAnswer>((resolve, reject) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let unsubscribe = (): void => undefined;
    const finish = (): boolean => {
      if (done) return false;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      unsubscribe();
      return true;
    };
    const interrupt = async (why: "timeout" | "abort"): Promise<void> => {
      if (!finish()) return;
      let cancelSent = true;
      try {
        await client.cancel(ctx.acpSessionId);
      } catch {
        cancelSent = false; // the connection is gone; the turn's own settlement says how
      }
      const settled = await Promise.race([
        request.then(
          (r) => ({ ended: true as const, stopReason: r.stopReason, error: undefined as unknown }),
          (error: unknown) => ({ ended: true as const, stopReason: undefined, error }),
        ),
        new Promise<{ ended: false }>((r) => setTimeout(() => r({ ended: false }), grace).unref()),
      ]);
      if (settled.ended && settled.error instanceof AcpxSessionClosedError) return reject(settled.error);
      const turn: InterruptedTurn = {
        cancelSent,
        turnEnded: settled.ended,
        cancelGraceMs: grace,
        ...(settled.ended && settled.stopReason !== undefined ? { stopReason: settled.stopReason } : {}),
      };
      if (!settled.ended) await ctx.launched.stderrSettled();
      const tail = ctx.launched.stderrTail();
      if (tail) turn.stderrTail = tail;
      const cause = settled.ended ? settled.error : undefined;
      reject(
        why === "timeout"
          ? new AcpxPromptTimeoutError(
              ctx.sessionKey,
              opts.timeoutMs!,
              turn,
              cause === undefined ? undefined : { cause },
            )
          : new AcpxPromptAbortError(ctx.sessionKey, turn, { cause: signal?.reason }),
      );
    };
    const onAbort = (): void => void interrupt("abort");
    signal?.addEventListener("abort", onAbort, { once: true });
    if (opts.timeoutMs !== undefined) timer = setTimeout(() => void interrupt("timeout"), opts.timeoutMs);

    request.then(
      (r) => {
        if (finish()) resolve(r);
      },
      (err: unknown) => {
        if (!finish()) return;
        void explainTurnFailure(err, ctx).then(reject);
      },
    );
    // the adapter's exit also closes the connection; whichever comes first, one error names it
    unsubscribe = ctx.launched.onEnd((end) => {
      if (!finish()) return;
      void ctx.launched.stderrSettled().then(() => reject(turnEndedError(ctx, end, undefined)));
    });
  });
  return { request, result };
}

/**
 * The error for a prompt on a session whose wrapper or adapter is gone, else
 * undefined. Such a session takes no turn: after a killed wrapper the adapter
 * may still answer, but nothing supervises it any more (its lease does).
 */
export function sessionEndedError(
  sessionKey: string,
  launched: Pick<SessionPipes, "howEnded" | "stderrTail">,
): AcpxPromptError | undefined {
  const end = launched.howEnded();
  return end === undefined ? undefined : turnEndedError({ sessionKey, launched }, end, undefined);
}

function turnEndedError(
  ctx: Pick<TurnContext, "sessionKey" | "stderrInMessage"> & { launched: Pick<SessionPipes, "stderrTail"> },
  end: SessionEnd,
  cause: unknown,
): AcpxPromptError {
  const failure: PromptFailureCause = end.kind;
  const stderrTail = ctx.launched.stderrTail();
  const details = { end, ...(stderrTail ? { stderrTail } : {}), ...(cause !== undefined ? { cause } : {}) };
  return new AcpxPromptError(
    ctx.sessionKey,
    failure,
    `ACP session ${JSON.stringify(ctx.sessionKey)}: ${describeEnd(end, "the prompt")}${diagnosticsNote(details, ctx.stderrInMessage === true)}`,
    details,
  );
}

async function explainTurnFailure(err: unknown, ctx: TurnContext): Promise<Error> {
  if (err instanceof AcpxSessionClosedError) return err;
  const acpError = acpErrorOf(err);
  await ctx.launched.stderrSettled();
  const stderrTail = ctx.launched.stderrTail();
  if (acpError) {
    const details = { acpError, cause: err, ...(stderrTail ? { stderrTail } : {}) };
    return new AcpxPromptError(
      ctx.sessionKey,
      "agent-error",
      `ACP session/prompt on ${JSON.stringify(ctx.sessionKey)} failed: ${acpError.message} (code ${acpError.code})${diagnosticsNote(details, ctx.stderrInMessage === true)}`,
      details,
    );
  }
  // the connection closed: usually the processes ended; wait briefly to say how
  const end =
    ctx.launched.howEnded() ??
    (await Promise.race([
      ctx.launched.ended,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 500).unref()),
    ]));
  if (end) return turnEndedError(ctx, end, err);
  const details = { cause: err, ...(stderrTail ? { stderrTail } : {}) };
  return new AcpxPromptError(
    ctx.sessionKey,
    "connection-lost",
    `ACP session/prompt on ${JSON.stringify(ctx.sessionKey)} failed: ${err instanceof Error ? err.message : String(err)}${diagnosticsNote(details, ctx.stderrInMessage === true)}`,
    details,
  );
}
