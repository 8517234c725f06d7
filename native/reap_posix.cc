// Collecting a child that has exited, without waiting for one that has not:
// waitpid with WNOHANG is the same call on Linux and macOS, so it lives here
// once rather than in each OS's file.
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
