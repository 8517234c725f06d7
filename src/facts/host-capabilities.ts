/**
 * What this host allows a process-facts reader, one row per capability, each
 * with yes/no and the reason: the rows `proclease doctor` and the plugin's
 * doctor both print. Every check is a real attempt (load the addon, open
 * pidfds, set the subreaper bit in a throwaway child, read pid 1's
 * environment), never a guess from the platform name. Rows that depend on
 * the facts backend (identity, signals, environments) describe the backend
 * that was asked, not the best one the host has.
 */
import { execFile } from "node:child_process";
import { promises as fsp } from "node:fs";
import { release } from "node:os";
import { describeBackendChoice, type BackendChoiceCode } from "./get.js";
import { loadError } from "./native.js";
import { createSignaller } from "./signal.js";
import type { NativeBinding } from "./native-binding.js";
import { hidepidOf, procMountOptions } from "./procfs.js";
import type { ProcessFacts } from "./types.js";

export interface DoctorRow {
  capability: string;
  ok: boolean;
  /** why, where a row has more than one (the backend choice, pidfd, foreign environments) */
  code?: DoctorCode;
  detail: string;
}

/** A row's why, for code to read: the backend's choice (BackendChoiceCode, or forced), pidfd's, foreign-env's. */
export type DoctorCode =
  | BackendChoiceCode
  | "forced"
  | "not-linux"
  | "no-addon"
  | "kernel-refuses-pidfd"
  | "backend-none"
  | "not-race-free"
  | "race-free"
  | "ps-reads-no-env"
  | "pid-1"
  | "env-readable"
  | "env-unreadable";

function nativeWhy(): string {
  return loadError() ?? `not built for ${process.platform}`;
}

function backendRow(facts: ProcessFacts, forced: string | undefined, binding: NativeBinding | null): DoctorRow {
  const choice = forced !== undefined ? null : describeBackendChoice();
  const how = choice === null ? `forced by --backend ${forced}` : choice.reason;
  let native = "";
  // the auto choice already says why the addon was not used; a forced or env choice does not
  if (facts.backend !== "native" && choice?.code !== "native-unavailable") {
    native =
      binding === null ? `; native addon unavailable: ${nativeWhy()}` : "; native addon loads but was not chosen";
  }
  return {
    capability: "backend",
    ok: facts.backend !== "none",
    code: choice?.code ?? "forced",
    detail: `${facts.backend}: ${how}${native}`,
  };
}

function identityRow(facts: ProcessFacts): DoctorRow {
  const detail = {
    exact: "start times are unique per process (Linux clock ticks + boot id, macOS µs)",
    coarse: "ps lstart: one-second start times; a pid reused within the same second looks identical",
    none: "nothing can be verified: every ownership check fails closed",
  }[facts.identityStrength];
  return {
    capability: "identity",
    ok: facts.identityStrength === "exact",
    detail: `${facts.identityStrength}: ${detail}`,
  };
}

/** Whether the signaller built for THIS backend (facts/signal.ts decides) checks and sends without a window. */
function pidfdRow(facts: ProcessFacts, binding: NativeBinding | null): DoctorRow {
  const cap = "pidfd";
  if (process.platform !== "linux")
    return {
      capability: cap,
      ok: false,
      code: "not-linux",
      detail: `Linux only (this is ${process.platform}): check-then-kill has a pid-reuse window`,
    };
  if (binding === null)
    return { capability: cap, ok: false, code: "no-addon", detail: `needs the native addon: ${nativeWhy()}` };
  if (!binding.pidfdSupported())
    return {
      capability: cap,
      ok: false,
      code: "kernel-refuses-pidfd",
      detail: `kernel ${release()} refuses pidfd_open/pidfd_send_signal (needs Linux >= 5.3)`,
    };
  if (facts.backend === "none")
    return {
      capability: cap,
      ok: false,
      code: "backend-none",
      detail: "the kernel supports pidfd, but backend none verifies nothing, so it signals nothing",
    };
  if (!createSignaller(facts, binding).raceFree) {
    return {
      capability: cap,
      ok: false,
      code: "not-race-free",
      detail: `the kernel supports pidfd, but ${facts.backend} start times are not the kernel's clock ticks: signals are inspect-then-kill, NOT race-free`,
    };
  }
  return {
    capability: cap,
    ok: true,
    code: "race-free",
    detail: `pidfd_open + pidfd_send_signal work with ${facts.backend} start times: identity-checked signals are race-free`,
  };
}

