// The hostile agent's handshake answers (initialize, session/new), shaped by
// the sequence's handshake actions: held, never sent, the agent's exit
// instead, a protocol version the client cannot speak, a session id that is
// huge or malformed, modes nested deep. Answers that must carry what
// JSON.stringify cannot build (nesting deeper than this process's own stack)
// are written as text.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function oddSessionId(kind, nonce) {
  switch (kind) {
    case "control":
      return `fz\u0007\u001b[2J\nFUZZ-FORGED-${nonce} session id with a newline\r`;
    case "traversal":
      return "../../../../../etc/passwd";
    case "empty":
      return "";
    case "number":
      return 12345;
    case "object":
      return { a: 1 };
    default:
      return `fz\u202eevil\u200b${nonce}`;
  }
}

/** `{"a":{"a":…0…}}` or `[[…0…]]`, `depth` deep, as JSON text. */
export function deepJson(depth, arrays) {
  return arrays ? `${"[".repeat(depth)}0${"]".repeat(depth)}` : `${'{"a":'.repeat(depth)}0${"}".repeat(depth)}`;
}

function modesText(acts) {
  const deep = acts.find((x) => x.a === "deep-modes");
  if (!deep) return '{"currentModeId":"m","availableModes":[{"id":"m","name":"m"}]}';
  const nested = deepJson(deep.p.depth, deep.p.where === "arrays");
  const meta = deep.p.where === "arrays" ? `{"a":${nested}}` : nested;
  return `{"currentModeId":"m","availableModes":[{"id":"m","name":"m","_meta":${meta}}],"_meta":${meta}}`;
}

function initializeResult(ctx, acts) {
  const pv = acts.find((x) => x.a === "protocol-version");
  return {
    protocolVersion: pv ? pv.p.v : 1,
    agentCapabilities: {
      loadSession: false,
      promptCapabilities: {},
      sessionCapabilities: ctx.opts.advertiseClose ? { close: {} } : {},
    },
    authMethods: [],
    agentInfo: { name: "proclease-fuzz-hostile", version: "1.0.0" },
  };
}

function sessionNewText(ctx, msg, acts) {
  const huge = acts.find((x) => x.a === "huge-session-id");
  const odd = acts.find((x) => x.a === "odd-session-id");
  let sid = `fz-${ctx.nonce}`;
  if (huge) sid = `fz-${ctx.nonce}-${"x".repeat(Math.max(0, huge.p.bytes - 13))}`;
  if (odd) sid = oddSessionId(odd.p.kind, ctx.nonce);
  ctx.sessionId = sid;
  return `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":{"sessionId":${JSON.stringify(sid)},"modes":${modesText(acts)}}}\n`;
}

/** Answers `msg` (initialize or session/new) as the handshake actions say. */
export async function handshakeAnswer(ctx, msg, acts) {
  const step = msg.method;
  let delay = 0;
  for (const act of acts) {
    const mine = act.p.step === step || act.p.step === "both";
    if (act.a === "slow-step" && mine) delay += Math.round((act.p.pct / 100) * ctx.opts.handshakeTimeoutMs);
    if (act.a === "never-answer" && mine) {
      ctx.report({ what: "handshake", step, answer: "never" });
      return;
    }
    if (act.a === "handshake-exit" && mine) {
      ctx.report({ what: "handshake", step, answer: `exit ${act.p.code}` });
      if (act.p.code === 137) process.kill(process.pid, "SIGKILL");
      process.exit(act.p.code);
    }
  }
  if (delay > 0) await sleep(delay);
  ctx.report({ what: "handshake", step, answer: "sent", delayMs: delay });
  if (step === "initialize") ctx.send({ id: msg.id, result: initializeResult(ctx, acts) });
  else ctx.out(sessionNewText(ctx, msg, acts));
}
