/**
 * The adapter's diagnostics below the controller, with real processes: the bundled wrapper
 * (dist/acpx/wrapper.cjs) around the fixture ACP agent, spoken to through the
 * controller's own ACP client. Covers the adapter's stderr ring, the
 * environment the adapter really gets (envRemove, markers), how a session's
 * end is named (a SIGKILLed wrapper is never blamed on the adapter), the
 * handshake (auth methods, authenticate, protocol version, error data) and
 * bounded turns (timeout, abort, a deaf agent, an error answer).
 * Build first (`npm run build`): the wrapper runs from dist/.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AcpClient } from "../../src/acpx/connection/acp-client.js";
import { explainHandshakeFailure, handshake, type HandshakeOptions } from "../../src/acpx/connection/handshake.js";
import { HandshakeFailure } from "../../src/acpx/connection/handshake-steps.js";
import { startTurn } from "../../src/acpx/connection/prompt-turn.js";
import {
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  diagnosticsNote,
} from "../../src/acpx/report/errors.js";
import { packagedWrapperPath } from "../../src/acpx/launch/install-wrapper.js";
import { parseEnsureInput } from "../../src/acpx/sessions/ensure-input.js";
import { launchWrapper, type LaunchedWrapper, type LaunchInput } from "../../src/acpx/launch/launch.js";
import { ByteRing, STDERR_RING_BYTES } from "../../src/acpx/launch/stderr-ring.js";
import { describeEnd } from "../../src/acpx/launch/wrapper-end.js";
import { assertEnvRemove, buildWrapperEnv } from "../../src/acpx/launch/wrapper-env.js";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../../src/ownership/leases/types.js";
import {
  AGENT,
  alive,
  cleanupAll,
  GRACE_MS,
  readPidfile,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
  environOf,
} from "./controller-helpers.js";

const GW = `gw-diag-${process.pid}`;
const open: { l: LaunchedWrapper; client: AcpClient }[] = [];

afterEach(async () => {
  for (const { l, client } of open.splice(0)) {
    client.close();
    l.endLifeline();
    l.stdin.destroy();
    await l.waitExit(GRACE_MS + 5000);
  }
  cleanupAll();
});

function launch(
  agentFlags: string[],
  extra: Partial<LaunchInput> = {},
): { l: LaunchedWrapper; client: AcpClient; leaseId: string } {
  const leaseId = `diag-${randomUUID()}`;
  trackLease(leaseId);
  const l = launchWrapper({
    nodePath: process.execPath,
    wrapperPath: packagedWrapperPath(),
    command: [process.execPath, AGENT, ...agentFlags],
    graceMs: GRACE_MS,
    leaseId,
    gatewayInstanceId: GW,
    ...extra,
  });
  trackChild(l.child);
  const client = new AcpClient({ input: l.stdout, output: l.stdin });
  open.push({ l, client });
  return { l, client, leaseId };
}

async function started(l: LaunchedWrapper): Promise<{ wrapperPid: number; adapterPid: number }> {
  const s = await l.waitStart(15_000);
  if (s.kind !== "started") throw new Error(`wrapper did not start: ${JSON.stringify(s)}`);
  return s.report;
}

function hs(client: AcpClient, l: LaunchedWrapper, extra: Partial<HandshakeOptions> = {}) {
  return handshake(client, { cwd: process.cwd(), timeoutMs: 15_000, ended: l.ended, ...extra });
}

/** the handshake's failure, explained as ensureSession explains it */
async function failedHandshake(client: AcpClient, l: LaunchedWrapper, extra: Partial<HandshakeOptions> = {}) {
  const err = await hs(client, l, extra).then(
    () => {
      throw new Error("the handshake succeeded");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HandshakeFailure);
  return { failure: err as HandshakeFailure, ...(await explainHandshakeFailure(err, l)) };
}

describe("ByteRing: the adapter's recent stderr, bounded", () => {
  it("keeps at most cap bytes, the most recent ones, over many chunks", () => {
    const ring = new ByteRing(STDERR_RING_BYTES);
    let all = "";
    for (let i = 0; i < 2000; i++) {
      const line = `line ${i} ${"y".repeat(40)}\n`;
      all += line;
      ring.push(Buffer.from(line));
    }
    const text = ring.text();
    expect(Buffer.byteLength(text)).toBe(STDERR_RING_BYTES);
    expect(all.endsWith(text)).toBe(true);
    expect(ring.dropped).toBeGreaterThan(0);
  });

  it("cuts one oversized chunk to the cap and never starts inside a UTF-8 sequence", () => {
    const ring = new ByteRing(1001); // odd: a two-byte "é" is always split at the cut
    ring.push(Buffer.from("é".repeat(4000)));
    const text = ring.text();
    expect(text.includes("\uFFFD")).toBe(false);
    expect(text).toBe("é".repeat(500));
  });

  it("keeps short output whole", () => {
    const ring = new ByteRing(64);
    ring.push(Buffer.from("one\n"));
    ring.push(Buffer.from("two\n"));
    expect(ring.text()).toBe("one\ntwo\n");
    expect(ring.dropped).toBe(0);
  });
});

describe("diagnosticsNote", () => {
  it("keeps the error data and, when asked, the last stderr lines, without colour codes", () => {
    const stderrTail = [
      "first",
      "\u001b[2m2026-12-01T03:27:24Z\u001b[0m \u001b[31mERROR\u001b[0m codex_acp::thread: failed to connect",
      "last",
    ].join("\n");
    const d = { acpError: { code: -32603, message: "Internal error", data: { details: "Query closed" } }, stderrTail };
    expect(diagnosticsNote(d, true)).toBe(
      '; error data: {"details":"Query closed"}; adapter stderr: first | 2026-12-01T03:27:24Z ERROR codex_acp::thread: failed to connect | last',
    );
  });

  it("by default keeps stderr out of the message: it can echo prompt text into gateway logs", () => {
    const d = { acpError: { code: -32603, message: "Internal error" }, stderrTail: "user said: my secret prompt\n" };
    const note = diagnosticsNote(d);
    expect(note).not.toContain("secret");
    expect(note).toBe(
      `; the adapter wrote ${Buffer.byteLength(d.stderrTail)} bytes of stderr (in the error's stderrTail)`,
    );
  });
});

describe("envRemove: the environment the adapter really gets", () => {
  const SECRET_A = "PROCLEASE_TEST_PROVIDER_KEY_A";
  const SECRET_B = "PROCLEASE_TEST_PROVIDER_KEY_B";
  const KEPT = "PROCLEASE_TEST_KEPT";

  it("the adapter (read from /proc/<pid>/environ) lacks the removed keys and carries the rest and both markers", async () => {
    process.env[SECRET_A] = "sk-a";
    process.env[SECRET_B] = "sk-b";
    process.env[KEPT] = "kept";
    try {
      const pidfile = join(tempStateDir("envremove"), "agent.json");
      const { l, leaseId } = launch([`--pidfile=${pidfile}`], {
        envRemove: [SECRET_A, SECRET_B],
        env: { PROCLEASE_TEST_ADDED: "added" },
      });
      const { wrapperPid } = await started(l);
      const { pid } = await readPidfile(pidfile);
      for (const p of [wrapperPid, pid]) {
        const env = environOf(p);
        expect(env.has(SECRET_A)).toBe(false);
        expect(env.has(SECRET_B)).toBe(false);
        expect(env.get(KEPT)).toBe("kept");
        expect(env.get("PROCLEASE_TEST_ADDED")).toBe("added");
        expect(env.get(LEASE_ENV_KEY)).toBe(leaseId);
        expect(env.get(INSTANCE_ENV_KEY)).toBe(GW);
      }
    } finally {
      delete process.env[SECRET_A];
      delete process.env[SECRET_B];
      delete process.env[KEPT];
    }
  });

  it("refuses to remove either marker, naming both, before anything is spawned", () => {
    for (const key of [LEASE_ENV_KEY, INSTANCE_ENV_KEY]) {
      expect(() => assertEnvRemove(["SOME_KEY", key])).toThrow(TypeError);
      expect(() => assertEnvRemove([key])).toThrow(new RegExp(`${LEASE_ENV_KEY} and ${INSTANCE_ENV_KEY}`));
      expect(() => parseEnsureInput({ sessionKey: "k", agentId: "a", command: ["true"], envRemove: [key] })).toThrow(
        TypeError,
      );
      // past the edge the markers hold by construction: set last, whatever envRemove names
      expect(
        buildWrapperEnv({ envRemove: [key], leaseId: "x", gatewayInstanceId: "y" }, { [key]: "inherited" })[key],
      ).toBe(key === LEASE_ENV_KEY ? "x" : "y");
    }
    expect(() => assertEnvRemove("KEY")).toThrow(TypeError);
    expect(() => assertEnvRemove([""])).toThrow(TypeError);
    expect(() => assertEnvRemove(["A=B"])).toThrow(TypeError);
  });

  it("an explicit env value wins over a removal, and the markers win over env", () => {
    const env = buildWrapperEnv(
      {
        envRemove: ["K1", "K2"],
        env: { K2: "explicit", [LEASE_ENV_KEY]: "forged" },
        leaseId: "real-lease",
        gatewayInstanceId: "real-gw",
      },
      { K1: "inherited", K2: "inherited", K3: "kept" },
    );
    expect(env).toEqual({ K2: "explicit", K3: "kept", [LEASE_ENV_KEY]: "real-lease", [INSTANCE_ENV_KEY]: "real-gw" });
  });
});

describe("how a session ended", () => {
  it("a SIGKILLed wrapper is named as the wrapper's death, not the adapter's", async () => {
    const { l } = launch([]);
    const { wrapperPid } = await started(l);
    process.kill(wrapperPid, "SIGKILL");
    const end = await l.ended;
    expect(end).toEqual({ kind: "wrapper-killed", wrapperPid, signal: "SIGKILL" });
    const text = describeEnd(end);
    expect(text).toContain(`the wrapper (pid ${wrapperPid}) was killed by SIGKILL`);
    expect(text).not.toContain("the adapter exited");
  });

  it("an adapter that dies is reported by the wrapper as the adapter's exit", async () => {
    const { l } = launch([]);
    const { adapterPid } = await started(l);
    process.kill(adapterPid, "SIGKILL");
    const end = await l.ended;
    expect(end).toEqual({ kind: "adapter-exited", code: null, signal: "SIGKILL" });
    expect(describeEnd(end)).toBe("the adapter exited (signal SIGKILL)");
  });
});

describe("handshake", () => {
  it("with --require-auth and no method: auth-required, listing the agent's methods", async () => {
    const { l, client } = launch(["--require-auth=key-a,key-b"]);
    await started(l);
    const r = await failedHandshake(client, l);
    expect(r.failure.kind).toBe("auth-required");
    expect(r.cause).toBe("auth-required");
    expect(r.details.authMethods?.map((m) => m.id)).toEqual(["key-a", "key-b"]);
    expect(r.message).toContain("key-a (Fixture method key-a), key-b (Fixture method key-b)");
    expect(r.details.acpError?.code).toBe(-32000);
  });

  it("with a method id the agent offers: authenticate, then a session", async () => {
    const { l, client } = launch(["--require-auth=key-a,key-b"]);
    await started(l);
    const res = await hs(client, l, { auth: { methodId: "key-b" } });
    expect(res.authenticatedWith).toBe("key-b");
    expect(res.sessionId).toMatch(/^fixture-/);
    // the agent saw it: its stderr says so
    expect(await waitFor(() => l.stderrTail().includes("authenticated with key-b"), 5000)).toBeGreaterThanOrEqual(0);
  });

  it("a resolver picks from the advertised methods", async () => {
    const { l, client } = launch(["--require-auth=key-a,key-b"]);
    await started(l);
    const seen: string[][] = [];
    const res = await hs(client, l, {
      auth: (methods) => {
        seen.push(methods.map((m) => m.id));
        return methods.find((m) => m.id === "key-a")?.id;
      },
    });
    expect(seen).toEqual([["key-a", "key-b"]]);
    expect(res.authenticatedWith).toBe("key-a");
  });

  it("a method the agent does not offer fails auth-failed before authenticate is sent", async () => {
    const { l, client } = launch(["--require-auth=key-a"]);
    await started(l);
    const r = await failedHandshake(client, l, { auth: { methodId: "other" } });
    expect(r.cause).toBe("auth-failed");
    expect(r.message).toContain('auth method "other" is not one the agent offers; the agent offers: key-a');
    expect(l.stderrTail()).not.toContain("authenticate: unknown method");
  });

  it("a protocol version this client cannot speak fails clearly", async () => {
    for (const v of [2, 0]) {
      const { l, client } = launch([`--protocol-version=${v}`]);
      await started(l);
      const r = await failedHandshake(client, l);
      expect(r.cause).toBe("protocol-version");
      expect(r.details.agentProtocolVersion).toBe(v);
      expect(r.message).toContain(
        `ACP protocol version ${v}; this client (@agentclientprotocol/sdk, v1) speaks 1 only`,
      );
    }
  });

  it("an error answer keeps its data, and the stderr tail (bounded to 16 KB) holds the cause", async () => {
    const { l, client } = launch(["--error-on=session/new", "--stderr-noise=60000"]);
    await started(l);
    const r = await failedHandshake(client, l);
    expect(r.cause).toBe("handshake-error");
    expect(r.details.acpError).toEqual({
      code: -32603,
      message: "Internal error",
      data: { fixture: "error-on", method: "session/new" },
    });
    expect(r.message).toContain('error data: {"fixture":"error-on","method":"session/new"}');
    // stderr stays in the field; the message only says how much there is
    expect(r.message).not.toContain("fixture cause: session/new refused on purpose");
    expect(r.message).toMatch(/the adapter wrote \d+ bytes of stderr \(in the error's stderrTail\)/);
    const tail = r.details.stderrTail!;
    expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(STDERR_RING_BYTES);
    expect(tail).toContain("fixture cause: session/new refused on purpose");
    expect(tail).not.toContain("noise line 0 "); // the first of ~60 KB was dropped
  });

  it("an adapter that crashes during initialize is named, with its stderr", async () => {
    const { l, client } = launch(["--crash-on=initialize"]);
    await started(l);
    const r = await failedHandshake(client, l);
    expect(r.cause).toBe("adapter-exited");
    expect(r.message).toContain("the adapter exited during ACP initialize (exit code 3)");
    expect(r.details.stderrTail).toContain("crashing on initialize as asked");
    expect(r.message).not.toContain("crashing on initialize as asked");
  });

  it("a wrapper SIGKILLed mid-handshake ends the wait at once and is named as the wrapper's death", async () => {
    // --survive-stdin-close: Node destroys our end of stdin when the wrapper exits
    const { l, client } = launch(["--never-answer", "--survive-stdin-close"]);
    const { wrapperPid, adapterPid } = await started(l);
    const pending = failedHandshake(client, l);
    process.kill(wrapperPid, "SIGKILL");
    const t0 = Date.now();
    const r = await pending;
    expect(Date.now() - t0).toBeLessThan(10_000); // not the 15 s step timeout
    expect(r.failure.kind).toBe("ended");
    expect(r.cause).toBe("wrapper-failed");
    expect(r.message).toContain(`the wrapper (pid ${wrapperPid}) was killed by SIGKILL`);
    expect(r.message).not.toContain("the adapter exited");
    // the adapter is not the wrapper: it outlived it (the lease's reaper finds it by its markers)
    expect(alive(adapterPid)).toBe(true);
  });
});

describe("bounded turns", () => {
  async function session(flags: string[]) {
    const s = launch(flags);
    await started(s.l);
    const res = await hs(s.client, s.l);
    const turn = (text: string, options?: Parameters<typeof startTurn>[1]["options"]) =>
      startTurn(s.client, {
        sessionKey: "k",
        acpSessionId: res.sessionId,
        prompt: text,
        launched: s.l,
        ...(options ? { options } : {}),
      });
    return { ...s, turn };
  }

  it("timeout: session/cancel is sent, the agent ends the turn, AcpxPromptTimeoutError; the next prompt works", async () => {
    const { turn } = await session(["--turn=by-text"]);
    const t = turn("hang", { timeoutMs: 300 });
    const err = await t.result.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpxPromptTimeoutError);
    const e = err as AcpxPromptTimeoutError;
    expect(e.name).toBe("AcpxPromptTimeoutError");
    expect(e.timeoutMs).toBe(300);
    expect(e.cancelSent).toBe(true);
    // "cancelled" only ever comes from the agent receiving session/cancel for this session
    expect(e.turnEnded).toBe(true);
    expect(e.stopReason).toBe("cancelled");
    await expect(t.request).resolves.toEqual({ stopReason: "cancelled" });
    await expect(turn("hello").result).resolves.toEqual({ stopReason: "end_turn" });
  });

  it("abort: an error named AbortError after session/cancel; the next prompt works", async () => {
    const { turn } = await session(["--turn=by-text"]);
    const ac = new AbortController();
    const t = turn("hang", { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("user pressed stop")), 200);
    const err = await t.result.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcpxPromptAbortError);
    const e = err as AcpxPromptAbortError;
    expect(e.name).toBe("AbortError");
    expect(e.cancelSent).toBe(true);
    expect(e.turnEnded).toBe(true);
    expect(e.stopReason).toBe("cancelled");
    expect((e.cause as Error).message).toBe("user pressed stop");
    await expect(turn("again").result).resolves.toEqual({ stopReason: "end_turn" });
  });

  it("an already aborted signal sends nothing", async () => {
    const { turn, l } = await session(["--turn=by-text"]);
    const t = turn("hang", { signal: AbortSignal.abort() });
    expect(t.request).toBeNull();
    const e = (await t.result.catch((x: unknown) => x)) as AcpxPromptAbortError;
    expect(e.name).toBe("AbortError");
    expect(e.cancelSent).toBe(false);
    await expect(turn("after").result).resolves.toEqual({ stopReason: "end_turn" });
    await l.stderrSettled();
    expect(l.stderrTail()).toContain('prompt received: "after"');
    expect(l.stderrTail()).not.toContain('prompt received: "hang"');
  });

  it("an agent that ignores session/cancel: the timeout still rejects after the grace, turnEnded false", async () => {
    const { turn, l } = await session(["--turn=by-text"]);
    const t0 = Date.now();
    const e = (await turn("deaf", { timeoutMs: 200, cancelGraceMs: 300 }).result.catch(
      (x: unknown) => x,
    )) as AcpxPromptTimeoutError;
    expect(e).toBeInstanceOf(AcpxPromptTimeoutError);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(480);
    expect(e.cancelSent).toBe(true);
    expect(e.turnEnded).toBe(false);
    expect(e.message).toContain("did not end the turn within 300 ms");
    expect(e.stderrTail).toContain("deaf turn, ignoring session/cancel");
    expect(l.howEnded()).toBeUndefined();
  });

  it("an error answer to session/prompt keeps its data and the stderr cause", async () => {
    const { turn } = await session(["--error-on=session/prompt"]);
    const e = (await turn("x").result.catch((x: unknown) => x)) as AcpxPromptError;
    expect(e).toBeInstanceOf(AcpxPromptError);
    expect(e.failure).toBe("agent-error");
    expect(e.acpError?.data).toEqual({ fixture: "error-on", method: "session/prompt" });
    expect(e.stderrTail).toContain("fixture cause: session/prompt refused on purpose");
    expect(e.message).toContain('error data: {"fixture":"error-on","method":"session/prompt"}');
  });

  it("a wrapper SIGKILLed during a turn fails it as the wrapper's death", async () => {
    const { turn, l } = await session(["--turn=by-text"]);
    const t = turn("hang");
    const pid = l.pid!;
    process.kill(pid, "SIGKILL");
    const e = (await t.result.catch((x: unknown) => x)) as AcpxPromptError;
    expect(e).toBeInstanceOf(AcpxPromptError);
    expect(e.failure).toBe("wrapper-killed");
    expect(e.message).toContain(`the wrapper (pid ${pid}) was killed by SIGKILL`);
    expect(e.message).not.toContain("the adapter exited");
  });
});
