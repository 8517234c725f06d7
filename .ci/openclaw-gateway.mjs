// One OpenClaw gateway incarnation for .ci/openclaw-check.mjs, run by the
// Node OpenClaw needs (>= 24.16). It loads proclease the way OpenClaw loads
// a plugin (package.json `openclaw.extensions` of the installed package,
// `register(api)`, the service's start with OpenClaw's state dir), so the
// backend reaches OpenClaw's registry through the host SDK the plugin
// imports itself. Then it serves the checker: one JSON request per stdin
// line, `{ id, op, args }`, each run on OpenClaw's own session manager
// (getAcpSessionManager()) and answered `{ id, ok, value | error, ms }`;
// runTurn's onEvent events go out as `{ id, event }` while the turn runs.
// Requests run concurrently (a cancel reaches a running turn).
//
// env: OPENCLAW_DIR (a folder with node_modules/openclaw and
// node_modules/proclease), CHECK_CFG (OpenClaw's config, JSON: the manager's
// cfg, and the plugin's config under plugins.entries), OPENCLAW_STATE_DIR.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const t0 = performance.now();
const dir = process.env.OPENCLAW_DIR;
const hostRequire = createRequire(join(dir, "package.json"));
const out = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

const sdk = await import(pathToFileURL(hostRequire.resolve("openclaw/plugin-sdk/acp-runtime")).href);
const pkgDir = dirname(hostRequire.resolve("proclease/package.json"));
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const entry = (await import(pathToFileURL(join(pkgDir, pkg.openclaw.extensions[0])).href)).default;

const services = [];
const logs = [];
const logger = {
  info: (m) => logs.push(m),
  warn: (m) => logs.push(`warn: ${m}`),
  error: (m) => logs.push(`error: ${m}`),
  debug: () => {},
};
const cfg = JSON.parse(process.env.CHECK_CFG);
// the plugin's config as OpenClaw hands it over: plugins.entries.<id>.config
entry.register({
  id: entry.id,
  registrationMode: "full",
  pluginConfig: cfg.plugins.entries[entry.id].config,
  logger,
  registerService: (s) => services.push(s),
});
const ctx = { stateDir: process.env.OPENCLAW_STATE_DIR, logger };
for (const s of services) await s.start(ctx);
const backend = sdk.getAcpRuntimeBackend(cfg.acp.backend);
const manager = sdk.getAcpSessionManager();
out({
  ready: true,
  ms: performance.now() - t0,
  node: process.version,
  pid: process.pid,
  backend: backend?.id ?? null,
  healthy: backend?.healthy?.() ?? null,
  logs,
});

function errorOf(e) {
  const chain = [];
  for (let c = e; c instanceof Error && chain.length < 6; c = c.cause)
    chain.push({ name: c.name, code: c.code, detailCode: c.detailCode, message: c.message });
  return chain;
}

const ops = {
  initializeSession: async (a) => {
    const r = await manager.initializeSession({ cfg, ...a });
    return { handle: r.handle, meta: r.meta };
  },
  runTurn: async (a, id) => {
    const requestId = a.requestId ?? randomUUID();
    await manager.runTurn({
      cfg,
      mode: "prompt",
      ...a,
      requestId,
      admittedRunContext: { operationalRunInstance: { runId: requestId, instanceId: randomUUID() } },
      onEvent: (event) => out({ id, event }),
    });
    return { requestId };
  },
  cancelSession: (a) => manager.cancelSession({ cfg, ...a }),
  getSessionStatus: (a) => manager.getSessionStatus({ cfg, ...a }),
  setSessionRuntimeMode: (a) => manager.setSessionRuntimeMode({ cfg, ...a }),
  setSessionConfigOption: (a) => manager.setSessionConfigOption({ cfg, ...a }),
  closeSession: (a) => manager.closeSession({ cfg, ...a }),
  doctor: () => backend.runtime.doctor(),
  runtimeStatus: (a) => backend.runtime.getStatus(a),
  stop: async () => {
    for (const s of services) await s.stop(ctx);
    return { stopped: services.length };
  },
};

for await (const line of createInterface({ input: process.stdin })) {
  const { id, op, args } = JSON.parse(line);
  const t = performance.now();
  Promise.resolve()
    .then(() => ops[op](args ?? {}, id))
    .then(
      (value) => out({ id, ok: true, value: value ?? null, ms: performance.now() - t }),
      (e) => out({ id, ok: false, error: errorOf(e), ms: performance.now() - t }),
    );
}
