// Shared bench helpers: timing, statistics, and the check protocol.
// Benches report ratios between backends/peers measured in the same run;
// targets are ratios too, never absolute milliseconds.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { mulberry32 } from "./soak/rng.mjs";

export const now = () => performance.now();

/** Runs fn `iterations` times after `warmup` runs; returns per-call ms samples. */
export async function sample(fn, { iterations = 20, warmup = 3 } = {}) {
  for (let i = 0; i < warmup; i++) await fn();
  const out = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = now();
    await fn();
    out.push(now() - t0);
  }
  return out;
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The q-quantile (0..1) of xs, nearest rank. */
export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))];
}

/**
 * A 95% percentile-bootstrap interval for the median of xs: how far the
 * median of these samples could move on another run of the same machine.
 * Seeded, so one set of samples always prints the same interval.
 */
export function bootstrapMedianCI(xs, { rounds = 2000, seed = 0x5eed } = {}) {
  const next = mulberry32(seed);
  const meds = [];
  const pick = new Array(xs.length);
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < xs.length; i++) pick[i] = xs[Math.floor(next() * xs.length)];
    meds.push(median(pick));
  }
  return { lo: quantile(meds, 0.025), hi: quantile(meds, 0.975) };
}

export const fmtMs = (ms) => (ms < 1 ? `${(ms * 1000).toFixed(1)} µs` : `${ms.toFixed(2)} ms`);

/**
 * A check: `value op target`. op ">=" means "at least", "<=" means "at most".
 * Every check is printed; run.mjs exits non-zero if any fails.
 */
export function check(name, value, op, target, unit = "×") {
  // a value that is not a number was not measured (an empty sample, a 0/0 ratio): a failure, never a pass
  if (typeof value !== "number" || !Number.isFinite(value))
    return unmeasured(name, `the measured value is ${String(value)}`);
  const ok = op === ">=" ? value >= target : value <= target;
  return { name, value, op, target, unit, ok };
}

/**
 * A target that could not be measured in this run (a backend or tool was
 * missing). It counts as a failure: a bench that silently measures less must
 * not pass as if it had shown the target.
 */
export function unmeasured(name, why) {
  return { name, value: NaN, op: "", target: NaN, unit: "", ok: false, why };
}

export function printTable(title, rows) {
  console.log(`\n## ${title}`);
  if (rows.length === 0) return;
  const keys = Object.keys(rows[0]);
  const widths = keys.map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)));
  console.log(keys.map((k, i) => k.padEnd(widths[i])).join("  "));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of rows) console.log(keys.map((k, i) => String(r[k]).padEnd(widths[i])).join("  "));
}

export function printChecks(checks) {
  for (const c of checks) {
    if (c.why !== undefined) {
      console.log(`  FAIL  ${c.name}: not measured (${c.why})`);
      continue;
    }
    const v = c.unit === "×" ? `${c.value.toFixed(2)}×` : `${c.value.toFixed(2)} ${c.unit}`;
    const t = c.unit === "×" ? `${c.target}×` : `${c.target} ${c.unit}`;
    console.log(`  ${c.ok ? "PASS" : "FAIL"}  ${c.name}: ${v} (target ${c.op} ${t})`);
  }
}

/** Linux: the process exists and is not a zombie (benches check their own trees with it). */
export function alive(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    return s.slice(s.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** Live pids whose environment names any of `leaseIds` as its lease (one pass over /proc). */
export function carriersOfAny(leaseIds) {
  const key = "OPENCLAW_ACPX_LEASE_ID=";
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const entry = readFileSync(`/proc/${d}/environ`, "latin1")
        .split("\0")
        .find((e) => e.startsWith(key));
      if (entry !== undefined && leaseIds.has(entry.slice(key.length)) && alive(Number(d))) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * Starts argv in a session of its own whose parent is not this process: a
 * shell backgrounds it and exits, so init (or the nearest subreaper) adopts
 * it, as it adopts a former gateway's processes before a new one reconciles
 * them. A bench that spawned them itself would pay what a gateway does not:
 * libuv answers every SIGCHLD with a waitpid for each of its child handles,
 * on the main thread. Answers the pid.
 */
export function adopted(argv, env) {
  const out = execFileSync("sh", ["-c", 'setsid "$@" </dev/null >/dev/null 2>&1 & echo $!', "sh", ...argv], {
    env,
    encoding: "utf8",
  });
  const pid = Number(out.trim());
  if (!Number.isInteger(pid) || pid <= 1)
    throw new Error(`${argv[0]} was not started (the shell printed ${JSON.stringify(out)})`);
  return pid;
}

/**
 * `facts` with the bench's own count of each call (a bench checks "one walk
 * for the batch" by counting, not by the code's word); `counts` is reset by
 * assigning 0 to its fields.
 */
export function countedFacts(facts) {
  const counts = { snapshot: 0, inspect: 0, inspectMany: 0 };
  const counted = {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    snapshot: () => (counts.snapshot++, facts.snapshot()),
    inspect: (pid, o) => (counts.inspect++, facts.inspect(pid, o)),
    inspectMany: (pids, o) => (counts.inspectMany++, facts.inspectMany(pids, o)),
  };
  return { facts: counted, counts };
}

const here = dirname(fileURLToPath(import.meta.url));

/** Compiles bench/c/NAME.c into bench/.out/NAME: { path } or { path: null, reason }. */
export function buildC(name) {
  const cc = spawnSync("cc", ["--version"], { stdio: "ignore" });
  if (cc.error || cc.status !== 0) return { path: null, reason: "no C compiler (cc) on PATH" };
  const out = join(here, ".out");
  mkdirSync(out, { recursive: true });
  const path = join(out, name);
  const r = spawnSync("cc", ["-O2", "-pthread", "-o", path, join(here, "c", `${name}.c`)], { encoding: "utf8" });
  if (r.status !== 0) return { path: null, reason: `cc failed: ${r.stderr.trim()}` };
  return { path, reason: null };
}

/**
 * OpenClaw 2026.9.6 writes outside its state dir, whatever TMPDIR says: its
 * state-lock files go to /tmp/openclaw-state-locks-<uid> (a fixed "/tmp"),
 * and a CLI run without logging.file logs to /tmp/openclaw. A run that
 * loads OpenClaw notes what those folders hold first and, with `clean()`,
 * removes what it added (and a folder it created, once empty).
 */
export function openclawTmpGuard() {
  const dirs = ["/tmp/openclaw", `/tmp/openclaw-state-locks-${process.getuid?.() ?? "x"}`];
  const before = new Map(dirs.map((d) => [d, existsSync(d) ? new Set(readdirSync(d)) : null]));
  return {
    clean() {
      for (const d of dirs) {
        if (!existsSync(d)) continue;
        const had = before.get(d);
        for (const f of readdirSync(d)) if (!had?.has(f)) rmSync(join(d, f), { recursive: true, force: true });
        if (had === null && readdirSync(d).length === 0) rmSync(d, { recursive: true, force: true });
      }
    },
  };
}
