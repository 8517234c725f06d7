/*
 * The native wrapper's tree cleanup (Linux), the same rule as
 * src/acpx/wrapper/cleanup.ts: SIGTERM to the adapter's group and to every
 * process of the wrapper's tree, the grace, SIGKILL to what is left, then a
 * few sweeps for what appeared meanwhile.
 *
 * The wrapper's tree, from one /proc walk: the wrapper's children (as a child
 * subreaper, double-fork and setsid escapees are re-parented here), the
 * adapter's process group, processes whose environment carries the lease id
 * AND the gateway instance id (and that started after the wrapper: an older
 * process cannot have inherited them), and every descendant of those by
 * parent links.
 *
 * Why each signal is safe:
 * - the group: the adapter is never reaped before the cleanup ends (its exit
 *   is read with WNOWAIT), so its pid, and the group id setsid() gave it,
 *   cannot name anyone else;
 * - a single process: pidfd_open pins whoever owns the pid, then its start
 *   time is read again and must equal the walk's (pidfd_linux.cc explains
 *   why that is race-free); where pidfd is missing, only our own unreaped
 *   children are signalled (their pids cannot be reused before we wait on
 *   them), others are left to the controller's verified close.
 * - never pid <= 1, this process or its parent.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wrapper_linux.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

#define POLL_MS 5
#define FINAL_SWEEPS 3
#define CONFIRM_MS 1000
#define ENV_CAP (1 << 20)

struct proc {
  pid_t pid, ppid, pgid;
  char state;
  int threads;
  unsigned long long start;
};

struct table {
  struct proc *p;
  int n, cap;
};

long long wrapper_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* Reads /proc/<pid>/stat into `out`; 0 when the process is gone or unreadable. */
static int read_stat(pid_t pid, struct proc *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *paren = strrchr(buf, ')');
  if (paren == NULL || paren[1] == 0) return 0;
  char state;
  int ppid, pgid, threads;
  unsigned long long start;
  /* fields 3..22 after the command: state ppid pgrp session tty tpgid flags 4×faults 4×times prio nice threads itreal start */
  if (sscanf(paren + 2, "%c %d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %d %*d %llu", &state, &ppid, &pgid, &threads, &start) != 5) return 0;
  out->pid = pid;
  out->ppid = ppid;
  out->pgid = pgid;
  out->state = state;
  out->threads = threads;
  out->start = start;
  return 1;
}

/* facts/liveness.ts's rule: dead states are not alive, and a zombie leader whose other threads run on is */
static int alive(const struct proc *p) {
  if (p->state == 'X' || p->state == 'x') return 0;
  return p->state != 'Z' || p->threads > 1;
}

static void walk(struct table *t) {
  t->n = 0;
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    if (t->n == t->cap) {
      int cap = t->cap ? t->cap * 2 : 512;
      struct proc *p = realloc(t->p, (size_t)cap * sizeof *p);
      if (p == NULL) break;
      t->p = p;
      t->cap = cap;
    }
    if (read_stat((pid_t)atoi(e->d_name), &t->p[t->n])) t->n++;
  }
  closedir(d);
}

/* Does the environment of `pid` hold both entries exactly? Unreadable = no. */
static int carries_markers(pid_t pid, const char *lease_entry, const char *instance_entry) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t cap = 16384, len = 0;
  char *buf = malloc(cap + 1);
  while (buf != NULL) {
    if (len == cap) {
      if (cap >= ENV_CAP) break;
      char *b = realloc(buf, cap * 2 + 1);
      if (b == NULL) break;
      buf = b;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  if (buf == NULL) return 0;
  buf[len] = 0;
  int lease = 0, instance = 0;
  for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
    if (strcmp(buf + i, lease_entry) == 0) lease = 1;
    else if (strcmp(buf + i, instance_entry) == 0) instance = 1;
  }
  free(buf);
  return lease && instance;
}

static int allowed_target(const struct wrapper_state *st, pid_t pid) {
  return pid > 1 && pid != st->self && pid != getppid();
}

/* The wrapper's tree in `t`, leaves first, into `out` (indexes into t); returns the count. */
static int collect(const struct wrapper_state *st, const struct table *t, int *out) {
  char *mark = calloc((size_t)t->n + 1, 1);
  if (mark == NULL) return 0;
  char lease_entry[512], instance_entry[512];
  int markers = st->lease_id && st->lease_id[0] && st->instance_id && st->instance_id[0] &&
                snprintf(lease_entry, sizeof lease_entry, "OPENCLAW_ACPX_LEASE_ID=%s", st->lease_id) < (int)sizeof lease_entry &&
                snprintf(instance_entry, sizeof instance_entry, "OPENCLAW_GATEWAY_INSTANCE_ID=%s", st->instance_id) < (int)sizeof instance_entry;
  int n = 0;
  for (int i = 0; i < t->n; i++) {
    const struct proc *p = &t->p[i];
    if (!allowed_target(st, p->pid) || p->pid == 2 || p->ppid == 2 || !alive(p)) continue;
    int seed = p->ppid == st->self || (st->adapter > 0 && p->pgid == st->adapter);
    if (!seed && markers && p->start >= st->self_start) seed = carries_markers(p->pid, lease_entry, instance_entry);
    if (seed) mark[i] = 1, out[n++] = i;
  }
  /* descendants by parent links, each pass one generation deeper */
  for (int grew = 1; grew;) {
    grew = 0;
    for (int i = 0; i < t->n; i++) {
      const struct proc *p = &t->p[i];
      if (mark[i] || !allowed_target(st, p->pid) || !alive(p)) continue;
      for (int j = 0; j < n; j++) {
        if (t->p[out[j]].pid == p->ppid) {
          mark[i] = 1, out[n++] = i, grew = 1;
          break;
        }
      }
    }
  }
  free(mark);
  /* found parents first, so reversed the deepest come first */
  for (int i = 0, j = n - 1; i < j; i++, j--) {
    int x = out[i];
    out[i] = out[j];
    out[j] = x;
  }
  return n;
}

