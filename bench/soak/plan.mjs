// The soak's plan, drawn from one seed before anything runs: per session an
// adapter variant, a script of prompts and an ending; then the sessions cut
// into incarnations (batches run by one gateway process). A gateway kill ends
// its incarnation, so a killing session is always the last of its batch.
import { rng, subSeed } from "./rng.mjs";

/** Endings and how often each is drawn (relative weights). */
export const ENDINGS = Object.freeze({
  clean: 38, //                       ensure, prompts, closeSession → must settle "closed"
  "gw-kill-before-ensure": 4, //      SIGKILL the gateway as ensureSession is asked for
  "gw-kill-during-ensure": 10, //     … once the lease is written / the wrapper spawned / the adapter up / after a delay
  "gw-kill-after-ensure": 5, //       … right after ensureSession returned
  "gw-kill-mid-prompt": 6, //         … while a long prompt runs
  "gw-kill-mid-close": 8, //          … while closeSession runs (stubborn trees: inside the grace)
  "wrapper-kill": 8, //               SIGKILL the wrapper (root), then maybe a prompt, then closeSession
  "adapter-crash": 9, //              adapter exits on initialize / session/new, or is SIGKILLed mid-session
  "gw+wrapper-kill": 12, //           SIGKILL wrapper and gateway together (the orphan window)
});

const POINTS = Object.freeze({
  "gw-kill-before-ensure": { "at-send": 1, "at-ensuring": 1 },
  "gw-kill-during-ensure": { "lease-written": 3, "wrapper-spawned": 3, "adapter-started": 2, delay: 2 },
  "adapter-crash": { initialize: 1, "session/new": 1, "mid-session": 2 },
  "gw+wrapper-kill": {
    "lease-written": 1,
    "wrapper-spawned": 3,
    "adapter-started": 2,
    "after-ensure": 2,
    "mid-prompt": 2,
  },
});

export const KILLS_GATEWAY = (ending) => ending.startsWith("gw-") || ending === "gw+wrapper-kill";

const GRANDCHILD = Object.freeze({ none: 3, plain: 2, setsid: 2, "double-fork": 2 });

/**
 * The env-scrubbing escapee (issue 13): the adapter command leaves a
 * grandchild that clears its environment and calls setsid, so no marker and,
 * once its parents are gone, no parent link ties it to the lease; only the
 * lease's cgroup does. Its chance per ending: the gateway+wrapper kill is the
 * case containment exists for; every other ending gets some too, so clean
 * closes, wrapper kills and crashes are soaked with an escapee as well.
 */
const ENV_SCRUB = Object.freeze({ "gw+wrapper-kill": 0.5, other: 0.12 });
/** gw+wrapper-kill points at which the adapter (and so the escapee) is surely up */
const ESCAPEE_UP = new Set(["adapter-started", "after-ensure", "mid-prompt"]);
export const isEscapeeCrash = (s) => s.variant.envScrub && s.ending === "gw+wrapper-kill" && ESCAPEE_UP.has(s.point);

function drawSession(seed, sid, earlierKeys) {
  const r = rng(subSeed(seed, sid));
  const ending = r.weighted(ENDINGS);
  const point = POINTS[ending] ? r.weighted(POINTS[ending]) : null;
  const stubborn = r.chance(0.5);
  const variant = {
    stubborn, //                                  --ignore-sigterm
    surviveStdinClose: stubborn && r.chance(0.5), // --survive-stdin-close
    grandchild: r.weighted(GRANDCHILD), //          --grandchild=KIND (always a SIGTERM-ignoring sleep)
    turn: r.chance(0.5) ? "quick" : "until-cancel",
    crashOn: ending === "adapter-crash" && point !== "mid-session" ? point : null,
  };
  const needsLongTurn = ending === "gw-kill-mid-prompt" || (ending === "gw+wrapper-kill" && point === "mid-prompt");
  if (needsLongTurn) variant.turn = "until-cancel";
  const prompts = [];
  for (let i = r.int(0, 3); i > 0; i--) {
    prompts.push(variant.turn === "quick" ? { kind: "quick" } : { kind: "long", cancelAfterMs: r.int(0, 200) });
  }
  // a few sessions reuse an earlier key: ensureSession must settle the old record first
  const reuse = earlierKeys.length > 0 && r.chance(0.08);
  const s = {
    sid,
    key: reuse ? r.pick(earlierKeys) : `soak-${seed}-${sid}`,
    reusedKey: reuse,
    ending,
    point,
    variant,
    prompts,
    // clean sessions only: close, ensure the key again, then close with the OLD handle (must not touch the new one)
    staleHandle: ending === "clean" && r.chance(0.2),
    // a fraction 0..1.5 of the grace (mid-close) or a delay in ms (other points)
    delayFraction: r.next() * 1.5,
    delayMs: r.int(0, ending === "gw-kill-during-ensure" ? 400 : 150),
    promptAfterWrapperKill: r.chance(0.5),
    twin: r.chance(0.25) ? (r.chance(0.5) ? "foreign-instance" : "lease-only") : null,
  };
  // drawn last: every earlier draw of a seed is what it was before this variant existed
  variant.envScrub = r.chance(ENV_SCRUB[ending] ?? ENV_SCRUB.other);
  return s;
}

