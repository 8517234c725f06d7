/*
 * The durable wrapper's door (Linux): a Unix socket in the state dir's
 * attach folder (0700, the gateway's), and the one rule for who may come in.
 *
 * A process of the agent's uid can read every file and environment of that
 * uid, so nothing a file holds proves a gateway. A kernel fact does: the
 * peer's pid (SO_PEERCRED, taken at its connect) must hold the state dir's
 * lock, an exclusive flock on the lock file this wrapper opened at its start
 * (the inode is pinned by our descriptor, so a file renamed over the lock's
 * name later is not the lock). /proc/locks says who holds a flock on which
 * inode. One gateway per state dir holds that lock; the controller then
 * names the lease and the instance, which the relay compares with its own.
 *
 * The socket is bound and connected through /proc/self/fd/<dir>/<name>, so
 * the length of the state dir's path never meets sun_path's 108 bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wrapper_durable_linux.h"
#include "wrapper_linux.h"

static int via_dirfd(struct sockaddr_un *sa, int dirfd, const char *name) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d/%s", dirfd, name);
  return n > 0 && (size_t)n < sizeof sa->sun_path;
}

void attach_open(struct attach *a, const char *dir, const char *lock_path, const char *lease_id) {
  a->listen_fd = -1;
  a->dirfd = -1;
  a->lock_fd = -1;
  a->why[0] = 0;
  struct stat sb;
  a->lock_fd = open(lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (a->lock_fd < 0 || fstat(a->lock_fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(a->why, sizeof a->why, "the state dir's lock file cannot be opened (%s)", wrapper_errname(errno));
    return;
  }
  a->lock_dev = sb.st_dev;
  a->lock_ino = sb.st_ino;
  a->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (a->dirfd < 0 || fstat(a->dirfd, &sb) != 0 || sb.st_uid != getuid() || (sb.st_mode & 077) != 0) {
    snprintf(a->why, sizeof a->why, "the attach folder is missing or not private (%s)", a->dirfd < 0 ? wrapper_errname(errno) : "mode or owner");
    return;
  }
  if (lease_id == NULL || lease_id[0] == 0 || strlen(lease_id) > 64 || strchr(lease_id, '/') != NULL) {
    snprintf(a->why, sizeof a->why, "no usable lease id in the environment");
    return;
  }
  snprintf(a->name, sizeof a->name, "%s.sock", lease_id);
  struct sockaddr_un sa;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || !via_dirfd(&sa, a->dirfd, a->name)) {
    snprintf(a->why, sizeof a->why, "no socket (%s)", wrapper_errname(errno));
    if (fd >= 0) close(fd);
    return;
  }
  /* a file of that name is never ours (lease ids are new): whatever put it there loses it */
  unlinkat(a->dirfd, a->name, 0);
  mode_t old = umask(0077);
  int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
  umask(old);
  if (rc != 0 || listen(fd, 4) != 0) {
    snprintf(a->why, sizeof a->why, "the socket cannot listen (%s)", wrapper_errname(errno));
    close(fd);
    return;
  }
  a->listen_fd = fd;
}

void attach_waiting(const struct attach *a, long window_ms) {
  char name[112];
  snprintf(name, sizeof name, "%.*s.waiting", (int)(strlen(a->name) - 5), a->name);
  if (a->dirfd < 0) return;
  if (window_ms <= 0) return (void)unlinkat(a->dirfd, name, 0);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  long long since = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  char line[96];
  int n = snprintf(line, sizeof line, "{\"since\":%lld,\"deadline\":%lld}\n", since, since + window_ms);
  int fd = openat(a->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

void attach_close(struct attach *a) {
  attach_waiting(a, 0);
  if (a->listen_fd >= 0 && a->dirfd >= 0) unlinkat(a->dirfd, a->name, 0);
  if (a->listen_fd >= 0) close(a->listen_fd);
  a->listen_fd = -1;
}

/* Whether `pid` holds an exclusive flock on the inode (dev, ino), as /proc/locks lists it. */
static int holds_flock(pid_t pid, dev_t dev, ino_t ino) {
  FILE *f = fopen("/proc/locks", "re");
  if (f == NULL) return 0;
  char line[256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "->") != NULL) continue; /* a waiter, not a holder */
    char type[16], adv[16], rw[16];
    int lpid;
    unsigned maj, min;
    unsigned long long lino;
    if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%llu", type, adv, rw, &lpid, &maj, &min, &lino) != 7) continue;
    found = strcmp(type, "FLOCK") == 0 && strcmp(rw, "WRITE") == 0 && lpid == pid && maj == major(dev) &&
            min == minor(dev) && lino == (unsigned long long)ino;
  }
  fclose(f);
  return found;
}

