// A sequence, drawn from (seed, index): the gateway's options for it and the
// hostile agent's actions, in order. Everything a run does comes from here,
// so `--seed S --only I` or `--replay <code>` runs the same sequence again
// (what a busy host does with the timing does not replay).
//
//   { v: 1, seed, index, nonce, opts: {…SEQUENCE_OPTIONS}, actions: [{ a: name, p: {…} }] }
import { rng, subSeed } from "../soak/rng.mjs";
import { BY_NAME, CATALOG, OPTION_WEIGHTS, SEQUENCE_OPTIONS } from "./catalog.mjs";
import { drawValue, validValue } from "./specs.mjs";

const ACTION_COUNTS = { 1: 3, 2: 4, 3: 3, 4: 2, 5: 1, 6: 1 };
/** gateway ops that exclude each other: one way for the sequence's gateway side to end */
const EXCLUSIVE = new Set(["gw-abort-handshake", "gw-crash"]);

/** Whether action `def` can run under `opts` (its needs). */
export function allowed(def, opts) {
  const n = def.needs ?? {};
  if (n.root && opts.profile !== "root") return false;
  if (n.fs && !opts.fs) return false;
  if (n.terminal && !opts.terminal) return false;
  if (n.keeper && opts.keeper !== "on") return false;
  return true;
}

function drawOptions(r) {
  const opts = {};
  for (const [k, spec] of Object.entries(SEQUENCE_OPTIONS)) {
    const w = OPTION_WEIGHTS[k];
    const v = w ? r.weighted(w) : drawValue(r, spec);
    // weighted() answers a key (a string); a pick of numbers keeps its type
    opts[k] = spec.pick ? spec.pick.find((x) => String(x) === String(v)) : v;
  }
  return opts;
}

function drawAction(r, opts, taken) {
  const pool = CATALOG.filter(
    (d) =>
      allowed(d, opts) &&
      !(EXCLUSIVE.has(d.name) && [...taken].some((t) => EXCLUSIVE.has(t))) &&
      !(d.phase === "gateway" && taken.has(d.name)),
  );
  const table = Object.fromEntries(pool.map((d) => [d.name, d.weight]));
  const def = BY_NAME.get(r.weighted(table));
  const p = {};
  for (const [k, spec] of Object.entries(def.params)) p[k] = drawValue(r, spec);
  return { a: def.name, p };
}

/** The sequence number `index` of the run with `seed`. */
export function drawSequence(seed, index) {
  const r = rng(subSeed(seed, index));
  const opts = drawOptions(r);
  const n = Number(r.weighted(ACTION_COUNTS));
  const actions = [];
  const taken = new Set();
  for (let i = 0; i < n; i++) {
    const act = drawAction(r, opts, taken);
    taken.add(act.a);
    actions.push(act);
  }
  const nonce = String(r.int(100_000_000, 999_999_999));
  return { v: 1, seed, index, nonce, opts, actions };
}

/** A sequence needs a gateway process of its own (one of its actions kills the gateway). */
export const isSolo = (seq) => seq.actions.some((x) => BY_NAME.get(x.a)?.needs?.solo);

/** Why `seq` cannot run (unknown action, a parameter out of its spec, a need unmet), or null. */
export function invalidReason(seq) {
  if (seq === null || typeof seq !== "object" || seq.v !== 1) return "not a version-1 sequence";
  if (typeof seq.nonce !== "string" || !/^\d{9}$/.test(seq.nonce)) return "nonce must be 9 digits";
  for (const [k, spec] of Object.entries(SEQUENCE_OPTIONS))
    if (!validValue(spec, seq.opts?.[k])) return `option ${k}=${JSON.stringify(seq.opts?.[k])} is outside its spec`;
  if (!Array.isArray(seq.actions)) return "actions must be an array";
  const ex = seq.actions.filter((x) => EXCLUSIVE.has(x.a));
  if (ex.length > 1) return `${ex.map((x) => x.a).join(" and ")} exclude each other`;
  for (const act of seq.actions) {
    const def = BY_NAME.get(act?.a);
    if (!def) return `unknown action ${JSON.stringify(act?.a)}`;
    if (!allowed(def, seq.opts)) return `${def.name} needs ${JSON.stringify(def.needs)}`;
    for (const [k, spec] of Object.entries(def.params))
      if (!validValue(spec, act.p?.[k])) return `${def.name}.${k}=${JSON.stringify(act.p?.[k])} is outside its spec`;
  }
  return null;
}

/** base64url of the sequence's JSON: what --replay takes. */
export const encodeSequence = (seq) => Buffer.from(JSON.stringify(seq)).toString("base64url");

export function decodeSequence(code) {
  const text = code.trim().startsWith("{") ? code : Buffer.from(code.trim(), "base64url").toString("utf8");
  return JSON.parse(text);
}

/** One line per action, for reports: `fs-read-flood count=450 mib=10 readStdin=false`. */
export function describeSequence(seq) {
  const o = seq.opts;
  const head =
    `#${seq.index} profile=${o.profile} keeper=${o.keeper} hook=${o.hook}` +
    `${o.hook === "slow" ? `(${o.hookDelayMs}ms)` : ""} fs=${o.fs} terminal=${o.terminal}` +
    `${o.terminal ? `(max ${o.maxTerminals})` : ""} grace=${o.graceMs} handshake=${o.handshakeTimeoutMs}` +
    ` turn=${o.turnMs} consume=${o.consume} close-cap=${o.advertiseClose} innocent=${o.innocent}`;
  const acts = seq.actions.map(
    (x) =>
      `  ${x.a}${Object.entries(x.p)
        .map(([k, v]) => ` ${k}=${JSON.stringify(v)}`)
        .join("")}`,
  );
  return [head, ...acts].join("\n");
}
