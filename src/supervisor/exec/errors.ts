/** The exec sessions' typed errors. */

/** adopt() could not pin the pid to one process: nothing was adopted. */
export class AdoptError extends Error {
  override readonly name = "AdoptError";
  constructor(
    readonly pid: number,
    reason: string,
  ) {
    super(`cannot adopt pid ${pid}: ${reason}`);
  }
}

export class UnknownSessionError extends Error {
  override readonly name = "UnknownSessionError";
  constructor(readonly sessionId: string) {
    super(`no exec session ${JSON.stringify(sessionId)}`);
  }
}
