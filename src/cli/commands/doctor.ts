/**
 * `proclease doctor [--json] [--backend NAME]`: what this host allows, one row
 * per capability, each with yes/no and the reason. Every check is a real
 * attempt (load the addon, open pidfds, set the subreaper bit in a throwaway
 * child, read pid 1's environment), never a guess from the platform name.
 */
import { execFile } from "node:child_process";
import { promises as fsp } from "node:fs";
import { release } from "node:os";
import { describeBackendChoice } from "../../facts/get.js";
import { loadError, loadNative } from "../../facts/native.js";
import type { NativeBinding } from "../../facts/native-binding.js";
import { hidepidOf, procMountOptions } from "../../facts/procfs.js";
import type { ProcessFacts } from "../../facts/types.js";
import { UsageError, parseArgs, type CliIo } from "../io.js";
import { backendLine, factsFromFlag } from "./ps.js";

export interface DoctorRow {
  capability: string;
  ok: boolean;
  detail: string;
}

export const CAPABILITIES = [
  "backend",
  "identity",
  "pidfd",
  "subreaper",
  "foreign-env",
  "proc-visibility",
] as const;

function nativeWhy(): string {
  return loadError() ?? `not built for ${process.platform}`;
}

function backendRow(facts: ProcessFacts, forced: string | undefined, binding: NativeBinding | null): DoctorRow {
  const how = forced !== undefined ? `forced by --backend ${forced}` : describeBackendChoice().reason;
  let native = "";
  if (facts.backend !== "native" && !how.includes("native addon unavailable")) {
    native = binding === null ? `; native addon unavailable: ${nativeWhy()}` : "; native addon loads but was not chosen";
  }
  return { capability: "backend", ok: facts.backend !== "none", detail: `${facts.backend}: ${how}${native}` };
}

function identityRow(facts: ProcessFacts): DoctorRow {
  const detail = {
    exact: "start times are unique per process (Linux clock ticks + boot id, macOS µs)",
    coarse: "ps lstart: one-second start times; a pid reused within the same second looks identical",
    none: "nothing can be verified: every ownership check fails closed",
  }[facts.identityStrength];
  return { capability: "identity", ok: facts.identityStrength === "exact", detail: `${facts.identityStrength}: ${detail}` };
}

function pidfdRow(binding: NativeBinding | null): DoctorRow {
  if (process.platform !== "linux") return { capability: "pidfd", ok: false, detail: `Linux only (this is ${process.platform}): check-then-kill has a pid-reuse window` };
  if (binding === null) return { capability: "pidfd", ok: false, detail: `needs the native addon: ${nativeWhy()}` };
  const ok = binding.pidfdSupported();
  return {
    capability: "pidfd",
    ok,
    detail: ok ? "pidfd_open + pidfd_send_signal work: identity-checked signals are race-free" : `kernel ${release()} refuses pidfd_open/pidfd_send_signal (needs Linux >= 5.3)`,
  };
}

