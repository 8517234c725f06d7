/** A sequence's options (catalog.mjs SEQUENCE_OPTIONS). */
export interface SequenceOptions {
  profile: "root" | "nobody";
  keeper: "on" | "off";
  hook: "none" | "allow" | "slow" | "human";
  hookDelayMs: number;
  fs: boolean;
  terminal: boolean;
  maxTerminals: number;
  graceMs: number;
  handshakeTimeoutMs: number;
  turnMs: number;
  consume: "all" | "none" | "slow";
  advertiseClose: boolean;
  innocent: boolean;
}
/** One action of the catalog with its drawn parameters. */
export interface SequenceAction {
  a: string;
  p: Record<string, number | string | boolean | null>;
}
export interface Sequence {
  v: 1;
  seed: number;
  index: number;
  nonce: string;
  opts: SequenceOptions;
  actions: SequenceAction[];
}
export function drawSequence(seed: number, index: number): Sequence;
export function isSolo(seq: Sequence): boolean;
/** why the sequence cannot run, or null */
export function invalidReason(seq: unknown): string | null;
export function encodeSequence(seq: Sequence): string;
export function decodeSequence(code: string): unknown;
export function describeSequence(seq: Sequence): string;
