/* The floor for a /proc walk: the same syscalls the native walker makes
 * (readdir over /proc; per process openat + fstat + read + close of
 * /proc/PID/stat into a stack buffer; for a root-owned stat of a process
 * that is not a kernel thread, one fstatat of /proc/PID for its owner, the
 * effective uid; for a zombie, status for its thread count) and the same
 * parse (last ')', fields 4-6, 9 and 22), with no Node, no thread hop, no
 * index and no JS objects.
 * Usage: stat_loop ITERATIONS. Prints one JSON line:
 *   {"iterations":N,"count":procs,"medianMs":x,"minMs":y}
 * Made from a process like Node's, its syscalls made as the addon makes
 * them (floor.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "floor.h"

struct rec { int pid, ppid, pgid, sid, uid, state; double start; };

static struct rec *recs;
static size_t cap;

/* the "Threads:" count from /proc/PID/status, or -1 (read for zombies, as the native walk does) */
static int status_threads(int dfd, const char *pid) {
  char rel[300], buf[8192];
  snprintf(rel, sizeof rel, "%s/status", pid);
  int fd = sys_openat(dfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = 0, n;
  while (len < (ssize_t)sizeof buf - 1 && (n = sys_read(fd, buf + len, sizeof buf - 1 - (size_t)len)) > 0) len += n;
  sys_close(fd);
  buf[len > 0 ? len : 0] = 0;
  char *t = strstr(buf, "\nThreads:");
  return t ? (int)strtol(t + 9, NULL, 10) : -1;
}

static long long field(const char **p) {
  long long v = 0;
  int neg = 0;
  if (**p == '-') { neg = 1; (*p)++; }
  while (**p >= '0' && **p <= '9') v = v * 10 + (*(*p)++ - '0');
  if (**p == ' ') (*p)++;
  return neg ? -v : v;
}

static void skip(const char **p) {
  while (**p && **p != ' ') (*p)++;
  if (**p == ' ') (*p)++;
}

static size_t walk(void) {
  DIR *dir = opendir("/proc");
  if (!dir) { perror("opendir /proc"); exit(1); }
  int dfd = dirfd(dir);
  size_t n = 0;
  struct dirent *e;
  char rel[300], buf[4096];
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(rel, sizeof rel, "%s/stat", e->d_name);
    int fd = sys_openat(dfd, rel, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    ssize_t len = ok ? sys_read(fd, buf, sizeof buf - 1) : -1;
    sys_close(fd);
    if (len <= 0) continue;
    buf[len] = 0;
    const char *rp = memrchr(buf, ')', (size_t)len);
    if (!rp) continue;
    const char *p = rp + 2;
    if (n == cap) { cap = cap ? cap * 2 : 1024; recs = realloc(recs, cap * sizeof *recs); }
    struct rec *r = &recs[n++];
    r->pid = atoi(buf);
    r->uid = (int)st.st_uid;
    r->state = *p;
    skip(&p);
    r->ppid = (int)field(&p);
    r->pgid = (int)field(&p);
    r->sid = (int)field(&p);
    skip(&p);
    skip(&p);
    long long flags = field(&p);
    for (int f = 10; f < 22; f++) skip(&p);
    r->start = (double)field(&p);
    if (r->uid == 0 && (flags & 0x00200000) == 0) {
      struct stat dir;
      if (fstatat(dfd, e->d_name, &dir, 0) != 0) { n--; continue; }
      r->uid = (int)dir.st_uid;
    }
    if (r->state == 'Z') (void)status_threads(dfd, e->d_name);
  }
  closedir(dir);
  return n;
}

static double ms(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
  become_multithreaded();
  int iterations = argc > 1 ? atoi(argv[1]) : 50;
  if (iterations < 1) iterations = 1;
  double *samples = malloc(sizeof(double) * (size_t)iterations);
  size_t count = 0;
  for (int w = 0; w < 3; w++) walk();
  for (int i = 0; i < iterations; i++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    count = walk();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    samples[i] = ms(t0, t1);
  }
  qsort(samples, (size_t)iterations, sizeof(double), cmp);
  printf("{\"iterations\":%d,\"count\":%zu,\"medianMs\":%.4f,\"minMs\":%.4f}\n", iterations, count,
         samples[iterations / 2], samples[0]);
  return 0;
}