/* 1 when `sig` reached the process that started at `start`; 0 when it is gone, another process, or not provably ours. */
static int signal_checked(const struct wrapper_state *st, pid_t pid, unsigned long long start, int sig) {
  if (!allowed_target(st, pid)) return 0;
  struct proc now;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    int ok = read_stat(pid, &now) && now.start == start && syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0;
    close(fd);
    return ok;
  }
  if (errno == ESRCH) return 0;
  /* no pidfd: only our own unreaped child (we wait on nothing while this runs) */
  if (read_stat(pid, &now) && now.start == start && now.ppid == st->self) return kill(pid, sig) == 0;
  return 0;
}

static void group_signal(const struct wrapper_state *st, int sig) {
  /* the adapter is unreaped until the wrapper exits: its group is still the one setsid() made */
  if (st->adapter > 1 && st->adapter != getpgrp()) kill(-st->adapter, sig);
}

static int gone(const struct wrapper_state *st, pid_t pid, unsigned long long start) {
  struct proc now;
  if (!read_stat(pid, &now) || now.start != start) return 1;
  if (alive(&now)) return 0;
  /* an adopted zombie is ours to reap (never the adapter: its status is read at the end) */
  if (now.ppid == st->self && pid != st->adapter) waitpid(pid, NULL, WNOHANG);
  return 1;
}

struct signalled {
  struct proc *p;
  int n, cap;
};

static void note(struct signalled *s, const struct proc *p) {
  for (int i = 0; i < s->n; i++)
    if (s->p[i].pid == p->pid && s->p[i].start == p->start) return;
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 32;
    struct proc *q = realloc(s->p, (size_t)cap * sizeof *q);
    if (q == NULL) return;
    s->p = q;
    s->cap = cap;
  }
  s->p[s->n++] = *p;
}

/* Waits until every signalled process is gone or the deadline passes; 1 when all are gone. */
static int wait_gone(struct wrapper_state *st, const struct signalled *s, long long deadline) {
  for (;;) {
    int left = 0;
    for (int i = 0; i < s->n; i++) left += !gone(st, s->p[i].pid, s->p[i].start);
    wrapper_peek_adapter(st);
    if (left == 0) return 1;
    if (wrapper_now_ms() >= deadline) return 0;
    sleep_ms(POLL_MS);
  }
}

/* One walk, and `sig` to every live member of the tree; returns how many were signalled. */
static int signal_tree(struct wrapper_state *st, struct table *t, struct signalled *s, int sig) {
  walk(t);
  int *idx = malloc(((size_t)t->n + 1) * sizeof *idx);
  if (idx == NULL) return 0;
  int n = collect(st, t, idx), sent = 0;
  for (int i = 0; i < n; i++) {
    const struct proc *p = &t->p[idx[i]];
    if (signal_checked(st, p->pid, p->start, sig)) note(s, p), sent++;
  }
  free(idx);
  return sent;
}

static int cmp_pid(const void *a, const void *b) { return *(const pid_t *)a - *(const pid_t *)b; }

int wrapper_sweep(struct wrapper_state *st, long grace_ms, pid_t *ended, int cap) {
  long long t0 = wrapper_now_ms();
  struct table t = {0};
  struct signalled s = {0};
  /* the group first: one syscall, and it reaches a member forked after the walk */
  group_signal(st, SIGTERM);
  signal_tree(st, &t, &s, SIGTERM);
  wait_gone(st, &s, t0 + grace_ms);
  group_signal(st, SIGKILL);
  for (int i = 0; i < s.n; i++)
    if (!gone(st, s.p[i].pid, s.p[i].start)) signal_checked(st, s.p[i].pid, s.p[i].start, SIGKILL);
  wait_gone(st, &s, wrapper_now_ms() + CONFIRM_MS);
  /* whatever appeared during the grace has spent it: SIGKILL at once */
  for (int i = 0; i < FINAL_SWEEPS; i++) {
    if (signal_tree(st, &t, &s, SIGKILL) == 0) break;
    wait_gone(st, &s, wrapper_now_ms() + CONFIRM_MS);
  }
  int n = 0;
  for (int i = 0; i < s.n && n < cap; i++)
    if (gone(st, s.p[i].pid, s.p[i].start)) ended[n++] = s.p[i].pid;
  qsort(ended, (size_t)n, sizeof *ended, cmp_pid);
  free(t.p);
  free(s.p);
  return n;
}

int wrapper_peek_adapter(struct wrapper_state *st) {
  if (st->adapter_exited) return 1;
  if (st->adapter <= 0) return 0;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)st->adapter, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != st->adapter) return 0;
  st->adapter_exited = 1;
  if (si.si_code == CLD_EXITED) {
    st->adapter_code = si.si_status;
    st->adapter_signal = 0;
  } else {
    st->adapter_code = -1;
    st->adapter_signal = si.si_status;
  }
  return 1;
}

void wrapper_reap_adopted(struct wrapper_state *st) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) return;
    /* the adapter stays unreaped: a wildcard peek stops at it, and the cleanup's walks reap the rest */
    if (si.si_pid == st->adapter) {
      wrapper_peek_adapter(st);
      return;
    }
    waitpid(si.si_pid, NULL, WNOHANG);
  }
}
