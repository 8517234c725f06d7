#!/usr/bin/env node
// The `proclease` binary. Logic lives in dispatch.ts so tests can call it in-process.
import { main } from "./dispatch.js";

process.exitCode = await main(process.argv.slice(2), {
  out: (s) => void process.stdout.write(s),
  err: (s) => void process.stderr.write(s),
});
