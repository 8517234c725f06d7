/*
 * The native ACPX wrapper (Linux): what wrapper_linux.c and
 * wrapper_sweep_linux.c share. Plain data only; the contract both sides keep
 * is src/acpx/wrapper/protocol.ts.
 */
#ifndef PROCLEASE_WRAPPER_LINUX_H
#define PROCLEASE_WRAPPER_LINUX_H

#include <sys/types.h>

/* The wrapper's own state, read by the sweep. */
struct wrapper_state {
  pid_t self;
  pid_t adapter;            /* 0 before the spawn */
  int adapter_exited;       /* its exit was seen (waitid WNOWAIT); it stays unreaped until the end */
  int adapter_code;         /* its exit code, or -1 when a signal ended it */
  int adapter_signal;       /* the signal that ended it, or 0 */
  unsigned long long self_start; /* our start time in clock ticks (/proc/self/stat field 22) */
  const char *lease_id;     /* NULL or "": no marker scan */
  const char *instance_id;  /* NULL or "": no marker scan */
};

/* Milliseconds on the monotonic clock. */
long long wrapper_now_ms(void);

/* Records the adapter's exit without reaping it (its group id stays ours); true once it is known. */
int wrapper_peek_adapter(struct wrapper_state *st);

/*
 * TERM to the adapter's group and every process of the wrapper's tree, the
 * grace, KILL to what is left. Fills `ended` (at most `cap` pids, ascending)
 * with the pids signalled that are gone; returns how many.
 */
int wrapper_sweep(struct wrapper_state *st, long grace_ms, pid_t *ended, int cap);

/* Reaps exited children other than the adapter (adopted orphans). */
void wrapper_reap_adopted(struct wrapper_state *st);

#endif