/** Sets PR_SET_CHILD_SUBREAPER in a throwaway child, so this process keeps its own state. */
async function subreaperRow(binding: NativeBinding | null): Promise<DoctorRow> {
  if (process.platform !== "linux") return { capability: "subreaper", ok: false, detail: `Linux only (this is ${process.platform})` };
  if (binding === null) return { capability: "subreaper", ok: false, detail: `needs the native addon: ${nativeWhy()}` };
  const nativeUrl = new URL("../../facts/native.js", import.meta.url).href;
  const script =
    'const m = await import(process.argv[1]); const b = m.loadNative();' +
    'process.stdout.write(b === null ? "noaddon" : String(b.setChildSubreaper()));';
  const out = await new Promise<string>((resolve) => {
    execFile(process.execPath, ["--input-type=module", "-e", script, nativeUrl], { timeout: 10_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve(err === null ? stdout.trim() : `error: ${(stderr.trim().split("\n").pop() ?? "") || err.message}`),
    );
  });
  if (out === "0") return { capability: "subreaper", ok: true, detail: "prctl(PR_SET_CHILD_SUBREAPER) succeeded in a test child" };
  if (/^-\d+$/.test(out)) return { capability: "subreaper", ok: false, detail: `prctl(PR_SET_CHILD_SUBREAPER) failed with errno ${-Number(out)} (kernel ${release()})` };
  return { capability: "subreaper", ok: false, detail: `check could not run: ${out}` };
}

async function foreignEnvRow(facts: ProcessFacts): Promise<DoctorRow> {
  const cap = "foreign-env";
  if (process.pid === 1) return { capability: cap, ok: false, detail: "this process is pid 1: no other process to test against" };
  if (process.platform === "linux") {
    try {
      const fh = await fsp.open("/proc/1/environ", "r");
      await fh.close();
      return { capability: cap, ok: true, detail: "/proc/1/environ is readable: lease ids in other processes' environments can be checked" };
    } catch (err) {
      const code = (err as { code?: string }).code ?? "error";
      return { capability: cap, ok: false, detail: `/proc/1/environ: ${code}; the lease-id environment check reports "unknown"` };
    }
  }
  if (facts.backend === "none") return { capability: cap, ok: false, detail: "backend none reads nothing" };
  try {
    const d = await facts.inspect(1, { envKeys: ["PATH"] });
    const ok = d?.envReadable === true;
    return { capability: cap, ok, detail: ok ? `pid 1's environment is readable via ${facts.backend}` : `pid 1's environment is not readable via ${facts.backend}` };
  } catch (err) {
    return { capability: cap, ok: false, detail: err instanceof Error ? err.message : String(err) };
  }
}

async function visibilityRow(): Promise<DoctorRow> {
  const cap = "proc-visibility";
  if (process.platform !== "linux") return { capability: cap, ok: true, detail: `no /proc hidepid on ${process.platform}` };
  let mounts: string;
  try {
    mounts = await fsp.readFile("/proc/mounts", "utf8");
  } catch (err) {
    return { capability: cap, ok: false, detail: `/proc/mounts unreadable: ${(err as { code?: string }).code ?? String(err)}` };
  }
  const opts = procMountOptions(mounts);
  if (opts === null) return { capability: cap, ok: false, detail: "/proc is not mounted" };
  const hp = hidepidOf(opts);
  if (hp === null) return { capability: cap, ok: true, detail: `/proc mounted without hidepid (${opts.join(",")}): every process is visible` };
  return { capability: cap, ok: false, detail: `/proc mounted with hidepid=${hp}: other users' processes are hidden or opaque` };
}

export async function collectDoctorRows(facts: ProcessFacts, forced: string | undefined): Promise<DoctorRow[]> {
  const binding = loadNative();
  return [
    backendRow(facts, forced, binding),
    identityRow(facts),
    pidfdRow(binding),
    await subreaperRow(binding),
    await foreignEnvRow(facts),
    await visibilityRow(),
  ];
}

export async function run(args: readonly string[], io: CliIo): Promise<number> {
  const { flags, positionals } = parseArgs(args, { booleans: ["json"], strings: ["backend"] });
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const facts = factsFromFlag(flags.backend);
  const forced = typeof flags.backend === "string" && flags.backend !== "auto" ? flags.backend : undefined;
  const rows = await collectDoctorRows(facts, forced);
  if (flags.json === true) {
    io.out(JSON.stringify({ backend: facts.backend, identityStrength: facts.identityStrength, rows }) + "\n");
    return 0;
  }
  const w = Math.max(...rows.map((r) => r.capability.length));
  io.out(backendLine(facts) + rows.map((r) => `${r.capability.padEnd(w)}  ${r.ok ? "yes" : "no "}  ${r.detail}`).join("\n") + "\n");
  return 0;
}
