#!/usr/bin/env node
// The `proclease` binary. Logic lives in dispatch.ts so tests can call it in-process.
import { hostFault } from "../ownership/leases/host-faults.js";
import { main } from "./dispatch.js";

// A reader that went away (`proclease ps | head -1`) is the normal end of a
// pipe, not an error: stop writing, let the command finish its own cleanup
// (the demo must still end what it spawned), and exit 0 quietly.
let stdoutClosed = false;
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (hostFault(err) === "broken-pipe") {
    stdoutClosed = true;
    return;
  }
  throw err;
});

const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== "";
const tty = process.stdout.isTTY === true;

const code = await main(process.argv.slice(2), {
  out: (s) => {
    if (!stdoutClosed) process.stdout.write(s);
  },
  err: (s) => void process.stderr.write(s),
  tty,
  color: tty && !noColor && process.env.TERM !== "dumb",
  closed: () => stdoutClosed,
});
process.exitCode = stdoutClosed ? 0 : code;
