// One soak session on a live incarnation, start to end: its steps (ensure,
// prompt, close), the kill its ending calls for, and what the soak notes on
// the way (the session's processes, leases and errors, in its result).
// bench/soak.mjs hands over the run's shared state once (configureSessions).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { EventTimeout, GatewayDied } from "./incarnation.mjs";
import { children, cmdline, killSame, sameAlive, stat } from "./proc.mjs";
import { newLeaseFor } from "./state-dir.mjs";

// the run's shared state: set before the first session, its objects shared with bench/soak.mjs
let opts, T, AGENT, pidDir, leaseDir, stepTimes, allLeaseIds, bystanders, escapees, harness;

/** Hands this module the run's state: its options and timeouts, its folders, and the tallies sessions add to. */
export function configureSessions(run) {
  ({ opts, T, AGENT, pidDir, leaseDir, stepTimes, allLeaseIds, bystanders, escapees, harness } = run);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A session's result, empty: what happened to it, filled in as it runs. */
export const newResult = (s) => ({
  s,
  incarnation: null,
  ran: false,
  collateral: false,
  leaseIds: new Set(),
  ensure: null, //       "ok" | "failed" | "interrupted"
  ensureError: null,
  kill: null, //         {what, point, late}
  closes: [], //         close reports (and the clean-close flag)
  errors: [], //         scripted steps that did not behave as the contract says
  procs: [], //          {role, pid, startTime}: what the soak saw of this session
  escapees: [], //       {pid, startTime} of env-scrubbed escapees seen (judged by the marker scan, not "outlived")
  cancels: 0,
});

const sidOf = (s, sub = "") => `${s.sid}${sub}`;
const pidfileOf = (s, sub = "") => join(pidDir, `${sidOf(s, sub)}.json`);

function adapterCommand(s, pidfile, sid) {
  const v = s.variant;
  const a = [process.execPath, AGENT];
  if (v.stubborn) a.push("--ignore-sigterm");
  if (v.surviveStdinClose) a.push("--survive-stdin-close");
  if (v.grandchild !== "none") a.push(`--grandchild=${v.grandchild}`);
  a.push(`--turn=${v.turn}`);
  if (v.crashOn) a.push(`--crash-on=${v.crashOn}`);
  a.push(`--pidfile=${pidfile}`);
  return v.envScrub ? escapees.wrap(a, sid) : a;
}

function note(r, role, pid, check) {
  const st = pid > 0 ? stat(pid) : null;
  if (!st || st.state === "Z") return null;
  if (check && !check(pid)) return null;
  const p = { role, pid, startTime: st.startTime };
  r.procs.push(p);
  return p;
}
const argvHas = (needle) => (pid) => (cmdline(pid) ?? []).some((x) => x.includes(needle));

/** The wrapper of session s: a child of the gateway whose argv carries the session's pidfile. */
function findWrapper(inc, pidfile) {
  for (const c of children(inc.pid)) if (argvHas(pidfile)(c)) return c;
  return null;
}

function readPidfile(pidfile) {
  try {
    return JSON.parse(readFileSync(pidfile, "utf8"));
  } catch {
    return null;
  }
}

/** Records the adapter and grandchild from the pidfile (each checked to be that process now), and the escapee once it has said its pid. */
function noteAdapter(r, pidfile, sid) {
  if (r.s.variant.envScrub) {
    const e = escapees.noted(sid);
    if (e && !r.escapees.some((x) => x.pid === e.pid && x.startTime === e.startTime)) r.escapees.push(e);
  }
  const p = readPidfile(pidfile);
  if (!p) return null;
  const adapter = note(r, "adapter", p.pid, argvHas(pidfile));
  if (p.grandchildPid)
    note(r, "grandchild", p.grandchildPid, (pid) => (cmdline(pid) ?? []).join(" ").includes("sleep"));
  return adapter;
}

function learnLease(r, leaseId) {
  if (!leaseId || r.leaseIds.has(leaseId)) return;
  r.leaseIds.add(leaseId);
  allLeaseIds.add(leaseId);
  if (r.s.twin) bystanders.twin(leaseId, r.s.twin);
}

/** Polls fn every ~2 ms until it returns non-null, or `stop` settles. */
async function poll(fn, stop) {
  let stopped = false;
  stop.then(
    () => (stopped = true),
    () => (stopped = true),
  );
  while (!stopped) {
    const v = fn();
    if (v !== null && v !== undefined && v !== false) return v;
    await sleep(2);
  }
  return null;
}

async function ensureStep(inc, r, sub = "") {
  const s = r.s;
  const sid = sidOf(s, sub);
  const pidfile = pidfileOf(s, sub);
  const mark = inc.mark();
  inc.send({ op: "ensure", sid, key: s.key, command: adapterCommand(s, pidfile, sid) });
  const t = Date.now();
  const ev = await inc.waitSession(sid, ["ensured", "ensure-failed"], T.ensure, mark);
  stepTimes.ensure.push(Date.now() - t);
  return settleEnsure(inc, r, ev, pidfile, sid);
}

function settleEnsure(inc, r, ev, pidfile, sid) {
  if (ev.ev === "ensured") {
    r.ensure = "ok";
    learnLease(r, ev.handle.leaseId);
    note(r, "wrapper", ev.handle.rootPid, argvHas(pidfile));
    noteAdapter(r, pidfile, sid);
    return ev.handle;
  }
  r.ensure = "failed";
  r.ensureError = ev.error;
  learnLease(r, ev.error.leaseId);
  // only an adapter told to crash on the handshake may fail it
  if (!r.s.variant.crashOn) r.errors.push(`ensureSession failed: ${ev.error.name}: ${ev.error.message}`);
  return null;
}

async function promptStep(inc, r, p, sid) {
  const mark = inc.mark();
  inc.send({ op: "prompt", sid, text: "soak", ...(p.kind === "long" ? { cancelAfterMs: p.cancelAfterMs } : {}) });
  const t = Date.now();
  const ev = await inc.waitSession(sid, ["prompted", "prompt-failed"], T.prompt, mark);
  stepTimes[p.kind === "long" ? "prompt+cancel" : "prompt"].push(Date.now() - t);
  r.cancels += ev.cancels ?? 0;
  const want = p.kind === "long" ? "cancelled" : "end_turn";
  if (ev.ev !== "prompted" || ev.stopReason !== want) {
    r.errors.push(
      `prompt (${p.kind}) on ${sid}: ${ev.ev === "prompted" ? `stopReason ${ev.stopReason}` : `${ev.error.name}: ${ev.error.message}`}; expected ${want}`,
    );
  }
  return ev;
}

async function closeStep(inc, r, sid, { handleOf, clean = false } = {}) {
  const mark = inc.mark();
  inc.send({ op: "close", sid, key: r.s.key, ...(handleOf ? { handleOf } : {}) });
  const t = Date.now();
  const ev = await inc.waitSession(sid, ["closed", "close-failed"], T.close, mark);
  stepTimes.close.push(Date.now() - t);
  const rec = { sid, clean, handleOf: handleOf ?? null, ev: ev.ev, report: ev.report ?? null, error: ev.error ?? null };
  r.closes.push(rec);
  if (ev.report?.leaseId && !handleOf) learnLease(r, ev.report.leaseId);
  return rec;
}

async function killGateway(inc, r, point, late = false) {
  r.kill = { what: "gateway", point, late };
  await inc.kill();
}

/** SIGKILL a process the soak noted for this session, if it is still that process. */
function killNoted(r, role) {
  const p = r.procs.find((x) => x.role === role);
  return p ? killSame(p.pid, p.startTime) : false;
}

async function waitGone(p, ms = 5000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && sameAlive(p.pid, p.startTime)) await sleep(10);
}

