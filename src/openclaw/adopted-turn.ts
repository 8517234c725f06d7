/**
 * The turn a gateway restart interrupted, as OpenClaw gets to see it
 * (docs/openclaw.md "Durable sessions"). OpenClaw does not resume an ACP
 * turn across its restart: the message that started it is not sent again,
 * and nobody waits for its reply. The agent, kept running by its wrapper,
 * finishes it anyway (its side effects happen), and the controller hands it
 * back with the session (`handle.turn`). So the runtime reads it to its end
 * in the background, and the next turn OpenClaw runs on that session first
 * waits for it (the agent takes one turn at a time), then streams a status
 * line and what the interrupted turn said, before its own reply.
 *
 * Bounded: past MAX_ADOPTED_BYTES of events the oldest are dropped and the
 * status line says how many.
 */
import type { AdoptedTurn } from "../acpx/connection/types.js";
import { estimateJsonBytes } from "../acpx/connection/update-bytes.js";
import { EventMapper } from "./events.js";
import type { OpenClawLiveEvent } from "./types.js";

/** what the runtime keeps of one interrupted turn's events for the next reply */
export const MAX_ADOPTED_BYTES = 256 * 1024;

export interface AdoptedReply {
  /** resolves once the interrupted turn ended (never rejects) */
  readonly done: Promise<void>;
  /** its events (after done), a status line first */
  events(): OpenClawLiveEvent[];
}

export function readAdoptedTurn(turn: AdoptedTurn): AdoptedReply {
  const kept: { ev: OpenClawLiveEvent; bytes: number }[] = [];
  let bytes = 0;
  let dropped = 0;
  let ending = "";
  const mapper = new EventMapper();
  const done = (async () => {
    try {
      for await (const u of turn.events) {
        const ev = mapper.map(u);
        if (ev === undefined) continue;
        const b = estimateJsonBytes(ev);
        kept.push({ ev, bytes: b });
        bytes += b;
        while (bytes > MAX_ADOPTED_BYTES && kept.length > 1) {
          bytes -= kept.shift()!.bytes;
          dropped++;
        }
      }
      ending = `it ended: ${(await turn.result).stopReason}`;
    } catch (err) {
      ending = `it ended with an error: ${err instanceof Error ? err.message : String(err)}`;
    }
  })();
  return {
    done,
    events() {
      const lost = dropped > 0 ? `; its first ${dropped} event(s) are not shown (over ${MAX_ADOPTED_BYTES} bytes)` : "";
      const gap = turn.gap ? "; some of its output was not kept while the gateway was gone" : "";
      const status: OpenClawLiveEvent = {
        type: "status",
        text: `The agent finished the turn a gateway restart interrupted (${ending}${lost}${gap}). What it said:`,
      };
      return [status, ...kept.map((k) => k.ev)];
    },
  };
}
