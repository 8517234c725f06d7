/**
 * OpenClaw's `/acp doctor` for this backend: the rows `proclease doctor`
 * prints (ownership/host/doctor-rows.ts: facts backend, identity strength,
 * pidfd, subreaper, other environments, /proc visibility, containment, the
 * state dir's orphan cgroups), what this gateway's controller got
 * (containment as applied, its instance id), and whether each agent's
 * adapter can be found. `ok` is false when nothing could be verified (facts
 * backend none: every cleanup would leave processes alone), when the
 * controller did not start, or when an agent's executable is missing.
 */
import { constants as fsc, promises as fsp } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { collectDoctorRows } from "../ownership/host/doctor-rows.js";
import type { ProcessFacts } from "../facts/types.js";
import type { AcpxLifecycleController } from "../acpx/controller/types.js";
import type { ResolvedAgent } from "./options.js";
import type { OpenClawDoctorReport } from "./types.js";

export interface DoctorContext {
  backendId: string;
  stateDir: string;
  facts: ProcessFacts;
  agents: ReadonlyMap<string, ResolvedAgent>;
  /** the controller, or why it could not start */
  controller: () => Promise<{ ok: true; ctl: AcpxLifecycleController } | { ok: false; why: string }>;
}

export async function doctorReport(c: DoctorContext): Promise<OpenClawDoctorReport> {
  const rows = await collectDoctorRows(c.facts, undefined, c.stateDir);
  const ctl = await c.controller();
  const agents = await Promise.all(
    [...c.agents.values()].map(async (a) => ({
      name: a.name,
      found: await findExecutable(a.config.command[0]!),
      command: a.config.command,
    })),
  );
  const missing = agents.filter((a) => a.found === null);
  const details = [
    ...rows.map((r) => `${r.capability}: ${r.ok ? "yes" : "no"}, ${r.detail}`),
    ctl.ok
      ? `gateway: instance ${ctl.ctl.gatewayInstanceId}, state dir ${c.stateDir}, containment ${ctl.ctl.containment.available ? `on (${ctl.ctl.containment.root})` : `off: ${ctl.ctl.containment.why}`}`
      : `gateway: the controller did not start: ${ctl.why}`,
    ...agents.map(
      (a) =>
        `agent ${a.name}: ${a.found ?? `NOT FOUND: ${JSON.stringify(a.command[0])}`} (${a.command.length} argv entries)`,
    ),
  ];
  const containment = ctl.ok
    ? ctl.ctl.containment.available
      ? "containment on"
      : "containment off"
    : "controller not started";
  const message = `proclease backend "${c.backendId}": facts ${c.facts.backend} (${c.facts.identityStrength} identity), ${containment}, ${agents.length} agent${agents.length === 1 ? "" : "s"}`;
  if (c.facts.backend === "none") {
    return {
      ok: false,
      code: "FACTS_UNAVAILABLE",
      message: `${message}: no facts backend, so no process can be verified and none is ever signalled`,
      details,
    };
  }
  if (!ctl.ok) return { ok: false, code: "BACKEND_UNAVAILABLE", message: `${message}: ${ctl.why}`, details };
  if (missing.length > 0) {
    return {
      ok: false,
      code: "AGENT_COMMAND_MISSING",
      message: `${message}: ${missing.map((a) => `${a.name} (${JSON.stringify(a.command[0])})`).join(", ")} not found`,
      details,
    };
  }
  return { ok: true, message, details };
}

/** The executable's path when it exists and may be run: an absolute or relative path as given, a bare name on PATH. */
async function findExecutable(cmd: string): Promise<string | null> {
  const candidates = cmd.includes("/")
    ? [cmd]
    : (process.env.PATH ?? "")
        .split(delimiter)
        .filter((d) => isAbsolute(d))
        .map((d) => join(d, cmd));
  for (const p of candidates) {
    try {
      await fsp.access(p, fsc.X_OK);
      if ((await fsp.stat(p)).isFile()) return p;
    } catch {
      // not here
    }
  }
  return null;
}
