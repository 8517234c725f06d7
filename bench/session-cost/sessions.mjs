// Sessions of the minimal adapter started and closed in bulk, as a gateway
// restarting or shutting down does: the session-cost bench's scale and start
// rows, and bench/start-cpu-ab.mjs, start them through here.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { now } from "../lib.mjs";

const AGENT = join(dirname(fileURLToPath(import.meta.url)), "..", "minimal-acp-agent.mjs");
export const COMMAND = [process.execPath, AGENT];
/** sessions started at a time, as a gateway restarting its sessions does */
export const WIDTH = 16;

/** `count` sessions ensured WIDTH at a time into `handles`; their ensure latencies. */
export async function startMany(ctl, count, tag, handles) {
  const lat = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const s = now();
      handles.push(await ctl.ensureSession({ sessionKey: `${tag}:${i}`, agentId: "main", command: COMMAND }));
      lat.push(now() - s);
    }
  };
  await Promise.all(Array.from({ length: WIDTH }, worker));
  return lat;
}

/** Closes every handle WIDTH at a time, as a gateway would on shutdown. */
export async function closeMany(ctl, handles) {
  let k = 0;
  await Promise.all(
    Array.from({ length: WIDTH }, async () => {
      while (k < handles.length) {
        const h = handles[k++];
        await ctl.closeSession({ handle: h, discardPersistentState: true }).catch(() => undefined);
      }
    }),
  );
}
