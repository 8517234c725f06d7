/* The floor for one inspect: the syscalls the native inspect makes, with no
 * Node, no N-API and no JS objects. Per call: open /proc/PID as a directory,
 * then through it openat + fstat + read + close of stat, [openat + read +
 * close of status,] readlinkat of exe, and openat + read + close of cmdline
 * and environ; the stat line is parsed by its last ')', cmdline split on NUL
 * and environ searched for one key, like the native side does. "listed" is
 * an inspect of a pid from a snapshot (InspectOptions.listed): no status,
 * and an fstat of the directory when stat is owned by root.
 * Usage: inspect_loop PID|@FILE ITERATIONS KEY [status|listed]; with @FILE, every
 * pid listed in FILE is inspected once per iteration (times are per pid).
 * Prints one JSON line: {"iterations":N,"pids":n,"medianUs":x,"minUs":y,"found":0|1}
 * and exits 1 when KEY was not found in every pid (the loop did not read
 * what it should).
 * Made from a process like Node's, its syscalls made as the addon makes
 * them (floor.h).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "floor.h"

static char big[1 << 20];

static ssize_t read_at(int dfd, const char *rel, char *buf, size_t cap) {
  int fd = sys_openat(dfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  ssize_t n;
  while (len < cap && (n = sys_read(fd, buf + len, cap - len)) > 0) len += (size_t)n;
  sys_close(fd);
  return (ssize_t)len;
}

static int inspect(const char *dir, const char *key, int with_status) {
  int dfd = sys_openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return -1;
  char stat_buf[4096];
  int fd = sys_openat(dfd, "stat", O_RDONLY | O_CLOEXEC);
  struct stat st;
  ssize_t n = -1;
  if (fd >= 0) {
    if (fstat(fd, &st) == 0) n = sys_read(fd, stat_buf, sizeof stat_buf);
    sys_close(fd);
  }
  if (n <= 0 || memrchr(stat_buf, ')', (size_t)n) == NULL) {
    sys_close(dfd);
    return -1;
  }
  if (with_status == 2 && st.st_uid == 0) {
    struct stat dir_st;
    if (fstat(dfd, &dir_st) != 0) {
      sys_close(dfd);
      return -1;
    }
  }
  if (with_status == 1) {
    char status[8192];
    ssize_t s = read_at(dfd, "status", status, sizeof status);
    if (s <= 0 || memmem(status, (size_t)s, "\nUid:", 5) == NULL) {
      sys_close(dfd);
      return -1;
    }
  }
  char link[PATH_MAX + 64];
  volatile ssize_t l = readlinkat(dfd, "exe", link, sizeof link);
  (void)l;
  ssize_t c = read_at(dfd, "cmdline", big, sizeof big);
  volatile int args = 0; /* the split the native side makes */
  for (ssize_t i = 0; i < c; i++) args += big[i] == 0;
  ssize_t e = read_at(dfd, "environ", big, sizeof big);
  size_t klen = strlen(key);
  int found = 0;
  for (ssize_t i = 0; i < e && !found;) {
    char *nul = memchr(big + i, 0, (size_t)(e - i));
    size_t len = nul ? (size_t)(nul - (big + i)) : (size_t)(e - i);
    if (len > klen && big[i + (ssize_t)klen] == '=' && memcmp(big + i, key, klen) == 0) found = 1;
    i += (ssize_t)len + 1;
  }
  sys_close(dfd);
  return found;
}

/* "@FILE": the pids listed in FILE (whitespace-separated), each inspected once per iteration */
static int read_pids(const char *arg, int **out) {
  if (arg[0] != '@') {
    *out = malloc(sizeof(int));
    (*out)[0] = atoi(arg);
    return 1;
  }
  FILE *f = fopen(arg + 1, "r");
  if (!f) {
    perror(arg + 1);
    exit(2);
  }
  int cap = 1024, n = 0, pid;
  *out = malloc(sizeof(int) * (size_t)cap);
  while (fscanf(f, "%d", &pid) == 1) {
    if (n == cap) *out = realloc(*out, sizeof(int) * (size_t)(cap *= 2));
    (*out)[n++] = pid;
  }
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  become_multithreaded();
  if (argc < 4) {
    fprintf(stderr, "usage: inspect_loop PID|@FILE ITERATIONS KEY [status|listed]\n");
    return 2;
  }
  int *pids;
  int npids = read_pids(argv[1], &pids);
  int iterations = atoi(argv[2]);
  if (iterations < 1) iterations = 1;
  const char *key = argv[3];
  /* 1: status read; 2: listed (no status, the directory's owner when stat's is root) */
  int with_status = argc > 4 && strcmp(argv[4], "status") == 0 ? 1 : argc > 4 && strcmp(argv[4], "listed") == 0 ? 2 : 0;
  double *samples = malloc(sizeof(double) * (size_t)iterations);
  char (*dirs)[64] = malloc(sizeof *dirs * (size_t)(npids > 0 ? npids : 1));
  for (int k = 0; k < npids; k++) snprintf(dirs[k], sizeof dirs[k], "/proc/%d", pids[k]);
  int found = 0;
  /* every pid must be found, every time (the loop read what it should) */
  for (int w = 0; w < (npids == 1 ? 50 : 1); w++)
    for (int k = 0; k < npids; k++) found = inspect(dirs[k], key, with_status);
  int all = npids > 0;
  for (int i = 0; i < iterations; i++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < npids; k++) all &= (found = inspect(dirs[k], key, with_status)) == 1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* per pid */
    samples[i] = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / (npids > 0 ? npids : 1);
  }
  qsort(samples, (size_t)iterations, sizeof(double), cmp);
  printf("{\"iterations\":%d,\"pids\":%d,\"medianUs\":%.3f,\"minUs\":%.3f,\"found\":%d}\n", iterations, npids,
         samples[iterations / 2], samples[0], all);
  return all ? 0 : 1;
}
