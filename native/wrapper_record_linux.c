/*
 * What the native wrapper writes down (Linux): errno names for its reports,
 * and its end record: when it ends its tree with nobody asking (its gateway
 * went away without "end", or a durable window ran out), it says so in
 * <stateDir>/acpx/ends/<lease id>.json, so the reconcile that settles the
 * lease names the wrapper as who ended it, and waits for a sweep under way
 * instead of killing beside it (src/ownership/leases/end-records.ts).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wrapper_linux.h"

static const struct { int no; const char *name; } ERRNAMES[] = {
    {ENOENT, "ENOENT"}, {EACCES, "EACCES"}, {EPERM, "EPERM"}, {ENOEXEC, "ENOEXEC"}, {ENOTDIR, "ENOTDIR"},
    {EISDIR, "EISDIR"}, {ELOOP, "ELOOP"}, {ENAMETOOLONG, "ENAMETOOLONG"}, {E2BIG, "E2BIG"}, {ENOMEM, "ENOMEM"},
    {ETXTBSY, "ETXTBSY"}, {EAGAIN, "EAGAIN"}, {EMFILE, "EMFILE"}, {ENFILE, "ENFILE"}, {EINVAL, "EINVAL"},
    {EIO, "EIO"}, {ESRCH, "ESRCH"}, {EBUSY, "EBUSY"}, {EOPNOTSUPP, "EOPNOTSUPP"}, {ENODEV, "ENODEV"},
    {ENOSPC, "ENOSPC"}, {ENOSYS, "ENOSYS"}, {EUSERS, "EUSERS"}};

const char *wrapper_errname(int e) {
  for (size_t i = 0; i < sizeof ERRNAMES / sizeof ERRNAMES[0]; i++)
    if (ERRNAMES[i].no == e) return ERRNAMES[i].name;
  return "EUNKNOWN";
}

static int end_dir = -1;

void end_record_open(const struct wrapper_state *st) {
  const char *dir = getenv("PROCLEASE_END_DIR");
  if (dir != NULL && st->lease_id != NULL && strchr(st->lease_id, '/') == NULL)
    end_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  unsetenv("PROCLEASE_END_DIR");
}

void end_record(const struct wrapper_state *st, const char *reason, const pid_t *ended, int n) {
  if (end_dir < 0) return;
  char name[96], tmp[112];
  snprintf(name, sizeof name, "%.64s.json", st->lease_id);
  snprintf(tmp, sizeof tmp, ".%s.tmp", name);
  size_t cap = 256 + (size_t)(n > 0 ? n : 0) * 12;
  char *line = malloc(cap);
  if (line == NULL) return;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  size_t o = (size_t)snprintf(line, cap,
                              "{\"leaseId\":\"%.64s\",\"wrapperPid\":%d,\"wrapperStart\":\"%llu\",\"reason\":\"%s\",\"phase\":\"%s\",\"at\":%lld,\"ended\":[",
                              st->lease_id, (int)st->self, st->self_start, reason, ended == NULL ? "sweeping" : "done",
                              (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  for (int i = 0; i < n; i++) o += (size_t)snprintf(line + o, cap - o, i ? ",%d" : "%d", (int)ended[i]);
  snprintf(line + o, cap - o, "]}\n");
  /* written whole, then renamed in: a reader never sees half a record */
  int fd = openat(end_dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ssize_t w = write(fd, line, strlen(line));
    close(fd);
    if (w == (ssize_t)strlen(line)) renameat(end_dir, tmp, end_dir, name);
    else unlinkat(end_dir, tmp, 0);
  }
  free(line);
}

/* JSON string body for a message (quotes, backslashes and control bytes escaped). */
void json_escape(char *out, size_t cap, const char *s) {
  size_t o = 0;
  for (; *s && o + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') out[o++] = '\\', out[o++] = (char)c;
    else if (c < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
    else out[o++] = (char)c;
  }
  out[o] = 0;
}

unsigned long long own_start_time(void) {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long long start = 0;
  if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start);
  return start;
}

