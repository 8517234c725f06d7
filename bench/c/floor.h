/* What both C floors share: they are made from a process like Node's and make
 * their syscalls the way the addon does.
 * - One idle thread keeps the file table shared, so the kernel counts
 *   references on every fd lookup, as it does for Node's.
 * - The syscalls go straight to the kernel (raw openat, read, close): libc's
 *   wrappers are cancellation points that cost extra in a multi-threaded
 *   process.
 */
#ifndef PROCLEASE_BENCH_FLOOR_H
#define PROCLEASE_BENCH_FLOOR_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sys_openat(int dfd, const char *path, int flags) { return (int)syscall(SYS_openat, dfd, path, flags); }
static ssize_t sys_read(int fd, void *buf, size_t len) { return (ssize_t)syscall(SYS_read, fd, buf, len); }
static void sys_close(int fd) { syscall(SYS_close, fd); }

static void *idle(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static void become_multithreaded(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, idle, NULL) != 0) {
    perror("pthread_create");
    exit(2);
  }
}

/* qsort's order for the samples, whose median and minimum are printed */
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
