// What ran on the main thread in the spinner's busiest gaps (spinner.mjs):
// V8's sampling profiler runs beside the spinner, and each sample inside a
// kept gap is charged to one step of a session's start, read from its stack
// (innermost frame first): spawn, fs / lease write, ACP handshake, JSON,
// the collector, or the innermost function when none of those matched.
// The profiler's own interrupts cost the main thread a little, so a profiled
// pass is printed, never judged.
import { Session } from "node:inspector/promises";
import { performance } from "node:perf_hooks";

/** Runs fn with the CPU profiler sampling every `intervalUs`; answers fn's value and the profile. */
export async function profiled(fn, intervalUs = 100) {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: intervalUs });
    await session.post("Profiler.start");
    let value;
    let profile;
    try {
      value = await fn();
    } finally {
      ({ profile } = await session.post("Profiler.stop"));
    }
    return { value, profile };
  } finally {
    session.disconnect();
  }
}

/** Each step, by the first of its rules an innermost-first walk of a sample's stack meets. */
const STEPS = [
  ["collector", (f) => f.functionName === "(garbage collector)"],
  ["spawn", (f) => /child_process|\/launch\.js$/.test(f.url) || f.functionName === "spawn"],
  ["JSON", (f) => /^(parse|stringify)$/.test(f.functionName) || /json-scan\.js$|line-framer\.js$/.test(f.url)],
  [
    "fs / lease write",
    (f) =>
      /node:(internal\/)?fs|\/ownership\/leases\/|\/ownership\/lifecycle\/|session-store\.js$|fs-beneath\.js$/.test(
        f.url,
      ),
  ],
  [
    "ACP handshake",
    (f) => /acp-client\.js$|handshake\.js$|conversation\.js$|intake-stream\.js$|@agentclientprotocol/.test(f.url),
  ],
  ["pipes (net, streams)", (f) => /node:(internal\/)?(net|stream|streams\/)/.test(f.url)],
  ["containment (cgroup)", (f) => /\/containment\//.test(f.url)],
  ["process facts", (f) => /\/facts\//.test(f.url)],
];

const short = (f) => `${f.functionName || "(anonymous)"} ${f.url.split("/").slice(-2).join("/")}:${f.lineNumber + 1}`;

/**
 * The samples of `profile` that fell in `windows` ([start, end, cpu] in
 * performance.now() ms), charged to steps: for each step its share of those
 * samples, and the innermost functions that were sampled most.
 */
export function attribute(profile, windows) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stepOf = new Map();
  const step = (id) => {
    if (stepOf.has(id)) return stepOf.get(id);
    let s = null;
    for (let at = id; at !== undefined && s === null; at = parent.get(at)) {
      const f = nodes.get(at).callFrame;
      for (const [name, test] of STEPS) if (test(f)) s ??= name;
    }
    const leaf = nodes.get(id).callFrame;
    const got = s ?? (/^\((idle|program|root)\)$/.test(leaf.functionName) ? "runtime (program)" : "other");
    stepOf.set(id, got);
    return got;
  };
  // the profile's clock is the monotonic clock in µs; performance.now() is the same clock from this process's origin
  const originUs = Number(process.hrtime.bigint()) / 1e3 - performance.now() * 1e3;
  const sorted = [...windows].sort((a, b) => a[0] - b[0]);
  const byStep = new Map();
  const byLeaf = new Map();
  let total = 0;
  let t = profile.startTime;
  let w = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const ms = (t - originUs) / 1e3;
    while (w < sorted.length && sorted[w][1] < ms) w++;
    if (w >= sorted.length) break;
    if (ms < sorted[w][0]) continue;
    const id = profile.samples[i];
    const s = step(id);
    if (s === "runtime (program)" && nodes.get(id).callFrame.functionName === "(idle)") continue;
    total++;
    byStep.set(s, (byStep.get(s) ?? 0) + 1);
    const leaf = `${s}: ${short(nodes.get(id).callFrame)}`;
    byLeaf.set(leaf, (byLeaf.get(leaf) ?? 0) + 1);
  }
  const shares = [...byStep].sort((a, b) => b[1] - a[1]).map(([s, n]) => ({ step: s, samples: n, share: n / total }));
  const leaves = [...byLeaf]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([l, n]) => ({ leaf: l, share: n / total }));
  return { total, shares, leaves };
}