/**
 * Runs ensure while watching for the kill point; returns when the point is
 * reached (or ensure answered first: then `late`).
 */
async function ensureUntil(inc, r, point) {
  const s = r.s;
  const sid = sidOf(s);
  const pidfile = pidfileOf(s);
  let before = new Set();
  try {
    before = new Set(readdirSync(leaseDir));
  } catch {}
  const mark = inc.mark();
  const answered = inc.waitSession(sid, ["ensured", "ensure-failed"], T.ensure, mark);
  answered.catch(() => {});
  inc.send({ op: "ensure", sid, key: s.key, command: adapterCommand(s, pidfile, sid) });
  let wrapper = null;
  const reached =
    point === "at-send"
      ? true
      : point === "at-ensuring"
        ? await inc.waitSession(sid, ["ensuring"], T.ensure, mark).then(() => true)
        : point === "lease-written"
          ? await poll(() => {
              const l = newLeaseFor(leaseDir, s.key, before);
              if (l) learnLease(r, l.leaseId);
              return l;
            }, answered)
          : point === "wrapper-spawned"
            ? await poll(() => (wrapper = findWrapper(inc, pidfile)), answered)
            : point === "adapter-started"
              ? await poll(() => existsSync(pidfile), answered)
              : await sleep(s.delayMs).then(() => true);
  // whatever is up right now, the soak notes it (for the "nothing outlived" check)
  const lease = newLeaseFor(leaseDir, s.key, before);
  if (lease) learnLease(r, lease.leaseId);
  wrapper ??= findWrapper(inc, pidfile);
  if (wrapper) note(r, "wrapper", wrapper, argvHas(pidfile));
  noteAdapter(r, pidfile, sid);
  const early = inc.events.slice(mark).find((e) => e.sid === sid && (e.ev === "ensured" || e.ev === "ensure-failed"));
  if (early) settleEnsure(inc, r, early, pidfile, sid);
  else r.ensure = "interrupted";
  return { late: !reached || early !== undefined };
}

