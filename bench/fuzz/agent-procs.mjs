// The hostile agent's process actions: fork storms, pid hoppers, escapees
// (setsid, env -i, the root cgroup, non-dumpable), foreign pids written into
// its own lease cgroup, signals to its keeper and its wrapper, a stopped tree,
// a replaced wrapper binary, a search for the gateway's removed secret.
//
// Every process started here carries the sequence's nonce in its argv (a
// sleep of 3000.<nonce> seconds, a shell whose $0 is fz<nonce>) and writes
// "<pid> <start time>" to the pids file before it execs its last program:
// the runner finds what is left by both, whatever the process did to its
// environment, session or cgroup.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
} from "node:fs";
import { writeFileSync, writeSync as fdWrite } from "node:fs";
import { join } from "node:path";
import { garbage } from "./agent-fuzz.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PY_NONDUMPABLE =
  "import ctypes,signal,time; ctypes.CDLL(None).prctl(4,0,0,0,0); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3000)";

/** The shell function every script starts with: `rec PID` appends "PID STARTTIME" to the pids file. */
const prelude = (ctx) =>
  `rec() { s=$(cut -d' ' -f22 /proc/$1/stat 2>/dev/null) && echo "$1 $s" >> '${ctx.plan.pidsFile}'; }; `;
const sleeper = (ctx, ignoreTerm = true) => `${ignoreTerm ? "trap '' TERM; " : ""}exec sleep 3000.${ctx.nonce}`;

/** /bin/sh -c SCRIPT fz<nonce> ARGS…, detached from our stdio. */
export function sh(ctx, script, args = []) {
  const child = spawn("/bin/sh", ["-c", prelude(ctx) + script, `fz${ctx.nonce}`, ...args], { stdio: "ignore" });
  child.on("error", (e) => ctx.report({ what: "spawn-failed", error: String(e.message) }));
  return child;
}

export function forkStorm(ctx, count, ignoreTerm) {
  const one = ignoreTerm ? `(trap '' TERM; exec sleep 3000.${ctx.nonce})` : `(exec sleep 3000.${ctx.nonce})`;
  sh(ctx, `rec $$; i=0; while [ $i -lt ${count} ]; do ${one} & i=$((i+1)); done; wait`);
  ctx.report({ what: "fork-storm", count });
}

