// Reaping a child that the addon's caller spawned and already saw exit:
// waitpid without blocking, the same call on Linux and macOS.
#include <sys/types.h>
#include <sys/wait.h>

#include <cerrno>

#include "facts.h"

namespace proclease {

bool ReapChild(int pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid;
}

}  // namespace proclease
