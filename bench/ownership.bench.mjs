// Ownership costs:
// 1. Verifying 100 live leases with ONE snapshot and one shared env-marker
//    pass (verifyLeases) vs 100 separate verifyOwnedTree calls, per backend.
// 2. Listing the open leases of one gateway among 10,000 leases (2,000 in
//    --quick) vs the naive approach of reading and parsing every lease file.
import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { getProcessFacts, loadNative } from "../dist/facts/index.js";
import { computeCommandHash, openLeaseStore, verifyLeases, verifyOwnedTree } from "../dist/ownership/index.js";
import { check, fmtMs, median, now, printTable } from "./lib.mjs";

const LEASES = 100;

export async function run({ quick }) {
  const checks = [];
  checks.push(...(await verifyBench(quick)));
  checks.push(...(await listBench(quick)));
  return checks;
}

async function verifyBench(quick) {
  const sleep = realpathSync("/bin/sleep");
  const argv = [sleep, "600"];
  const kids = [];
  const leases = [];
  const backends = ["procfs"];
  if (loadNative()) backends.unshift("native");
  const facts0 = getProcessFacts({ backend: backends[0] });
  try {
    for (let i = 0; i < LEASES; i++) {
      const leaseId = `bench-${i}`;
      const c = spawn(sleep, ["600"], { stdio: "ignore", env: { ...process.env, OPENCLAW_ACPX_LEASE_ID: leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: "gw-bench" } });
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
        leaseId: `bench-${i}`, gatewayInstanceId: "gw-bench", sessionKey: `s${i}`,
        wrapperRoot: dirname(sleep), wrapperPath: sleep, rootPid: c.pid, commandHash: computeCommandHash(argv),
        startedAt: Date.now(), state: "open", rootStartTime: d.startTime, bootId: d.bootId, pidNamespace: d.pidNamespace,
      });
    }
    const rounds = quick ? 2 : 5;
    const rows = [];
    const out = [];
    for (const b of backends) {
      const facts = getProcessFacts({ backend: b });
      const batch = [];
      const separate = [];
      let owned = 0;
      // the bench counts snapshot() calls itself: "one walk for the batch" is
      // measured, not taken from the verifier's word
      let walks = 0;
      const counted = { ...facts, backend: facts.backend, identityStrength: facts.identityStrength, snapshot: () => (walks++, facts.snapshot()), inspect: (p, o) => facts.inspect(p, o) };
      let walksPerBatch = 0;
      for (let r = 0; r < rounds; r++) {
        let t0 = now();
        walks = 0;
        const vs = await verifyLeases(leases, counted);
        walksPerBatch = Math.max(walksPerBatch, walks);
        batch.push(now() - t0);
        owned = vs.filter((v) => v.verdict === "owned").length;
        t0 = now();
        for (const l of leases) await verifyOwnedTree(l, facts);
        separate.push(now() - t0);
      }
      const ratio = median(separate) / median(batch);
      rows.push({ backend: b, leases: LEASES, verified: owned, "verifyLeases (1 snapshot)": fmtMs(median(batch)), "100× verifyOwnedTree": fmtMs(median(separate)), ratio: `${ratio.toFixed(1)}×` });
      out.push(check(`${b}: all ${LEASES} live leases verified`, owned, ">=", LEASES, "leases"));
      out.push(check(`${b}: verifyLeases(100) vs 100 separate verifyOwnedTree`, ratio, ">=", 5));
      out.push(check(`${b}: snapshot() calls per verifyLeases(100) (bench's count)`, walksPerBatch, "<=", 1, "snapshot"));
    }
    printTable(`verify ${LEASES} live leases (median of ${rounds} rounds)`, rows);
    return out;
  } finally {
    for (const c of kids) c.kill("SIGKILL");
  }
}

async function listBench(quick) {
  const N = quick ? 2_000 : 10_000;
  const dir = await mkdtemp(join(tmpdir(), "own-bench-"));
  try {
    // durable:false only to build the fixture quickly; listing does not fsync anyway
    const store = await openLeaseStore(dir, { durable: false });
    const input = (gw) => ({ gatewayInstanceId: gw, sessionKey: "s", wrapperRoot: "/opt/gw", wrapperPath: "/opt/gw/w.mjs", commandHash: "00" });
    const ids = [];
    for (let i = 0; i < N; i += 250) {
      const batch = await Promise.all(Array.from({ length: Math.min(250, N - i) }, (_, j) => store.create(input((i + j) % 4 === 0 ? "gw-B" : "gw-A"))));
      ids.push(...batch.map((l) => l.leaseId));
    }
    // realistic shape: ~1% still open, the rest finished and waiting for retention
    const finish = ids.filter((_, i) => i % 100 !== 1 && i % 100 !== 2);
    for (let i = 0; i < finish.length; i += 250) {
      await Promise.all(finish.slice(i, i + 250).map(async (id, j) => {
        await store.transition(id, "closing");
        await store.transition(id, (i + j) % 3 === 0 ? "lost" : "closed");
      }));
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
      { leases: N, open_for_gw: got, "list(open, gw)": fmtMs(median(fast)), "naive read+parse all": fmtMs(median(slow)), "list() everything": fmtMs(median(all)), ratio: `${ratio.toFixed(1)}×` },
    ]);
    return [
      check(`list(open, one gateway) returns what a full scan finds (${N} leases)`, got === want && got > 0 ? 1 : 0, ">=", 1, "ok"),
      check(`list(open, one gateway) vs naive read-all among ${N}`, ratio, ">=", 5),
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
