// One sequence, driven inside the fuzzer's gateway through the public API:
// a controller of its own, the hostile session's ensure (with dispose or
// shutdown mid-handshake when the sequence says so), sessionStatus, one
// streamed turn (with a close or a cancel mid-turn), an innocent session
// started after the attack, each close (the runner judges what is left
// before the sequence goes on), shutdown. Every call is bounded here: a
// call that does not settle in its bound is reported as such and the
// sequence goes on, so one hung promise never stalls the run.
import { readFileSync } from "node:fs";
import { inspect } from "node:util";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CLOSE_MS = 10_000;
/** errors the library's API may answer with: its own (Acpx…Error) and an abort */
const typed = (e) => typeof e?.name === "string" && (/^Acpx\w*Error$/.test(e.name) || e.name === "AbortError");
const errInfo = (e) => ({
  name: String(e?.name ?? typeof e),
  message: String(e?.message ?? e).slice(0, 2000),
  ...(typeof e?.code === "string" ? { code: e.code } : {}),
  ...(typeof e?.failure === "string" ? { failure: e.failure } : {}),
});

/** A logger like `console`: the message raw, fields through inspect; counted and scanned for what an agent injected. */
function seqLogger(nonce) {
  const stats = { bytes: 0, lines: 0, esc: 0, forged: 0 };
  const write = (level) => (message, fields) => {
    const text = `[fuzz ${nonce}] ${level} ${message}${fields === undefined ? "" : ` ${inspect(fields, { depth: 4, breakLength: Infinity })}`}\n`;
    stats.bytes += Buffer.byteLength(text);
    stats.lines++;
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text.slice(0, -1))) stats.esc++;
    if (/(^|\n)FUZZ-FORGED-/.test(text)) stats.forged++;
    if (stats.bytes <= 4 * 1024 * 1024) process.stderr.write(text);
  };
  return { logger: { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") }, stats };
}

function permissionHook(opts) {
  const allow = (req) => ({ outcome: { outcome: "selected", optionId: req.options?.[0]?.optionId ?? "allow" } });
  const aborted = (signal) =>
    new Promise((r) => (signal.aborted ? r() : signal.addEventListener("abort", r, { once: true })));
  switch (opts.hook) {
    case "allow":
      return async (req) => allow(req);
    case "slow":
      return async (req, { signal }) => (await Promise.race([sleep(opts.hookDelayMs), aborted(signal)]), allow(req));
    case "human":
      return async (req, { signal }) => (await aborted(signal), { outcome: { outcome: "cancelled" } });
    default:
      return undefined;
  }
}

class Run {
  constructor(cmd, deps) {
    Object.assign(this, { cmd, deps, id: cmd.id, seq: cmd.seq, o: cmd.seq.opts, untyped: [] });
  }
  emit(ev) {
    this.deps.emit({ id: this.id, ...ev });
  }
  /** awaits `p` at most `limitMs`; reports the step; answers {ok, value, error, timedOut} */
  async step(name, p, limitMs, extra = () => ({})) {
    const t0 = Date.now();
    let out;
    let timer;
    try {
      const bound = new Promise((r) => (timer = setTimeout(r, limitMs, null)));
      const v = await Promise.race([p.then((value) => ({ ok: true, value })), bound]);
      out = v ?? { ok: false, timedOut: true };
    } catch (e) {
      out = { ok: false, error: e };
      if (!typed(e)) this.untyped.push({ step: name, ...errInfo(e) });
    } finally {
      clearTimeout(timer);
    }
    this.emit({
      ev: "step",
      step: name,
      ms: Date.now() - t0,
      limitMs,
      ok: out.ok,
      timedOut: out.timedOut === true,
      ...(out.error ? { error: errInfo(out.error) } : {}),
      ...(out.ok ? extra(out.value) : {}),
    });
    return out;
  }
  /** a close, bounded, then the runner's look at what is left before the sequence goes on */
  async close(what, handle, pending, startedAt) {
    const t0 = startedAt ?? Date.now();
    const r = await this.step(
      `${what}-close`,
      pending ?? this.ctl.closeSession({ handle, reason: "fuzz" }),
      CLOSE_MS,
      (rep) => ({
        outcome: rep.outcome,
        leaseState: rep.leaseState,
        code: rep.code,
        detail: String(rep.detail).slice(0, 500),
      }),
    );
    if (!r.ok && !r.timedOut) this.emit({ ev: "close-rejected", what });
    this.emit({ ev: "check", what, leaseId: handle.leaseId, startedAt: t0 });
    await this.deps.checked(this.id, what);
  }
}

async function createController(run, create) {
  const { logger, stats } = seqLogger(run.seq.nonce);
  run.logStats = stats;
  const o = run.o;
  run.ctl = await create({
    stateDir: run.cmd.stateDir,
    graceMs: o.graceMs,
    handshakeTimeoutMs: o.handshakeTimeoutMs,
    startTimeoutMs: 10_000,
    keeper: o.keeper,
    logger,
    ...(o.hook !== "none" ? { onPermissionRequest: permissionHook(o) } : {}),
    clientCapabilities: {
      ...(o.fs ? { fs: {} } : {}),
      ...(o.terminal ? { terminal: { maxTerminals: o.maxTerminals } } : {}),
    },
  });
  const c = run.ctl.containment;
  run.emit({ ev: "controller", instanceId: run.ctl.gatewayInstanceId, containment: c.available, root: c.root ?? null });
}

/** ensure, or dispose/shutdown while it is under way (gw-abort-handshake); answers the handle or null */
async function ensureHostile(run) {
  const c = run.cmd;
  const ensureP = run.ctl.ensureSession({
    sessionKey: "hostile",
    agentId: "fuzz-hostile",
    command: [c.node, c.agent, c.planFile],
    cwd: c.workDir,
    envRemove: ["FUZZ_SECRET"],
  });
  ensureP.catch(() => undefined);
  const abort = run.seq.actions.find((x) => x.a === "gw-abort-handshake");
  const bound = run.o.handshakeTimeoutMs + CLOSE_MS;
  if (abort) {
    const early = await Promise.race([
      ensureP.then(
        () => true,
        () => true,
      ),
      sleep(abort.p.afterMs).then(() => false),
    ]);
    if (!early) {
      run.emit({ ev: "abort-handshake", how: abort.p.how });
      await run.step(abort.p.how, run.ctl[abort.p.how](), CLOSE_MS);
      const e = await run.step("ensure", ensureP, CLOSE_MS);
      if (e.ok) run.emit({ ev: "ensure-after-abort", how: abort.p.how });
      run.disposed = true;
      return null;
    }
  }
  const e = await run.step("ensure", ensureP, bound, (h) => ({ leaseId: h.leaseId, rootPid: h.rootPid }));
  return e.ok ? e.value : null;
}

async function consume(run, events) {
  try {
    for await (const _ of events) if (run.o.consume === "slow") await sleep(20);
  } catch {
    // the turn's error comes through result
  }
}

async function turn(run, h) {
  const gw = (name) => run.seq.actions.find((x) => x.a === name);
  let ts;
  try {
    ts = run.ctl.startTurn(h, "go", { timeoutMs: run.o.turnMs, cancelGraceMs: 500 });
  } catch (e) {
    if (!typed(e)) run.untyped.push({ step: "startTurn", ...errInfo(e) });
    run.emit({ ev: "step", step: "turn", ms: 0, ok: false, error: errInfo(e) });
    return;
  }
  run.emit({ ev: "turn-started" });
  if (run.o.consume !== "none") void consume(run, ts.events);
  const midClose = gw("gw-close-mid-turn");
  if (midClose) {
    run.midCloseStarted = sleep(midClose.p.afterMs).then(() => Date.now());
    run.midClose = run.midCloseStarted.then(() => run.ctl.closeSession({ handle: h, reason: "fuzz mid-turn" }));
    run.midClose.catch(() => undefined);
  }
  const cancel = gw("gw-cancel");
  if (cancel) void sleep(cancel.p.afterMs).then(() => run.ctl.cancelTurn(h).catch(() => undefined));
  await run.step("turn", ts.result, run.o.turnMs + CLOSE_MS, (r) => ({ stopReason: r.stopReason }));
}

async function innocent(run) {
  const c = run.cmd;
  const e = await run.step(
    "innocent-ensure",
    run.ctl.ensureSession({
      sessionKey: "innocent",
      agentId: "innocent",
      command: [c.node, c.innocentAgent, c.innocentInfo, c.innocentLog, c.innocentTag],
      envRemove: ["FUZZ_SECRET"],
    }),
    run.o.handshakeTimeoutMs + CLOSE_MS,
    (h) => ({ leaseId: h.leaseId }),
  );
  if (e.ok) await run.step("innocent-prompt", run.ctl.prompt(e.value, "hi", { timeoutMs: 5000 }), 15_000);
  return e.ok ? e.value : null;
}

/**
 * The check of the checks: "block" busies the loop for 400 ms of this
 * thread's CPU (not of wall time: on a loaded host that is less CPU), and the
 * monitor's next tick reports it while the sequence is still running; "rss"
 * holds 320 MB until the runner kills this process for it. Its 10 MB pieces
 * are touched one loop turn apart: faulting in 320 MB at once costs a loaded
 * host more than the 250 ms loop-block bound, and "rss" must name rss alone.
 */
const held = [];
const threadCpuMs = () => {
  const f = readFileSync("/proc/thread-self/stat", "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
async function plantFaults(plant) {
  if (plant.includes("block")) {
    const from = threadCpuMs();
    const until = performance.now() + 20_000;
    while (threadCpuMs() - from < 400 && performance.now() < until);
    await sleep(100);
  }
  if (plant.includes("rss")) {
    for (let i = 0; i < 32; i++) {
      held.push(Buffer.alloc(10 * 1024 * 1024, 1));
      await sleep(5);
    }
    await sleep(10_000);
  }
}

export async function runSequence(create, cmd, deps) {
  const run = new Run(cmd, deps);
  await createController(run, create);
  const h = await ensureHostile(run);
  if (h) {
    await run.step("status", run.ctl.sessionStatus(h), CLOSE_MS, (s) => ({ leaseState: s.leaseState }));
    await turn(run, h);
  }
  // the runner SIGKILLs this process afterMs after the turn started: nothing is closed before
  const crash = run.seq.actions.find((x) => x.a === "gw-crash");
  if (crash && h) await sleep(crash.p.afterMs + 60_000);
  const inn = !run.disposed && run.o.innocent ? await innocent(run) : null;
  if (h) await run.close("hostile", h, run.midClose, run.midClose ? await run.midCloseStarted : undefined);
  if (inn) await run.close("innocent", inn);
  if (!run.disposed) {
    const t0 = Date.now();
    const s = await run.step("shutdown", run.ctl.shutdown(), CLOSE_MS);
    if (!s.ok && !s.timedOut) run.emit({ ev: "close-rejected", what: "shutdown" });
    run.shutdownAt = t0;
  }
  if (cmd.plant) await plantFaults(cmd.plant);
  run.emit({ ev: "done", log: run.logStats, untyped: run.untyped, shutdownAt: run.shutdownAt ?? null });
}
