// The calling thread's CPU time, for measuring what a call costs the main
// thread without counting the time the scheduler gave to others (a shared
// host preempts the event loop for milliseconds). Node 20 has no per-thread
// clock of its own. POSIX (CLOCK_THREAD_CPUTIME_ID) on Linux and macOS.
#include <time.h>

#include "facts.h"

namespace proclease {

double ThreadCpuTimeNs() {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace proclease
