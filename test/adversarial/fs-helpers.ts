/**
 * What the adversarial fs tests share: a temp tree with an inside and an
 * outside, and one session's client fs handlers as the ACP client calls
 * them (createClientFs), with the refusal each rejection carries.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RequestError } from "@agentclientprotocol/sdk";
import { afterAll } from "vitest";
import { createClientFs, type ClientFsHandlers, type ClientFsOptions } from "../../src/acpx/connection/client-fs.js";

const bases: string[] = [];
afterAll(() => {
  for (const d of bases.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** base/work (the session's cwd, with a.txt) and base/outside (with secret.txt), removed after the file's tests. */
export function fsTree(label: string): { base: string; cwd: string; outside: string } {
  const base = realpathSync(mkdtempSync(join(tmpdir(), `proclease-adv-${label}-`)));
  bases.push(base);
  const cwd = join(base, "work");
  const outside = join(base, "outside");
  mkdirSync(cwd);
  mkdirSync(outside);
  writeFileSync(join(cwd, "a.txt"), "inside\n");
  writeFileSync(join(outside, "secret.txt"), "OUTSIDE SECRET");
  return { base, cwd, outside };
}

export const SESSION = "adv-session";

export function handlers(cwd: string, opts: ClientFsOptions = {}): Required<ClientFsHandlers> {
  const h = createClientFs(opts, cwd, () => SESSION, {});
  if (!h.read || !h.write) throw new Error("both fs directions were asked for");
  return { read: h.read, write: h.write };
}

/** What one request came to: the content read ("" for a write), or the refusal named in the ACP error. */
export type Answer = { ok: true; content: string } | { ok: false; refusal: string; message: string };

export async function answer(p: Promise<{ content: string } | void>): Promise<Answer> {
  try {
    const r = await p;
    return { ok: true, content: r ? r.content : "" };
  } catch (e) {
    if (!(e instanceof RequestError)) throw e;
    const data = e.data as { refusal?: unknown } | undefined;
    return { ok: false, refusal: String(data?.refusal), message: e.message };
  }
}