/**
 * With the key's newer session b live: a prompt with the OLD handle must be
 * refused; a cancelTurn with the old handle must not cancel b's running turn
 * (until-cancel adapters); b still answers its own prompt and cancel.
 */
async function staleTurnChecks(inc, r, oldSid, newSid) {
  const staleSid = `${newSid}~stale`;
  let mark = inc.mark();
  inc.send({ op: "prompt", sid: staleSid, text: "stale", handleOf: oldSid });
  const sp = await inc.waitSession(staleSid, ["prompted", "prompt-failed"], T.prompt, mark);
  if (sp.ev === "prompted")
    r.errors.push(`prompt with a stale handle ran a turn (stopReason ${sp.stopReason}) on the current session`);
  if (r.s.variant.turn === "quick") {
    await promptStep(inc, r, { kind: "quick" }, newSid);
    return;
  }
  mark = inc.mark();
  inc.send({ op: "prompt", sid: newSid, text: "long" });
  await inc.waitSession(newSid, ["prompting"], T.prompt, mark);
  await sleep(150); // let the adapter register the turn, so a wrongly delivered cancel would end it
  const cm = inc.mark();
  inc.send({ op: "cancel", sid: staleSid, handleOf: oldSid });
  await inc.waitSession(staleSid, ["cancel-sent", "cancel-failed"], T.prompt, cm);
  await sleep(300);
  const early = inc.events
    .slice(mark)
    .find((e) => e.sid === newSid && (e.ev === "prompted" || e.ev === "prompt-failed"));
  if (early)
    r.errors.push(
      `cancelTurn with a stale handle ended the current session's turn (${early.stopReason ?? early.error?.message})`,
    );
  // now the real cancel, repeated: one that reaches the fixture before it registered the turn is lost
  const t = Date.now();
  let done = early;
  while (!done) {
    inc.send({ op: "cancel", sid: newSid });
    done = await inc.waitSession(newSid, ["prompted", "prompt-failed"], 250, mark).catch((e) => {
      if (e instanceof EventTimeout && Date.now() - t < T.prompt) return null;
      throw e;
    });
  }
  if (!early && (done.ev !== "prompted" || done.stopReason !== "cancelled")) {
    r.errors.push(
      `the current session's own cancel gave ${done.ev === "prompted" ? `stopReason ${done.stopReason}` : done.error.message}, expected cancelled`,
    );
  }
}

