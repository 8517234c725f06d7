/**
 * The ACP SDK (2.4.0, pinned in package.json) reports a notification whose
 * handler threw (a `session/update` its schema refuses) with console.error,
 * once per message, on the gateway's stderr: an agent could flood it. The
 * client app offers no hook for that, and its first handler (the SDK's own
 * session-update router) parses before any of ours, so the guard wraps the
 * app's handler chain before it connects: a notification whose handling
 * throws is reported through `onRefused` (counted and rate-limited by the
 * session's budget) and taken as handled; a request's error still goes to
 * the agent as its ACP error answer, as before. The chain is a private
 * field of the SDK's ClientApp: when it is not where this expects it (the
 * SDK changed), the client refuses to start, loudly, rather than let the
 * SDK write to stderr.
 */
import type { ClientApp } from "@agentclientprotocol/sdk";

interface IncomingMessage {
  kind: "request" | "notification";
  method: string;
}

interface MessageHandler {
  handleMessage(message: IncomingMessage, cx: unknown): Promise<unknown>;
  describe?: () => string;
}

function isHandler(v: unknown): v is MessageHandler {
  return typeof v === "object" && v !== null && typeof (v as { handleMessage?: unknown }).handleMessage === "function";
}

export function guardNotificationHandlers(app: ClientApp, onRefused: (method: string) => void): void {
  const builder = (app as unknown as { builder?: { handlers?: unknown } }).builder;
  const handlers = builder?.handlers;
  if (!Array.isArray(handlers) || !handlers.every(isHandler)) {
    throw new Error(
      "proclease: the ACP SDK's client handler chain is not where proclease expects it (a different @agentclientprotocol/sdk than 2.4.0?): refusing to start a connection whose notification errors would go to stderr unbounded",
    );
  }
  for (let i = 0; i < handlers.length; i++) {
    const inner = handlers[i] as MessageHandler;
    const refused = (message: IncomingMessage): { handled: true } => {
      onRefused(message.method);
      return { handled: true };
    };
    // no async wrapper: each of a burst's messages passes here, and one would add a promise and two turns of the microtask queue to each
    const guarded: MessageHandler = {
      handleMessage: (message, cx) => {
        let handled: Promise<unknown>;
        try {
          handled = Promise.resolve(inner.handleMessage(message, cx));
        } catch (err) {
          return message.kind === "notification" ? Promise.resolve(refused(message)) : Promise.reject(err);
        }
        return message.kind === "notification" ? handled.catch(() => refused(message)) : handled;
      },
    };
    if (inner.describe) guarded.describe = () => inner.describe!();
    handlers[i] = guarded;
  }
}
