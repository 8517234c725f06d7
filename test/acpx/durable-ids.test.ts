/**
 * A re-adopted connection's request ids (the ACP transport, on in-memory
 * pipes: what is judged is which answer reaches whom). The earlier gateway's
 * turn is in flight under id 2; this connection's SDK counts its own ids
 * from 0, so its third request would be id 2 too. Sent above the wrapper's
 * id floor, the earlier turn's answer goes to the adopted turn and the
 * third request gets its own, whichever comes first.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { AcpClient } from "../../src/acpx/connection/acp-client.js";

function lines(s: PassThrough): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  let buf = "";
  s.on("data", (d: Buffer) => {
    buf += d.toString("utf8");
    for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
      out.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
      buf = buf.slice(nl + 1);
    }
  });
  return out;
}

const until = async (cond: () => boolean) => {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!cond()) throw new Error("never");
};

describe("a re-adopted connection's ids", () => {
  it("the earlier turn's answer (id 2) reaches the adopted turn while this connection's own third request is pending", async () => {
    const fromAgent = new PassThrough();
    const toAgent = new PassThrough();
    const sent = lines(toAgent);
    // the wrapper's header said the gateway side's highest id was 2
    const client = new AcpClient({ input: fromAgent, output: toAgent, idOffset: 3 });
    const adopted = client.adoptPrompt(2);
    const mine = [0, 1, 2].map((i) =>
      client.connection.agent.request("session/set_mode", { sessionId: "s", modeId: `m${i}` }),
    );
    await until(() => sent.length === 3);
    const ids = sent.map((m) => m.id as number);
    expect(ids.every((id) => id > 2)).toBe(true);
    // the earlier gateway's turn ends first: its answer is the adopted turn's
    fromAgent.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, result: { stopReason: "end_turn" } })}\n`);
    await expect(adopted).resolves.toEqual({ stopReason: "end_turn" });
    for (const id of ids) fromAgent.write(`${JSON.stringify({ jsonrpc: "2.0", id, result: {} })}\n`);
    await expect(Promise.all(mine)).resolves.toEqual([{}, {}, {}]);
    client.close();
  });

  it("the agent's last update before its answer to the adopted turn is handled first, though both came in one read", async () => {
    const fromAgent = new PassThrough();
    const toAgent = new PassThrough();
    const order: string[] = [];
    const client = new AcpClient({
      input: fromAgent,
      output: toAgent,
      idOffset: 3,
      onUpdate: () => void order.push("update"),
    });
    const adopted = client.adoptPrompt(2).then((a) => (order.push("answer"), a));
    const update = {
      jsonrpc: "2.0",
      method: "session/update",
      params: {
        sessionId: "s",
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "last" } },
      },
    };
    const answer = { jsonrpc: "2.0", id: 2, result: { stopReason: "end_turn" } };
    fromAgent.write(`${JSON.stringify(update)}\n${JSON.stringify(answer)}\n`);
    await expect(adopted).resolves.toEqual({ stopReason: "end_turn" });
    expect(order).toEqual(["update", "answer"]);
    client.close();
  });
});
