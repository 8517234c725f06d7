// Run by an arm64 Node under qemu-user, from a folder where the packed
// tarball is installed (.ci/arm64-emulated). Checks the linux-arm64 prebuild
// for real: it loads, getProcessFacts() picks native, a snapshot and an
// inspect of a live process agree with the procfs backend, and an
// identity-checked signal reaches the process through a pidfd. Where qemu
// does not emulate a syscall the addon needs, the addon falls back as on an
// old kernel: this prints what it fell back on and checks the fallback.
// Exits non-zero on the first disagreement.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { once } from "node:events";
import { createSignaller, getProcessFacts, loadError, loadNative } from "proclease";

const require = createRequire(`${process.cwd()}/package.json`);
const started = Date.now();
const fellBack = [];

function check(ok, what) {
  if (!ok) {
    console.error(`arm64 check FAILED: ${what}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

check(process.arch === "arm64", `process.arch is ${process.arch}`);
const addonPath = require("node-gyp-build").path(
  require("node:path").dirname(require.resolve("proclease/package.json")),
);
check(addonPath.includes("/prebuilds/linux-arm64/"), `node-gyp-build picks ${addonPath}`);
const binding = loadNative();
check(binding !== null, `the addon loads (${loadError() ?? "no load error"})`);

const native = getProcessFacts();
const procfs = getProcessFacts({ backend: "procfs" });
check(
  native.backend === "native" && native.identityStrength === "exact",
  `getProcessFacts() reports backend ${native.backend}, identity ${native.identityStrength}`,
);

// A live process with a known argv and environment (a host binary: qemu runs only this Node).
const child = spawn("sleep", ["300"], {
  env: { ...process.env, PROCLEASE_ARM64_PROBE: "probe-value" },
  stdio: "ignore",
});
await once(child, "spawn");
const pid = child.pid;

// sleep has exec'd once /proc/PID/exe names it; until then it is still this Node's fork.
let execd = false;
for (let i = 0; i < 500 && !execd; i++) {
  execd = (await procfs.inspect(pid))?.argv?.[0] === "sleep";
  if (!execd) await new Promise((r) => setTimeout(r, 10));
}
check(execd, `probe ${pid} runs sleep`);

const [snapNative, snapProcfs] = await Promise.all([native.snapshot(), procfs.snapshot()]);
const STABLE = ["ppid", "pgid", "sid", "uid", "startTime"];
// The probe holds still: every field is compared. This process is compared
// only by the native backend's own values: qemu-user answers an open of
// /proc/<its own pid>/stat with a stat line of its own making (state 0, pgid
// 0, a start time a tick off), which the procfs backend reads by that path;
// the addon reads by a path relative to its /proc fd, which qemu passes on.
// Any other process on the host may exit, setsid or be reparented between the
// two walks, so for those only the start time is compared (fixed for a pid's
// life); a pid reused between the walks differs there, and a start-time bug
// would show on every process, so a few differences are churn and many a failure.
{
  const a = snapNative.processes.get(pid);
  const b = snapProcfs.processes.get(pid);
  check(a !== undefined && b !== undefined, `snapshot holds the probe ${pid} in both backends`);
  const bad = [...STABLE, "state"].filter((k) => a[k] !== b[k]);
  check(
    bad.length === 0,
    `snapshot of the probe: ${[...STABLE, "state"].map((k) => `${k} ${a[k]}`).join(", ")} in both${bad.length ? `; differs: ${bad.join(", ")}` : ""}`,
  );
  const self = snapNative.processes.get(process.pid);
  check(
    self !== undefined && self.ppid === process.ppid && /^[1-9][0-9]*$/.test(self.startTime),
    `native snapshot of this process: ppid ${self?.ppid}, start ${self?.startTime}`,
  );
  const faked = snapProcfs.processes.get(process.pid);
  console.log(
    `note qemu-user fakes /proc/${process.pid}/stat for the emulated process: procfs reads ${faked === undefined ? "no record" : `ppid ${faked.ppid}, pgid ${faked.pgid}, start ${faked.startTime}`} for it (not compared)`,
  );
}
let same = 0;
const differ = [];
for (const [p, a] of snapNative.processes) {
  const b = snapProcfs.processes.get(p);
  if (!b || p === process.pid) continue;
  if (a.startTime === b.startTime) same++;
  else differ.push(`${p}: ${a.startTime} vs ${b.startTime}`);
}
check(
  same >= 3 && differ.length <= Math.max(2, same / 20),
  `snapshot: ${same} processes have the same start time in both backends, ${differ.length} differ (pid reuse between the walks)${differ.length ? `: ${differ.slice(0, 3).join("; ")}` : ""}; ${snapNative.processes.size} native, ${snapProcfs.processes.size} procfs`,
);
const sn = snapNative.processes.get(pid);
check(sn.ppid === process.pid && sn.state === "S", `snapshot of the probe: ppid ${sn.ppid}, state ${sn.state}`);

const keys = ["PROCLEASE_ARM64_PROBE", "PROCLEASE_NOT_SET"];
const [dn, dp] = await Promise.all([native.inspect(pid, { envKeys: keys }), procfs.inspect(pid, { envKeys: keys })]);
for (const k of [...STABLE, "pid", "state", "exePath"])
  check(dn[k] === dp[k], `inspect ${k}: native ${JSON.stringify(dn[k])} = procfs ${JSON.stringify(dp[k])}`);
check(
  JSON.stringify(dn.argv) === JSON.stringify(dp.argv) && dn.argv.join(" ") === "sleep 300",
  `inspect argv: ${JSON.stringify(dn.argv)}`,
);
check(
  dn.env.PROCLEASE_ARM64_PROBE === "probe-value" &&
    dn.env.PROCLEASE_NOT_SET === null &&
    JSON.stringify(dn.env) === JSON.stringify(dp.env),
  `inspect env (requested keys only): ${JSON.stringify(dn.env)}`,
);
check(
  dn.bootId === dp.bootId && dn.pidNamespace === dp.pidNamespace,
  `inspect bootId ${dn.bootId}, pidNamespace ${dn.pidNamespace}`,
);

const pidfd = binding.pidfdSupported();
if (!pidfd)
  fellBack.push(
    "pidfd_open/pidfd_send_signal: signals are inspect-then-kill (raceFree false), as on a kernel before 5.3",
  );
const signaller = createSignaller(native);
check(
  signaller.raceFree === pidfd,
  `signaller raceFree=${signaller.raceFree} (pidfd ${pidfd ? "works under qemu" : "NOT emulated"})`,
);
const wrong = String(Number(dn.startTime) + 1);
check(
  (await signaller.signal(pid, wrong, "SIGTERM")) === "mismatch",
  "a signal with a wrong start time answers mismatch and sends nothing",
);
check(child.exitCode === null && child.signalCode === null, "the probe is still alive after the mismatch");
const exited = once(child, "exit");
const outcome = await signaller.signal(pid, dn.startTime, "SIGTERM");
check(
  outcome === "signalled",
  `signal(pid, its start time, SIGTERM) answers ${outcome}${pidfd ? " through a pidfd" : ""}`,
);
const [, sig] = await exited;
check(sig === "SIGTERM", `the probe died of ${sig}`);
const again = await signaller.signal(pid, dn.startTime, "SIGTERM");
check(
  again === "gone" || again === "mismatch",
  `signalling it again answers ${again} (gone, or mismatch if its pid was reused)`,
);

// This process is a throwaway: it may set the subreaper bit on itself.
const subreaper = binding.setChildSubreaper();
if (subreaper !== 0) {
  fellBack.push(
    `prctl(PR_SET_CHILD_SUBREAPER) answers errno ${-subreaper}: wrappers run without the subreaper bit, as where the kernel refuses it`,
  );
}
check(
  typeof subreaper === "number",
  `setChildSubreaper() answers ${subreaper === 0 ? "0 (set)" : `errno ${-subreaper}`}`,
);
console.log(
  `fell back on: ${fellBack.length === 0 ? "nothing (every syscall the addon uses is emulated)" : fellBack.join("; ")}`,
);
console.log(`arm64 facts check: OK in ${Date.now() - started} ms (emulated)`);
