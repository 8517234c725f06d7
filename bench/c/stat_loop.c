/* The floor for a /proc walk: the same syscalls the native walker makes
 * (readdir over /proc; per process openat + fstat + read + close of
 * /proc/PID/stat into a stack buffer) and the same parse (last ')', fields
 * 4-6 and 22), with no Node, no thread hop and no JS objects.
 * With "status", also what the native walk does for a caller that is not
 * root: openat + read + close of /proc/PID/status for every root-owned
 * stat, taking the effective uid from its "Uid:" line.
 * Usage: stat_loop ITERATIONS [status]. Prints one JSON line:
 *   {"iterations":N,"count":procs,"medianMs":x,"minMs":y}
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

struct rec { int pid, ppid, pgid, sid, uid, state; double start; };

static struct rec *recs;
static size_t cap;
static int with_status;

/* effective uid from /proc/PID/status ("Uid:\treal\teffective\t..."), or -1 */
static int status_euid(int dfd, const char *pid) {
  char rel[300], buf[8192];
  snprintf(rel, sizeof rel, "%s/status", pid);
  int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = 0, n;
  while (len < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - (size_t)len)) > 0) len += n;
  close(fd);
  buf[len > 0 ? len : 0] = 0;
  char *u = strstr(buf, "\nUid:");
  if (!u) return -1;
  u += 5;
  strtol(u, &u, 10);
  return (int)strtol(u, NULL, 10);
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
    int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    ssize_t len = ok ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
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
    for (int f = 7; f < 22; f++) skip(&p);
    r->start = (double)field(&p);
    if (with_status && r->uid == 0) {
      int euid = status_euid(dfd, e->d_name);
      if (euid >= 0) r->uid = euid;
    }
  }
  closedir(dir);
  return n;
}

static double ms(struct timespec a, struct timespec b) {
  return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 50;
  with_status = argc > 2 && strcmp(argv[2], "status") == 0;
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
