// Ownership costs:
// 1. Verifying 100 live leases (and 1,000 in the full run) with ONE snapshot
//    and batched reads (verifyLeases) vs 100 separate verifyOwnedTree calls,
//    per backend; and per lease against a per-pid identity probe that runs
//    `ps` once per pid (a fork and exec per question), measured here.
// 2. Listing the open leases of one gateway among 10,000 leases (2,000 in
//    --quick) vs the naive approach of reading and parsing every lease file.
import { execFileSync, spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { getProcessFacts, loadNative } from "../dist/facts/index.js";
import { computeCommandHash, openLeaseStore, verifyLeases, verifyOwnedTree } from "../dist/ownership/index.js";
import { buildC, check, countedFacts, fmtMs, median, now, printTable, unmeasured } from "./lib.mjs";

const LEASES = 100;
// issue 20: verifyLeases at >= 5,000x a per-pid ps probe (19 us per lease
// against acpx's 96 ms), judged by the full run at 100 and 1,000 leases; the
// quick run gates a guard at a fifth of it, above a shared host's noise
// The floor of what verifyLeases must read: one walk of /proc (the C walk)
// plus one inspect of every lease's root (the C inspect loop over the same
// pids with an env key, read as listed in a snapshot: no status, as
// verifyLeases reads them), made one after the other. verifyLeases
// reads both at once, on several threads: at or under 1x means the JS above
// the reads costs less than the parallelism saves. Measured 1.41x at 1,000
// leases and 1.82-1.85x at 100, where the hops between the threads weigh
// most (host A, medians); 1.00-1.10x and 1.35-1.57x on host B (quietest
// rounds, docs/benchmarks.md).
const FLOOR_TARGET = { full: 2, quick: 2.5 };
const WARM_MS = { full: 500, quick: 250 };
// A per-pid `ps` probe is what an ownership check without /proc costs each
// question; verifyLeases per lease against it, a guard far below what it
// measures here (about 100x at 100 leases)
const PROBE_GUARD = 20;

export async function run({ quick }) {
  const checks = [];
  const probe = psProbeMs();
  const floor = { walk: buildC("stat_loop"), inspect: buildC("inspect_loop") };
  checks.push(...(await verifyBench(quick, LEASES, probe, floor)));
  if (!quick) checks.push(...(await verifyBench(quick, 1000, probe, floor)));
  checks.push(...(await listBench(quick)));
  return checks;
}

/** One `ps -o pid=,lstart=,args= -p PID` per pid: the median time of a per-pid identity probe. */
function psProbeMs() {
  const times = [];
  for (let i = 0; i < 15; i++) {
    const t0 = now();
    execFileSync("ps", ["-o", "pid=,lstart=,args=", "-p", String(process.pid)], { encoding: "utf8" });
    times.push(now() - t0);
  }
  return median(times);
}

/** The C floor of verifying these roots: one walk, then one inspect of each (ms). */
async function floorMs(floor, pids, dir) {
  if (!floor.walk.path || !floor.inspect.path) return null;
  const list = join(dir, "pids");
  await writeFile(list, pids.join("\n"));
  const walk = JSON.parse(execFileSync(floor.walk.path, ["5"], { encoding: "utf8" })).medianMs;
  const per = JSON.parse(
    execFileSync(floor.inspect.path, [`@${list}`, "3", "OPENCLAW_ACPX_LEASE_ID", "listed"], { encoding: "utf8" }),
  ).medianUs;
  return walk + (per * pids.length) / 1000;
}

async function verifyBench(quick, LEASES, probeMs, floor) {
  const sleep = realpathSync("/bin/sleep");
  const argv = [sleep, "600"];
  const kids = [];
  const leases = [];
  const backends = ["procfs"];
  if (loadNative()) backends.unshift("native");
  const facts0 = getProcessFacts({ backend: backends[0] });
  const tmp = await mkdtemp(join(tmpdir(), "own-floor-"));
  try {
    for (let i = 0; i < LEASES; i++) {
      const leaseId = `bench-${i}`;
      const c = spawn(sleep, ["600"], {
        stdio: "ignore",
        env: { ...process.env, OPENCLAW_ACPX_LEASE_ID: leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-bench" },
      });
      kids.push(c);
      await new Promise((r) => c.once("spawn", r));
    }
    // exec has happened once the argv reads back as sleep's
    for (const c of kids) {
      for (let t = 0; t < 200; t++) {
        const d = await facts0.inspect(c.pid);
        if (d && d.argv && d.argv[0] === sleep) break;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    for (const [i, c] of kids.entries()) {
      const d = await facts0.inspect(c.pid);
      leases.push({
        leaseId: `bench-${i}`,
        gatewayInstanceId: "gw-bench",
        sessionKey: `s${i}`,
        wrapperRoot: dirname(sleep),
        wrapperPath: sleep,
        rootPid: c.pid,
        commandHash: computeCommandHash(argv),
        startedAt: Date.now(),
        state: "open",
        rootStartTime: d.startTime,
        bootId: d.bootId,
        pidNamespace: d.pidNamespace,
      });
    }
    const rounds = quick ? 3 : 7;
    const rows = [];
    const out = [];
    for (const b of backends) {
      const facts = getProcessFacts({ backend: b });
      const batch = [];
      const separate = [];
      let owned = 0;
      // the bench counts snapshot() calls itself: "one walk for the batch" is
      // measured, not taken from the verifier's word
      const { facts: counted, counts } = countedFacts(facts);
      let walksPerBatch = 0;
      let reads = "";
      const floors = [];
      // the 1,000-lease run compares with the per-pid probe only: 1,000 separate verifications add nothing
      const withSeparate = LEASES <= 100;
      // untimed passes first, for WARM_MS: a gateway verifies on every maintenance
      // tick for as long as it runs, so the figure is the steady call's. V8 tiers
      // the verifier up over the first couple of hundred calls (host B, 100
      // leases: medians of 20 calls fell from 3.9 ms to 2.1 ms by the 60th and
      // 1.6-1.8 ms after 200); the first call's time is printed beside it
      let t0 = now();
      await verifyLeases(leases, counted);
      const first = now() - t0;
      for (const until = now() + (quick ? WARM_MS.quick : WARM_MS.full); now() < until;)
        await verifyLeases(leases, counted);
      for (let r = 0; r < rounds; r++) {
        t0 = now();
        counts.snapshot = counts.inspect = counts.inspectMany = 0;
        const vs = await verifyLeases(leases, counted);
        walksPerBatch = Math.max(walksPerBatch, counts.snapshot);
        reads = `${counts.inspectMany} batch(es), ${counts.inspect} single inspect(s)`;
        batch.push(now() - t0);
        // the floor, interleaved round by round with what it bounds
        if (b === "native")
          floors.push(
            await floorMs(
              floor,
              leases.map((l) => l.rootPid),
              tmp,
            ),
          );
        owned = vs.filter((v) => v.verdict === "owned").length;
        if (!withSeparate) continue;
        t0 = now();
        for (const l of leases) await verifyOwnedTree(l, facts);
        separate.push(now() - t0);
      }
      const perLease = median(batch) / LEASES;
      const cFloor = floors.length > 0 && floors.every((f) => f !== null) ? median(floors) : null;
      // against the floor, each side's quietest round (as the facts bench's inspect row): other
      // work on the host only ever adds time, and on a host fast at syscalls a few hundred µs of
      // it moved the median ratio of a quick run from 2.24x to 2.48x; the medians' ratio is printed
      const quiet = cFloor === null ? null : Math.min(...batch) / Math.min(...floors);
      const vsProbe = probeMs / perLease;
      const ratio = withSeparate ? median(separate) / median(batch) : NaN;
      rows.push({
        backend: b,
        leases: LEASES,
        verified: owned,
        "first call": fmtMs(first),
        "verifyLeases (1 snapshot)": fmtMs(median(batch)),
        "per lease": fmtMs(perLease),
        reads,
        [`${LEASES}× verifyOwnedTree`]: withSeparate ? fmtMs(median(separate)) : "-",
        ratio: withSeparate ? `${ratio.toFixed(1)}×` : "-",
        "C floor (walk + inspects)": cFloor === null ? "-" : fmtMs(cFloor),
        "/ floor (quietest rounds)":
          cFloor === null ? "-" : `${quiet.toFixed(2)}× (medians ${(median(batch) / cFloor).toFixed(2)}×)`,
        [`ps probe (${fmtMs(probeMs)}) / per lease`]: `${vsProbe.toFixed(0)}×`,
      });
      out.push(check(`${b}: all ${LEASES} live leases verified`, owned, ">=", LEASES, "leases"));
      if (withSeparate)
        out.push(check(`${b}: verifyLeases(${LEASES}) vs ${LEASES} separate verifyOwnedTree`, ratio, ">=", 5));
      out.push(
        check(`${b}: snapshot() calls per verifyLeases(${LEASES}) (bench's count)`, walksPerBatch, "<=", 1, "snapshot"),
      );
      if (b === "native") {
        const name = `native: verifyLeases(${LEASES}) / C floor of its reads${quick ? " (regression guard)" : ""}`;
        if (cFloor === null)
          out.push(unmeasured(name, floor.walk.reason ?? floor.inspect.reason ?? "C floor not measured"));
        else out.push(check(name, quiet, "<=", quick ? FLOOR_TARGET.quick : FLOOR_TARGET.full));
        out.push(check(`native: a per-pid ps probe / verifyLeases(${LEASES}) per lease`, vsProbe, ">=", PROBE_GUARD));
      }
    }
    printTable(
      `verify ${LEASES} live leases (median of ${rounds} rounds; the root batch and the snapshot are read at once, then one batch of marker candidates)`,
      rows,
    );
    return out;
  } finally {
    for (const c of kids) c.kill("SIGKILL");
    await rm(tmp, { recursive: true, force: true });
  }
}

async function listBench(quick) {
  const N = quick ? 2_000 : 10_000;
  const dir = await mkdtemp(join(tmpdir(), "own-bench-"));
  try {
    // durable:false only to build the fixture quickly; listing does not fsync anyway
    const store = await openLeaseStore(dir, { durable: false });
    const input = (gw) => ({
      kind: "acpx",
      gatewayInstanceId: gw,
      sessionKey: "s",
      wrapperRoot: "/opt/gw",
      wrapperPath: "/opt/gw/w.mjs",
      commandHash: "00",
    });
    const ids = [];
    for (let i = 0; i < N; i += 250) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(250, N - i) }, (_, j) =>
          store.create(input((i + j) % 4 === 0 ? "gw-B" : "gw-A")),
        ),
      );
      ids.push(...batch.map((l) => l.leaseId));
    }
    // realistic shape: ~1% still open, the rest finished and waiting for retention
    const finish = ids.filter((_, i) => i % 100 !== 1 && i % 100 !== 2);
    for (let i = 0; i < finish.length; i += 250) {
      await Promise.all(
        finish.slice(i, i + 250).map(async (id, j) => {
          await store.transition(id, "closing");
          await store.transition(id, (i + j) % 3 === 0 ? "lost" : "closed");
        }),
      );
    }
    const naive = async () => {
      // what a flat store must do: read and parse every file, then filter
      const out = [];
      for (const sub of ["", "archive"]) {
        const d = join(store.dir, sub);
        const names = (await readdir(d)).filter((n) => n.endsWith(".json"));
        const texts = await Promise.all(names.map((n) => readFile(join(d, n), "utf8")));
        for (const t of texts) {
          const l = JSON.parse(t);
          if (l.gatewayInstanceId === "gw-A" && l.state === "open") out.push(l);
        }
      }
      return out;
    };
    const iters = quick ? 5 : 10;
    const fast = [];
    const slow = [];
    const all = [];
    let got = 0;
    let want = 0;
    for (let r = 0; r < iters; r++) {
      let t0 = now();
      const { leases } = await store.list({ gatewayInstanceId: "gw-A", states: ["open"] });
      fast.push(now() - t0);
      got = leases.length;
      t0 = now();
      want = (await naive()).length;
      slow.push(now() - t0);
      if (r < 2) {
        t0 = now();
        await store.list();
        all.push(now() - t0);
      }
    }
    const ratio = median(slow) / median(fast);
    printTable(`list open leases of one gateway among ${N}${quick ? " (quick: 2,000; full run: 10,000)" : ""}`, [
      {
        leases: N,
        open_for_gw: got,
        "list(open, gw)": fmtMs(median(fast)),
        "naive read+parse all": fmtMs(median(slow)),
        "list() everything": fmtMs(median(all)),
        ratio: `${ratio.toFixed(1)}×`,
      },
    ]);
    return [
      check(
        `list(open, one gateway) returns what a full scan finds (${N} leases)`,
        got === want && got > 0 ? 1 : 0,
        ">=",
        1,
        "ok",
      ),
      check(`list(open, one gateway) vs naive read-all among ${N}`, ratio, ">=", 5),
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
