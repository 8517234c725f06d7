// flock(2) for the state-dir lock: the kernel drops it when the holder dies
// (its last descriptor closes), which a pid file alone cannot promise.
// POSIX on both Linux and macOS, so one file serves both builds.
#include <sys/file.h>

#include <cerrno>

#include "facts.h"

namespace proclease {

int LockExclusive(int fd) {
  if (fd < 0) return -EBADF;
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

}  // namespace proclease