function pidsLines(ctx) {
  try {
    return readFileSync(ctx.plan.pidsFile, "utf8").split("\n").filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** Waits (bounded) until the pids file has grown past `n` lines. */
async function pidsGrown(ctx, n, ms = 3000) {
  const until = Date.now() + ms;
  while (pidsLines(ctx) <= n && Date.now() < until) await sleep(20);
}

async function escapee(ctx, p) {
  const python = p.nonDumpable ? ctx.plan.python : null;
  const inner =
    prelude(ctx) +
    (p.rootCgroup && ctx.plan.cgroupMount ? `echo $$ > '${ctx.plan.cgroupMount}/cgroup.procs' 2>/dev/null; ` : "") +
    "rec $$; " +
    (python ? `exec ${python} -c '${PY_NONDUMPABLE}' fz${ctx.nonce}` : sleeper(ctx));
  const launcher = `${p.setsid ? "setsid " : ""}${p.envClear ? "env -i PATH=/usr/bin:/bin " : ""}/bin/sh -c "$1" fz${ctx.nonce}`;
  const before = pidsLines(ctx);
  sh(ctx, `( ${launcher} & ); exit 0`, [inner]);
  await pidsGrown(ctx, before);
  ctx.report({ what: "escapee", ...p, python: python !== null });
  if (p.killWrapper) signalWrapper(ctx, "SIGKILL");
}

async function pidHopper(ctx, hops, gapMs) {
  const file = join(ctx.plan.dir, `hop-${ctx.nonce}.sh`);
  const gap = gapMs > 0 ? `sleep ${(gapMs / 1000).toFixed(3)}; ` : "";
  writeFileSync(
    file,
    `${prelude(ctx)}\nif [ "$1" -gt 0 ]; then ${gap}/bin/sh "$0" $(($1 - 1)) & exit 0; fi\nrec $$; ${sleeper(ctx)}\n`,
  );
  const before = pidsLines(ctx);
  spawn("/bin/sh", [file, String(hops)], { stdio: "ignore" }).on("error", () => undefined);
  await pidsGrown(ctx, before, 2000 + hops * (gapMs + 20));
  ctx.report({ what: "pid-hopper", hops });
}

function ownCgroup(ctx) {
  const line = readFileSync("/proc/self/cgroup", "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  const rel = line?.slice(3) ?? "/";
  return rel === "/" || !ctx.plan.cgroupMount ? null : `${ctx.plan.cgroupMount}${rel}`;
}

function moveIntoCgroup(ctx, target) {
  const dir = ownCgroup(ctx);
  const pids = ctx.plan.targets?.[target] ?? [];
  const moved = [];
  for (const pid of dir ? pids : []) {
    try {
      writeFileSync(join(dir, "cgroup.procs"), String(pid));
      moved.push(pid);
    } catch (e) {
      ctx.report({ what: "move-refused", pid, code: e.code });
    }
  }
  ctx.report({ what: "move-into-cgroup", target, cgroup: dir, moved });
}

async function nestedCgroup(ctx, depth, moveSelf) {
  const top = ownCgroup(ctx);
  if (!top) return ctx.report({ what: "nested-cgroup", error: "no lease cgroup" });
  let dir = top;
  try {
    for (let i = 0; i < depth; i++) {
      dir = join(dir, `fz-nest-${i}`);
      mkdirSync(dir);
    }
  } catch (e) {
    return ctx.report({ what: "nested-cgroup", error: e.code });
  }
  const before = pidsLines(ctx);
  const child = sh(ctx, `rec $$; ${sleeper(ctx)}`);
  await pidsGrown(ctx, before);
  const moved = [];
  for (const pid of [child.pid, ...(moveSelf ? [process.pid] : [])]) {
    try {
      writeFileSync(join(dir, "cgroup.procs"), String(pid));
      moved.push(pid);
    } catch (e) {
      ctx.report({ what: "nest-refused", pid, code: e.code });
    }
  }
  ctx.report({ what: "nested-cgroup", cgroup: dir, moved });
}

/** A child whose markers name another lease: the innocent session's, or one no gateway ever wrote. */
async function markerOverride(ctx, claim, setsid) {
  const lease = claim === "sentinel" && ctx.plan.targets?.sentinelLease ? ctx.plan.targets.sentinelLease : randomUUID();
  const env = { ...process.env, OPENCLAW_ACPX_LEASE_ID: lease, OPENCLAW_GATEWAY_INSTANCE_ID: randomUUID() };
  const before = pidsLines(ctx);
  const script = `${prelude(ctx)}rec $$; ${sleeper(ctx)}`;
  const argv = setsid ? ["setsid", "/bin/sh", "-c", script] : ["/bin/sh", "-c", script];
  spawn(argv[0], [...argv.slice(1), `fz${ctx.nonce}`], { stdio: "ignore", env }).on("error", () => undefined);
  await pidsGrown(ctx, before);
  ctx.report({ what: "marker-override", claim, lease, setsid });
}

function cmdlineOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

function killKeeper(ctx, signal) {
  const found = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    const cmd = cmdlineOf(d);
    if (!cmd.includes("keeper-main") || !cmd.includes(ctx.plan.stateDir)) continue;
    try {
      process.kill(Number(d), signal);
      found.push(Number(d));
    } catch (e) {
      ctx.report({ what: "keeper-signal-failed", pid: Number(d), code: e.code });
    }
  }
  ctx.report({ what: "kill-keeper", signal, pids: found });
}

function signalWrapper(ctx, signal) {
  const pid = process.ppid;
  try {
    process.kill(pid, signal);
    ctx.report({ what: "kill-wrapper", signal, pid });
  } catch (e) {
    ctx.report({ what: "kill-wrapper-failed", signal, pid, code: e.code });
  }
}

async function sigstopTree(ctx, children, self) {
  const kids = [];
  for (let i = 0; i < children; i++) kids.push(sh(ctx, `rec $$; exec sleep 3000.${ctx.nonce}`));
  await pidsGrown(ctx, pidsLines(ctx) - 1, 1000);
  for (const k of kids) if (k.pid) process.kill(k.pid, "SIGSTOP");
  ctx.report({ what: "sigstop-tree", children: kids.map((k) => k.pid), self });
  if (self) process.kill(process.pid, "SIGSTOP");
}

function replaceWrapper(ctx, how) {
  const dir = join(ctx.plan.stateDir, "acpx", "wrappers");
  let names = [];
  try {
    names = readdirSync(dir).filter((n) => !n.startsWith("."));
  } catch (e) {
    return ctx.report({ what: "replace-wrapper", error: e.code });
  }
  const pwned = join(ctx.plan.dir, "pwned");
  for (const n of names) {
    const target = join(dir, n);
    const orig = join(ctx.plan.dir, `orig-${n}`);
    try {
      copyFileSync(target, orig);
      chmodSync(orig, 0o755);
      const script = n.endsWith(".cjs")
        ? `require("fs").appendFileSync(${JSON.stringify(pwned)}, "pwned " + process.pid + "\\n"); require(${JSON.stringify(orig)});\n`
        : `#!/bin/sh\necho "pwned $$" >> '${pwned}'\nexec '${orig}' "$@"\n`;
      if (how === "truncate") {
        const fd = openSync(target, "w");
        fdWrite(fd, script);
        closeSync(fd);
      } else {
        writeFileSync(`${target}.fz`, script, { mode: 0o755 });
        renameSync(`${target}.fz`, target);
      }
      ctx.report({ what: "replace-wrapper", how, file: target, done: true });
    } catch (e) {
      ctx.report({ what: "replace-wrapper", how, file: target, error: e.code ?? String(e.message) });
    }
  }
}

function readSecret(ctx) {
  const secret = ctx.plan.secret;
  let readable = 0;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    let env;
    try {
      env = readFileSync(`/proc/${d}/environ`, "latin1");
    } catch {
      continue;
    }
    readable++;
    if (secret && env.includes(secret))
      ctx.report({ what: "secret-found", pid: Number(d), argv: cmdlineOf(d).split("\0").slice(0, 3) });
  }
  ctx.report({ what: "read-secret", readable });
}

/** SIGTERM handling for the whole life of the agent (ignore-term, fork-on-term). */
export function installTermBehaviour(ctx, actions) {
  const ignore = actions.find((x) => x.a === "ignore-term");
  const forkOnTerm = actions.find((x) => x.a === "fork-on-term");
  ctx.surviveEof = ignore?.p.surviveEof === true;
  if (!ignore && !forkOnTerm) return;
  let forked = false;
  process.on("SIGTERM", () => {
    ctx.report({ what: "sigterm", ignored: true });
    if (forkOnTerm && !forked) {
      forked = true;
      forkStorm(ctx, forkOnTerm.p.count, true);
    }
  });
}

export function runStartAction(ctx, act) {
  const p = act.p;
  if (act.a === "fork-storm") forkStorm(ctx, p.count, p.ignoreTerm);
  else if (act.a === "garbage-first") garbage(ctx, p.bytes, p.binary);
}

const PROC_ACTIONS = {
  "fork-storm-turn": (ctx, p) => forkStorm(ctx, p.count, true),
  "pid-hopper": (ctx, p) => pidHopper(ctx, p.hops, p.gapMs),
  escapee: (ctx, p) => escapee(ctx, p),
  "nested-cgroup": (ctx, p) => nestedCgroup(ctx, p.depth, p.moveSelf),
  "marker-override": (ctx, p) => markerOverride(ctx, p.claim, p.setsid),
  "move-into-cgroup": (ctx, p) => moveIntoCgroup(ctx, p.target),
  "kill-keeper": (ctx, p) => killKeeper(ctx, p.signal),
  "kill-wrapper": (ctx, p) => signalWrapper(ctx, p.signal),
  "sigstop-tree": (ctx, p) => sigstopTree(ctx, p.children, p.self),
  "replace-wrapper": (ctx, p) => replaceWrapper(ctx, p.how),
  "read-secret": (ctx) => readSecret(ctx),
};

/** The process actions of a turn; false when `act` is not one of them. */
export async function runProcAction(ctx, act) {
  const fn = PROC_ACTIONS[act.a];
  if (!fn) return false;
  await fn(ctx, act.p);
  return true;
}