async function runSession(inc, r) {
  const s = r.s;
  r.ran = true;
  r.incarnation = inc.index;
  if (!Object.hasOwn(ENDING_RUNS, s.ending)) throw new Error(`unknown ending ${s.ending}`);
  await ENDING_RUNS[s.ending](inc, r, s, sidOf(s));
}

/** Each ending's script (plan.mjs ENDINGS). */
const ENDING_RUNS = {
  clean: runClean,
  "gw-kill-before-ensure": runGatewayKillInEnsure,
  "gw-kill-during-ensure": runGatewayKillInEnsure,
  "gw-kill-after-ensure": runGatewayKillAfterEnsure,
  "gw-kill-mid-prompt": runGatewayKillMidPrompt,
  "gw-kill-mid-close": runGatewayKillMidClose,
  "wrapper-kill": runWrapperKill,
  "adapter-crash": runAdapterCrash,
  "gw+wrapper-kill": runGatewayAndWrapperKill,
};

/** ensure, the prompts, close; with a stale handle, the key's next session must be untouched by the old handle. */
async function runClean(inc, r, s, sid) {
  const h = await ensureStep(inc, r);
  if (!h) return;
  for (const p of s.prompts) await promptStep(inc, r, p, sid);
  if (!s.staleHandle) {
    await closeStep(inc, r, sid, { clean: true });
    return;
  }
  // stale handle: close, ensure the same key again, then close with the OLD handle
  await closeStep(inc, r, sid, { clean: true });
  const h2 = await ensureStep(inc, r, "b");
  if (!h2) return;
  const stale = await closeStep(inc, r, sidOf(s, "b"), { handleOf: sid });
  const wrapper2 = r.procs.findLast((p) => p.role === "wrapper");
  if (stale.ev === "closed" && stale.report.outcome !== "noop") {
    r.errors.push(
      `closeSession with a stale handle (lease ${h.leaseId}) acted on the current session (lease ${h2.leaseId}): ${stale.report.outcome} ${stale.report.detail}`,
    );
  }
  if (wrapper2 && !sameAlive(wrapper2.pid, wrapper2.startTime)) {
    r.errors.push(`the current session's wrapper (pid ${wrapper2.pid}) died after a close with a stale handle`);
  }
  await staleTurnChecks(inc, r, sid, sidOf(s, "b"));
  await closeStep(inc, r, sidOf(s, "b"), { clean: true });
}

/** the gateway SIGKILLed at a point inside ensureSession (or before it). */
async function runGatewayKillInEnsure(inc, r, s) {
  const { late } = await ensureUntil(inc, r, s.point);
  await killGateway(inc, r, s.point, late);
}

/** the gateway SIGKILLed a while after ensureSession answered. */
async function runGatewayKillAfterEnsure(inc, r, s) {
  await ensureStep(inc, r);
  await sleep(s.delayMs);
  await killGateway(inc, r, `after-ensure+${s.delayMs}ms`);
}

/** the gateway SIGKILLed while a long turn runs. */
async function runGatewayKillMidPrompt(inc, r, s, sid) {
  if (!(await ensureStep(inc, r))) return killGateway(inc, r, "mid-prompt (ensure failed)", true);
  const mark = inc.mark();
  inc.send({ op: "prompt", sid, text: "long" });
  await inc.waitSession(sid, ["prompting"], T.prompt, mark);
  await sleep(s.delayMs);
  const late = inc.events.slice(mark).some((e) => e.sid === sid && (e.ev === "prompted" || e.ev === "prompt-failed"));
  await killGateway(inc, r, `mid-prompt+${s.delayMs}ms`, late);
}

