/**
 * Many callers of one event, woken or answered together: a barrier's
 * release, a shared walk, the questions of one turn of the event loop.
 */

/**
 * Wakes many waiters of one event (a barrier's release, a shared walk's or
 * batch's answer) WAKE_CHUNK per turn of the event loop: the first chunk
 * now, each next one after timers and I/O have had a turn. Each waiter's
 * continuation is a little work (a tree's new children, a settlement's
 * next step), and a thousand of them resumed in one turn run for
 * milliseconds without a tick (docs/benchmarks.md).
 */
export function wakeInChunks(wakers: Array<() => void>): void {
  const next = () => {
    for (const w of wakers.splice(0, WAKE_CHUNK)) w();
    if (wakers.length > 0) setImmediate(next);
  };
  next();
}

/** waiters resumed per turn: each resumes into tens of microseconds of work at most, so a chunk stays near a millisecond */
export const WAKE_CHUNK = 48;

/** The callers of one answer, handed it in chunks once it settles (wakeInChunks); a caller after that gets it at once. */
export class Waiters<T> {
  private waiting: Array<{ resolve: (v: T) => void; reject: (e: unknown) => void }> | null = [];

  constructor(private readonly answer: Promise<T>) {
    answer.then(
      (v) => this.wake((w) => w.resolve(v)),
      (e: unknown) => this.wake((w) => w.reject(e)),
    );
  }

  wait(): Promise<T> {
    const waiting = this.waiting;
    if (waiting === null) return this.answer;
    return new Promise<T>((resolve, reject) => waiting.push({ resolve, reject }));
  }

  private wake(how: (w: { resolve: (v: T) => void; reject: (e: unknown) => void }) => void): void {
    const all = this.waiting ?? [];
    this.waiting = null;
    wakeInChunks(all.map((w) => () => how(w)));
  }
}

/**
 * Questions asked within one turn of the event loop, answered together: the
 * first one schedules `answer` for the end of the turn (setImmediate), and
 * every question asked until then goes into that one call. `answer` returns
 * one answer per question, in order, and the askers are woken in chunks
 * (wakeInChunks); if it throws, every question of the batch rejects with
 * that error.
 */
export function perTurn<Q, A>(answer: (asked: readonly Q[]) => Promise<readonly A[]>): (q: Q) => Promise<A> {
  return batchedCalls(answer, false);
}

/**
 * perTurn with one call at a time: questions asked while a call runs wait
 * for it to end and go together into the next call (with those of the turn
 * it starts in), so callers that keep asking at slightly different moments
 * (settlements whose kills end one after another) still share calls, and at
 * most one call runs. A question never gets an answer made before it was
 * asked.
 */
export function oneCallAtATime<Q, A>(answer: (asked: readonly Q[]) => Promise<readonly A[]>): (q: Q) => Promise<A> {
  return batchedCalls(answer, true);
}

function batchedCalls<Q, A>(
  answer: (asked: readonly Q[]) => Promise<readonly A[]>,
  oneAtATime: boolean,
): (q: Q) => Promise<A> {
  let asked: Array<{ q: Q; resolve: (a: A) => void; reject: (e: unknown) => void }> = [];
  let running = false;
  const flush = async () => {
    const batch = asked;
    asked = [];
    running = oneAtATime;
    try {
      const out = await answer(batch.map((b) => b.q));
      wakeInChunks(batch.map((b, i) => () => b.resolve(out[i]!)));
    } catch (e) {
      wakeInChunks(batch.map((b) => () => b.reject(e)));
    } finally {
      running = false;
      // the questions that waited behind this call: their own call, at the end of this turn
      if (oneAtATime && asked.length > 0) setImmediate(() => void flush());
    }
  };
  return (q) =>
    new Promise<A>((resolve, reject) => {
      if (asked.length === 0 && !running) setImmediate(() => void flush());
      asked.push({ q, resolve, reject });
    });
}

/**
 * Callers let through one per turn of the event loop, in the order they
 * came: for a step whose synchronous cost is milliseconds, so callers that
 * arrive in one turn (sessions started together) do not all run it in that
 * turn. The first is let through at the end of the turn it asked in.
 */
export class OnePerTurn {
  private readonly waiting: Array<() => void> = [];
  private pumping = false;

  turn(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.waiting.push(resolve);
      if (this.pumping) return;
      this.pumping = true;
      setImmediate(this.next);
    });
  }

  // scheduled from the check phase, the next caller's turn comes after the next timers and I/O
  private readonly next = (): void => {
    this.waiting.shift()?.();
    if (this.waiting.length > 0) setImmediate(this.next);
    else this.pumping = false;
  };
}