const char *attach_peer_refusal(const struct attach *a, int conn) {
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.pid <= 0) return "no-credentials";
  if (cr.uid != getuid()) return "another-uid";
  if (a->lock_fd < 0 || !holds_flock(cr.pid, a->lock_dev, a->lock_ino)) return "not-the-lock-holder";
  return NULL;
}

void attach_refuse(int fd, const char *code) {
  frame_write_all(fd, FRAME_REFUSED, code, strlen(code), 200);
  close(fd);
}

int attach_auth(const char *buf, size_t len, const char **refusal) {
  if (len < FRAME_HEAD) return -1;
  size_t want = ((size_t)(unsigned char)buf[1] << 24) | ((size_t)(unsigned char)buf[2] << 16) |
                ((size_t)(unsigned char)buf[3] << 8) | (unsigned char)buf[4];
  if (buf[0] != FRAME_AUTH || want > 256) return *refusal = "bad-auth", 1;
  if (len < FRAME_HEAD + want) return -1;
  char mine[256];
  const char *lease = getenv("OPENCLAW_ACPX_LEASE_ID"), *inst = getenv("OPENCLAW_GATEWAY_INSTANCE_ID");
  int n = snprintf(mine, sizeof mine, "%s\n%s", lease ? lease : "", inst ? inst : "");
  if (!lease || !inst || n <= 0 || (size_t)n != want || memcmp(mine, buf + FRAME_HEAD, want) != 0)
    return *refusal = "not-this-session", 1;
  return 0;
}

int frame_write_all(int fd, char type, const char *payload, size_t len, int ms) {
  unsigned char head[FRAME_HEAD] = {(unsigned char)type, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                                    (unsigned char)(len >> 8), (unsigned char)len};
  const char *parts[2] = {(const char *)head, payload};
  size_t sizes[2] = {FRAME_HEAD, len};
  long long until = wrapper_now_ms() + ms;
  for (int p = 0; p < 2; p++) {
    size_t off = 0;
    while (off < sizes[p]) {
      ssize_t n = write(fd, parts[p] + off, sizes[p] - off);
      if (n > 0) {
        off += (size_t)n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      long long left = until - wrapper_now_ms();
      if (n < 0 && errno == EAGAIN && left > 0) {
        struct pollfd pf = {fd, POLLOUT, 0};
        poll(&pf, 1, (int)left);
        continue;
      }
      return -1;
    }
  }
  return 0;
}

void buf_put(struct buf *b, const void *p, size_t n) {
  memcpy(b->p + b->len, p, n);
  b->len += n;
}

void buf_frame(struct buf *b, char type, const char *p, size_t n) {
  unsigned char h[FRAME_HEAD] = {(unsigned char)type, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                                 (unsigned char)(n >> 8), (unsigned char)n};
  buf_put(b, h, FRAME_HEAD);
  buf_put(b, p, n);
}

size_t buf_room(const struct buf *b) { return DOWN_CAP - b->len; }

int buf_drain(struct buf *b, int fd) {
  while (b->len > 0) {
    ssize_t n = write(fd, b->p, b->len);
    if (n > 0) {
      memmove(b->p, b->p + n, b->len - (size_t)n);
      b->len -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return n < 0 && errno == EAGAIN ? 0 : -1;
    }
  }
  return 0;
}

int buf_flush(struct buf *b, int fd, int ms) {
  long long until = wrapper_now_ms() + ms;
  while (fd >= 0 && b->len > 0 && buf_drain(b, fd) == 0 && b->len > 0) {
    long long left = until - wrapper_now_ms();
    if (left <= 0) break;
    struct pollfd pf = {fd, POLLOUT, 0};
    poll(&pf, 1, (int)left);
  }
  return fd >= 0 && b->len == 0 ? 0 : -1;
}
