/*
 * The native ACPX wrapper (Linux): what wrapper_linux.c and
 * wrapper_sweep_linux.c share. Plain data only; the contract both sides keep
 * is src/acpx/wrapper/protocol.ts.
 */
#ifndef PROCLEASE_WRAPPER_LINUX_H
#define PROCLEASE_WRAPPER_LINUX_H

#include <stddef.h>
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

/* The lease's cgroup as the controller handed it (PROCLEASE_CGROUP, PROCLEASE_CGROUP_REQUIRED). */
struct lease_cgroup {
  int given;     /* a path was given */
  int required;  /* limits need it: nothing may start outside */
  int shape_ok;  /* a normalised absolute path */
  int dirfd;     /* the directory, for clone3; -1 when it could not be opened */
  char dir[2048];
};

/* Reads and removes the two variables; opens the directory. */
void lease_cgroup_read(struct lease_cgroup *cg);
/* Moves the caller into the cgroup; 0 with `why` filled when it cannot. */
int lease_cgroup_join(const struct lease_cgroup *cg, char *why, size_t cap);
/* The caller's own cgroup namespace, rooted at its cgroup now: 0, or the errno. */
int lease_cgroup_unshare(void);
/* Forks a child born inside the cgroup (clone3 CLONE_INTO_CGROUP): 0 in the child, its pid in the parent, -2 when not possible here. */
pid_t lease_cgroup_fork(const struct lease_cgroup *cg);

/*
 * The wrapper's own word on how it ended its tree when nobody asked it to
 * (wrapper_record_linux.c; src/ownership/leases/end-records.ts reads it):
 * end_record_open takes PROCLEASE_END_DIR out of the environment (the
 * adapter never sees it) and opens that folder; end_record writes
 * <lease id>.json there, "sweeping" before the sweep (ended NULL) and
 * "done" with the pids after it.
 */
void end_record_open(const struct wrapper_state *st);
void end_record(const struct wrapper_state *st, const char *reason, const pid_t *ended, int n);

/* A JSON string's body for a message (quotes, backslashes and control bytes escaped). */
void json_escape(char *out, size_t cap, const char *s);
/* This process's start time in clock ticks (/proc/self/stat field 22), 0 when unreadable. */
unsigned long long own_start_time(void);

/* The errno's name ("ENOENT"), "EUNKNOWN" for one not listed. */
const char *wrapper_errname(int e);

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
