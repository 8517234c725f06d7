// ConnectAttach: the controller's side of a durable wrapper's door
// (native/wrapper_attach_linux.c is the wrapper's). A Unix stream socket
// connected through /proc/self/fd/<dir>/<name> (so the state dir's path
// length never meets sun_path's 108 bytes), non-blocking and close-on-exec,
// and who listens on it as the kernel says (SO_PEERCRED: the pid and uid of
// the process that called listen()). Deciding whether that peer is the
// lease's wrapper is the TypeScript side's (src/acpx/durable/).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "facts.h"

namespace proclease {

int ConnectAttach(const char* dir, const char* name, int* peer_pid, int* peer_uid) {
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dirfd < 0) return -errno;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  int n = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dirfd, name);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof sa.sun_path || strchr(name, '/') != nullptr) {
    close(dirfd);
    return -ENAMETOOLONG;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    int e = errno;
    close(dirfd);
    return -e;
  }
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof sa);
  } while (rc != 0 && errno == EINTR);
  int e = rc == 0 ? 0 : errno;
  close(dirfd);
  if (e != 0) {
    close(fd);
    return -e;
  }
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
    e = errno;
    close(fd);
    return -e;
  }
  *peer_pid = cr.pid;
  *peer_uid = static_cast<int>(cr.uid);
  return fd;
}

}  // namespace proclease
