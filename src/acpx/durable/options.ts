/**
 * The controller's `durable` option, opened: checked (durable/protocol.ts),
 * refused typed where it cannot hold, and the attach folder made. Durable
 * needs the native wrapper: it relays the adapter's pipes, keeps the
 * journal and listens on the socket, which the Node wrapper does not (a
 * second Node process per session holding every byte the agent writes would
 * double the cost the native wrapper removed); and the addon, whose
 * connectAttach reads the listener's pid from the kernel (SO_PEERCRED),
 * which node:net cannot.
 */
import { join } from "node:path";
import { loadNative } from "../../facts/native.js";
import { ensurePrivateDir } from "../../ownership/leases/fs-safe.js";
import { STATE_LOCK_FILE } from "../../ownership/host/state-lock.js";
import { AcpxDurableUnavailableError } from "../report/errors.js";
import type { InstalledWrapper } from "../launch/install-wrapper.js";
import { ATTACH_DIR, durableArgs, resolveDurable, type ResolvedDurable } from "./protocol.js";

export interface DurableDeps extends ResolvedDurable {
  /** `<stateDir>/acpx/attach` (0700): each durable wrapper's socket is `<leaseId>.sock` in it */
  attachDir: string;
  /** the wrapper's argv before its `--` */
  args: readonly string[];
}

/** The option as the controller runs it, or undefined; AcpxDurableUnavailableError where it cannot hold. */
export async function openDurable(
  option: unknown,
  stateDir: string,
  wrapper: Pick<InstalledWrapper, "kind">,
): Promise<DurableDeps | undefined> {
  const d = resolveDurable(option);
  if (d === undefined) return undefined;
  const why = durableMissing(wrapper);
  if (why !== null) throw new AcpxDurableUnavailableError(why);
  const attachDir = join(stateDir, "acpx", ATTACH_DIR);
  await ensurePrivateDir(attachDir);
  return { ...d, attachDir, args: durableArgs(d, attachDir, join(stateDir, STATE_LOCK_FILE)) };
}

/** What durable sessions lack here, or null. */
export function durableMissing(wrapper: Pick<InstalledWrapper, "kind">): string | null {
  if (process.platform !== "linux")
    return `they need the native wrapper, which runs on Linux only (this is ${process.platform})`;
  if (wrapper.kind !== "native")
    return "they need the native wrapper, and this controller runs the Node wrapper (PROCLEASE_WRAPPER=node, PROCLEASE_DISABLE_NATIVE=1, or no packaged binary)";
  if (typeof loadNative()?.connectAttach !== "function")
    return "they need the addon's connectAttach (an addon built before it, or none)";
  return null;
}
