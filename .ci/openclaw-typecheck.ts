// Type-checks proclease/openclaw against OpenClaw's own AcpRuntime declaration
// (tsc --noEmit, run by .ci/run's openclaw step on a temp install).
//
// Pinned to openclaw@2026.9.6: no typed export of that version carries
// AcpRuntime (plugin-sdk/acp-runtime ships JavaScript only); the interface
// is declared in an internal chunk, dist/types.openclaw-mR7pAsVG.d.ts,
// which exports it under the bundler's alias `ot`. The step maps the
// specifier "openclaw-acp-runtime-types" to that file by path (tsconfig
// `paths`) and first checks that the file still says `AcpRuntime as ot`,
// so another version fails loudly there instead of checking the wrong type.
import type { ot as AcpRuntime } from "openclaw-acp-runtime-types";
import { createOpenClawAcpRuntime } from "proclease/openclaw";

// the contract's assignment: what createOpenClawAcpRuntime returns is an AcpRuntime
export const runtime: AcpRuntime = createOpenClawAcpRuntime({
  stateDir: "/var/lib/gateway/proclease",
  agents: { codex: { command: ["npx", "@zed-industries/codex-acp"] } },
});

// and every optional member OpenClaw can use is there, with OpenClaw's signature
type Optional =
  | "ownerAwareSessions"
  | "startTurn"
  | "getCapabilities"
  | "getStatus"
  | "setMode"
  | "setConfigOption"
  | "doctor"
  | "prepareFreshSession";
export const complete: Required<Pick<AcpRuntime, Optional>> = createOpenClawAcpRuntime({
  stateDir: "/var/lib/gateway/proclease",
  backendId: "leased",
  agents: { fixture: { command: ["node", "agent.mjs"], env: { A: "1" }, cwd: "/srv" } },
});

// the check can fail: an object without close() is not an AcpRuntime (were the
// import to resolve to `any`, this directive would be unused, which is an error)
// @ts-expect-error close is missing
export const incomplete: AcpRuntime = {
  ensureSession: runtime.ensureSession,
  runTurn: runtime.runTurn,
  cancel: runtime.cancel,
};
