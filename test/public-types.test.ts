/**
 * The public types are the ones a signature needs: every type either package
 * entry exports appears in the signature of something it exports as a value
 * (a function, a class, a constant), directly or through another exported
 * type, or is an error class a documented call throws (a value itself).
 * scripts/public-types.mjs reads this from the compiler.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { unneededTypes } from "../scripts/public-types.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const PROGRAM_MS = 120_000;

describe("the public types", () => {
  it(
    "every exported type appears in an exported signature (else make it internal)",
    () => {
      for (const e of unneededTypes(ROOT)) expect(e.unneeded, `${e.specifier}: needed by no signature`).toEqual([]);
    },
    PROGRAM_MS,
  );

  it(
    "the check finds a type no signature needs, and follows an optional field, a nested type and an error class",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "proclease-public-types-"));
      try {
        mkdirSync(join(dir, "src"));
        writeFileSync(
          join(dir, "src/index.ts"),
          [
            'export type Level = "a" | "b";',
            "export interface Inner { level?: Level }",
            "export interface Options { inner: Inner }",
            "export interface Unused { x: number }",
            "export type AlsoUnused = Unused[];",
            "export class OddError extends Error { readonly code = 1; }",
            "export function run(o: Options): void { void o; }",
          ].join("\n"),
        );
        const [e] = unneededTypes(dir, [{ specifier: "fixture", source: "src/index.ts" }]);
        expect(e!.unneeded).toEqual(["AlsoUnused", "Unused"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    PROGRAM_MS,
  );
});
