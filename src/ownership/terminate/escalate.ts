/**
 * The kill order, written once: TERM, a grace for the target to end, then
 * KILL to whatever is left. A target says how it is signalled and how it is
 * seen to end; the order and the grace are this module's. The tree kill runs
 * it per pid (identity-checked), the wrapper around its adapter's group, a
 * supervised run through its own handle. A second TERM → KILL sequence
 * anywhere in src/ fails the architecture test (its kill-order rule).
 */

/** One target of the kill order. Each step is handed the signal it sends, so no caller names the two in sequence. */
export interface Escalation {
  /** Sends TERM; false when nothing was sent (gone, refused, unverifiable): then nothing is waited for or killed. */
  term(sig: "SIGTERM"): boolean | Promise<boolean>;
  /** Waits up to `ms` for the target to end; true when nothing is left for KILL. */
  ended(ms: number): Promise<boolean>;
  /** Sends KILL to what is left after the grace. */
  force(sig: "SIGKILL"): unknown;
}

/** How far the order went: nothing sent, ended within the grace, or KILL sent. */
export type EscalationOutcome = "not-sent" | "ended-after-term" | "kill-sent";

/** TERM → up to `graceMs` → KILL, on one target (see Escalation). */
export async function escalate(target: Escalation, graceMs: number): Promise<EscalationOutcome> {
  if (!(await target.term("SIGTERM"))) return "not-sent";
  if (await target.ended(graceMs)) return "ended-after-term";
  await target.force("SIGKILL");
  return "kill-sent";
}