/** Sets PR_SET_CHILD_SUBREAPER in a throwaway child, so this process keeps its own state. */
async function subreaperRow(binding: NativeBinding | null): Promise<DoctorRow> {
  if (process.platform !== "linux")
    return { capability: "subreaper", ok: false, detail: `Linux only (this is ${process.platform})` };
  if (binding === null) return { capability: "subreaper", ok: false, detail: `needs the native addon: ${nativeWhy()}` };
  const nativeUrl = new URL("./native.js", import.meta.url).href;
  const script =
    "const m = await import(process.argv[1]); const b = m.loadNative();" +
    'process.stdout.write(b === null ? "noaddon" : String(b.setChildSubreaper()));';
  const out = await new Promise<string>((resolve) => {
    execFile(
      process.execPath,
      ["--input-type=module", "-e", script, nativeUrl],
      { timeout: 10_000, encoding: "utf8" },
      (err, stdout, stderr) =>
        resolve(err === null ? stdout.trim() : `error: ${(stderr.trim().split("\n").pop() ?? "") || err.message}`),
    );
  });
  if (out === "0")
    return { capability: "subreaper", ok: true, detail: "prctl(PR_SET_CHILD_SUBREAPER) succeeded in a test child" };
  if (/^-\d+$/.test(out))
    return {
      capability: "subreaper",
      ok: false,
      detail: `prctl(PR_SET_CHILD_SUBREAPER) failed with errno ${-Number(out)} (kernel ${release()})`,
    };
  return { capability: "subreaper", ok: false, detail: `check could not run: ${out}` };
}

async function foreignEnvRow(facts: ProcessFacts): Promise<DoctorRow> {
  const cap = "foreign-env";
  if (facts.backend === "none")
    return { capability: cap, ok: false, code: "backend-none", detail: "backend none reads nothing" };
  if (facts.backend === "ps")
    return {
      capability: cap,
      ok: false,
      code: "ps-reads-no-env",
      detail: 'the ps backend reads no environments: the lease-env and marker checks report "unknown"',
    };
  if (process.pid === 1)
    return {
      capability: cap,
      ok: false,
      code: "pid-1",
      detail: "this process is pid 1: no other process to test against",
    };
  if (process.platform === "linux") {
    try {
      const fh = await fsp.open("/proc/1/environ", "r");
      await fh.close();
      return {
        capability: cap,
        ok: true,
        code: "env-readable",
        detail: "/proc/1/environ is readable: lease ids in other processes' environments can be checked",
      };
    } catch (err) {
      const code = (err as { code?: string }).code ?? "error";
      return {
        capability: cap,
        ok: false,
        code: "env-unreadable",
        detail: `/proc/1/environ: ${code}; the lease-id environment check reports "unknown"`,
      };
    }
  }
  try {
    const d = await facts.inspect(1, { envKeys: ["PATH"] });
    const ok = d?.envReadable === true;
    return {
      capability: cap,
      ok,
      code: ok ? "env-readable" : "env-unreadable",
      detail: ok
        ? `pid 1's environment is readable via ${facts.backend}`
        : `pid 1's environment is not readable via ${facts.backend}`,
    };
  } catch (err) {
    return {
      capability: cap,
      ok: false,
      code: "env-unreadable",
      detail: err instanceof Error ? err.message : String(err),
    };
  }
}

async function visibilityRow(): Promise<DoctorRow> {
  const cap = "proc-visibility";
  if (process.platform !== "linux")
    return { capability: cap, ok: true, detail: `no /proc hidepid on ${process.platform}` };
  let mounts: string;
  try {
    mounts = await fsp.readFile("/proc/mounts", "utf8");
  } catch (err) {
    return {
      capability: cap,
      ok: false,
      detail: `/proc/mounts unreadable: ${(err as { code?: string }).code ?? String(err)}`,
    };
  }
  const opts = procMountOptions(mounts);
  if (opts === null) return { capability: cap, ok: false, detail: "/proc is not mounted" };
  const hp = hidepidOf(opts);
  if (hp === null)
    return {
      capability: cap,
      ok: true,
      detail: `/proc mounted without hidepid (${opts.join(",")}): every process is visible`,
    };
  return {
    capability: cap,
    ok: false,
    detail: `/proc mounted with hidepid=${hp}: other users' processes are hidden or opaque`,
  };
}

/** The facts rows, in the order doctor prints them; `forced` is the backend a caller forced (--backend), if any. */
export async function hostCapabilityRows(
  facts: ProcessFacts,
  forced: string | undefined,
  binding: NativeBinding | null,
): Promise<DoctorRow[]> {
  return [
    backendRow(facts, forced, binding),
    identityRow(facts),
    pidfdRow(facts, binding),
    await subreaperRow(binding),
    await foreignEnvRow(facts),
    await visibilityRow(),
  ];
}