/** the gateway SIGKILLed inside closeSession's grace. */
async function runGatewayKillMidClose(inc, r, s, sid) {
  if (!(await ensureStep(inc, r))) return killGateway(inc, r, "mid-close (ensure failed)", true);
  for (const p of s.prompts) await promptStep(inc, r, p, sid);
  const mark = inc.mark();
  inc.send({ op: "close", sid, key: s.key });
  await inc.waitSession(sid, ["closing"], T.close, mark);
  const delay = Math.round(s.delayFraction * opts.graceMs);
  await sleep(delay);
  const late = inc.events.slice(mark).some((e) => e.sid === sid && (e.ev === "closed" || e.ev === "close-failed"));
  await killGateway(inc, r, `mid-close+${delay}ms`, late);
}

/** the wrapper SIGKILLed under a live session, then the session closed. */
async function runWrapperKill(inc, r, s, sid) {
  if (!(await ensureStep(inc, r))) return;
  for (const p of s.prompts) await promptStep(inc, r, p, sid);
  const w = r.procs.find((p) => p.role === "wrapper");
  r.kill = { what: "wrapper", point: "live", late: !killNoted(r, "wrapper") };
  if (w) await waitGone(w);
  // the adapter's stdio is the gateway's own pipe, so a prompt may still be answered: no expectation
  if (s.promptAfterWrapperKill) {
    const mark = inc.mark();
    inc.send({ op: "prompt", sid, text: "after wrapper kill", cancelAfterMs: 100 });
    await inc.waitSession(sid, ["prompted", "prompt-failed"], T.prompt, mark);
  }
  await closeStep(inc, r, sid);
}

/** an adapter that exits on a handshake step (ensure must fail) or mid-session. */
async function runAdapterCrash(inc, r, s, sid) {
  const h = await ensureStep(inc, r);
  if (s.point !== "mid-session") {
    // a reused key whose earlier agent session is on record is resumed (session/resume or session/load),
    // so the agent is never sent session/new: only an ensure that opened a new session must fail
    if (h) {
      if (!(s.point === "session/new" && h.resumed === true))
        r.errors.push(`ensureSession succeeded although the adapter exits on ${s.point}`);
    } else if (r.ensureError.name !== "AcpxEnsureError")
      r.errors.push(
        `ensureSession failed with ${r.ensureError.name}, expected AcpxEnsureError: ${r.ensureError.message}`,
      );
    return;
  }
  if (!h) return;
  for (const p of s.prompts) await promptStep(inc, r, p, sid);
  const a = r.procs.find((p) => p.role === "adapter");
  r.kill = { what: "adapter", point: "mid-session", late: !killNoted(r, "adapter") };
  if (a) await waitGone(a);
  await closeStep(inc, r, sid);
}

/** gateway and wrapper SIGKILLed together at a point (an escapee's worst case). */
async function runGatewayAndWrapperKill(inc, r, s, sid) {
  let late = false;
  if (s.point === "after-ensure" || s.point === "mid-prompt") {
    if (!(await ensureStep(inc, r))) late = true;
    else if (s.point === "mid-prompt") {
      const mark = inc.mark();
      inc.send({ op: "prompt", sid, text: "long" });
      await inc.waitSession(sid, ["prompting"], T.prompt, mark);
      await sleep(s.delayMs);
    }
  } else {
    late = (await ensureUntil(inc, r, s.point)).late;
  }
  const wrapperKilled = killNoted(r, "wrapper");
  r.kill = { what: wrapperKilled ? "gateway+wrapper" : "gateway (no wrapper found)", point: s.point, late };
  await inc.kill();
}

export async function runSessionSafe(inc, r) {
  try {
    await runSession(inc, r);
  } catch (e) {
    if (e instanceof GatewayDied) {
      // another session of this incarnation killed the gateway under this one
      if (!r.kill) r.collateral = true;
    } else if (e instanceof EventTimeout) {
      r.errors.push(`stuck: ${e.message}`);
      harness.push(`session ${r.s.sid} (${r.s.ending}): ${e.message}`);
    } else {
      r.errors.push(`soak error: ${e.stack ?? e}`);
      harness.push(`session ${r.s.sid}: ${e.stack ?? e}`);
    }
  }
}