/**
 * At least `min` sessions whose gateway and wrapper are SIGKILLed while their
 * env-scrubbed escapee runs, whatever the draws gave (a 40-session plan
 * expects only about two). Deterministic: its own stream of the seed. First
 * gw+wrapper-kill sessions at a point where the adapter is up get the
 * escapee; then gw+wrapper-kill sessions at an earlier point and other
 * gateway killers become gw+wrapper-kill after-ensure escapee sessions.
 */
function ensureEscapeeCrashes(seed, sessions, min) {
  const r = rng(subSeed(seed, 0x7ffffffe));
  let have = sessions.filter(isEscapeeCrash).length;
  const take = (candidates, change) => {
    const pool = [...candidates];
    while (have < min && pool.length) {
      change(pool.splice(r.int(0, pool.length - 1), 1)[0]);
      have++;
    }
  };
  take(
    sessions.filter((s) => s.ending === "gw+wrapper-kill" && ESCAPEE_UP.has(s.point) && !s.variant.envScrub),
    (s) => (s.variant.envScrub = true),
  );
  const convert = (s) => {
    s.ending = "gw+wrapper-kill";
    s.point = "after-ensure";
    s.variant.envScrub = true;
  };
  take(
    sessions.filter((s) => s.ending === "gw+wrapper-kill" && !ESCAPEE_UP.has(s.point)),
    convert,
  );
  take(
    sessions.filter((s) => KILLS_GATEWAY(s.ending) && s.ending !== "gw+wrapper-kill"),
    convert,
  );
}

export function makePlan(seed, count, { maxBatch }) {
  const sessions = [];
  const keys = [];
  for (let sid = 0; sid < count; sid++) {
    const s = drawSession(seed, sid, keys);
    sessions.push(s);
    if (!s.reusedKey) keys.push(s.key);
  }
  ensureEscapeeCrashes(seed, sessions, Math.min(count, Math.max(2, Math.ceil(count / 25))));
  // Batches: up to maxBatch sessions, non-killers first, at most one killer,
  // always last (its kill ends the incarnation). Taken in sid order from two
  // queues, so a plan needs about one incarnation per killing session.
  const b = rng(subSeed(seed, 0x7fffffff));
  const calm = sessions.filter((s) => !KILLS_GATEWAY(s.ending));
  const killers = sessions.filter((s) => KILLS_GATEWAY(s.ending));
  const batches = [];
  while (calm.length || killers.length) {
    const target = b.int(1, maxBatch);
    const batch = { sessions: [], killerMode: null };
    // one key per batch: two sessions on one key in one gateway would share its live session
    const fits = (s) => !batch.sessions.some((o) => o.key === s.key);
    const room = killers.length ? target - 1 : target;
    for (let i = 0; i < calm.length && batch.sessions.length < room;) {
      if (fits(calm[i])) batch.sessions.push(...calm.splice(i, 1));
      else i++;
    }
    const k = killers.findIndex(fits);
    if (k !== -1) {
      batch.sessions.push(...killers.splice(k, 1));
      // the killer waits for the others to finish, or starts once they are past ensureSession (they become collateral)
      batch.killerMode = b.chance(0.7) ? "after-others" : "alongside";
    }
    if (batch.sessions.length === 0) batch.sessions.push(calm.length ? calm.shift() : killers.shift());
    batches.push(batch);
  }
  return { sessions, batches };
}
