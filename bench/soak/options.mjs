// The soak's command line (bench/soak.mjs's header says what each option does).
import { randomInt } from "node:crypto";

export function parseArgs(argv) {
  const o = {
    quick: false,
    seed: null,
    sessions: null,
    churn: 4,
    graceMs: 400,
    maxBatch: 4,
    containment: "auto",
    keep: false,
    verbose: false,
  };
  const num = (i, name) => {
    const v = Number(argv[i]);
    if (!Number.isInteger(v) || v < 0) usage(`${name} needs a non-negative integer, got ${JSON.stringify(argv[i])}`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--quick") o.quick = true;
    else if (a === "--seed") o.seed = num(++i, a) >>> 0;
    else if (a === "--sessions") o.sessions = num(++i, a);
    else if (a === "--churn") o.churn = num(++i, a);
    else if (a === "--no-churn") o.churn = 0;
    else if (a === "--grace-ms") o.graceMs = num(++i, a);
    else if (a === "--max-batch") o.maxBatch = Math.max(1, num(++i, a));
    else if (a === "--containment") {
      o.containment = argv[++i];
      if (o.containment !== "auto" && o.containment !== "off")
        usage(`--containment takes auto or off, got ${JSON.stringify(o.containment)}`);
    } else if (a === "--keep") o.keep = true;
    else if (a === "--verbose") o.verbose = true;
    else if (a === "--inject-faults") o.injectFaults = true;
    else if (a === "--faults") o.faults = true;
    else if (a === "-h" || a === "--help") usage(null);
    else usage(`unknown argument ${a}`);
  }
  o.sessions ??= o.quick ? 40 : 500;
  o.seed ??= randomInt(0, 2 ** 32);
  return o;
}

function usage(err) {
  const text =
    "usage: node bench/soak.mjs [--quick] [--seed N] [--sessions N] [--churn N | --no-churn] [--grace-ms N] [--max-batch N] [--containment auto|off] [--keep] [--verbose] [--inject-faults] [--faults]";
  if (err) {
    console.error(`soak: ${err}\n${text}`);
    process.exit(2);
  }
  console.log(text);
  process.exit(0);
}
