/** every invariant the fuzzer judges, with what it means */
export const INVARIANTS: Readonly<Record<string, string>>;
