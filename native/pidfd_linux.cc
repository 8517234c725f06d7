// Identity-checked signalling and child handling on Linux.
//
// Why a pidfd makes the check race-free: pidfd_open pins the process that
// owns `pid` at that instant. We then read the start time of whoever owns
// `pid` now. If it equals the expected start time, the expected process was
// alive after the pidfd was opened, and since a pid is never reused while
// its process lives, the pidfd refers to exactly that process; any later
// exit makes pidfd_send_signal fail with ESRCH instead of hitting a
// newcomer. (If the pid had been reused before pidfd_open, the newcomer's
// start time is later than the expected one, so we answer "mismatch".)
//
// Limit: start times are clock ticks (usually 10 ms). A pid handed to a new
// process within the same tick as the old one started would compare equal;
// reaching the same pid number again needs the whole pid space to wrap (or
// ns_last_pid, which needs CAP_SYS_ADMIN), so no real workload gets there in
// one tick.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "facts.h"

// Same numbers on every architecture we build for (x86_64, arm64, and the
// asm-generic table); old libc headers may simply not name them.
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

namespace proclease {
namespace {

int PidfdOpen(int pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// Start time of whoever owns `pid` right now; false when nobody does.
bool CurrentStart(int pid, double& start) {
  char rel[32];
  snprintf(rel, sizeof rel, "/proc/%d/stat", pid);
  ProcRecord rec;
  if (!linux_detail::ReadStatAt(AT_FDCWD, rel, rec)) return false;
  start = rec.start;
  return true;
}

}  // namespace

bool PidfdSupported() {
  int fd = PidfdOpen(getpid());
  if (fd < 0) return false;
  // Signal 0 to ourselves: proves pidfd_send_signal exists and is allowed
  // (seccomp profiles may block one but not the other).
  bool ok = PidfdSendSignal(fd, 0) == 0;
  close(fd);
  return ok;
}

SignalResult SignalIfSame(int pid, double expectedStart, int sig) {
  int fd = PidfdOpen(pid);
  if (fd < 0) {
    // EPERM here comes from seccomp filters that reject unknown syscalls,
    // not from process permissions (pidfd_open checks none): "unsupported".
    return errno == ESRCH ? SignalResult::kGone : SignalResult::kUnsupported;
  }
  SignalResult result;
  double start = 0;
  if (!CurrentStart(pid, start)) {
    result = SignalResult::kGone;
  } else if (start != expectedStart) {
    result = SignalResult::kMismatch;
  } else if (PidfdSendSignal(fd, sig) == 0) {
    result = SignalResult::kSignalled;
  } else if (errno == EPERM) {
    result = SignalResult::kDenied;
  } else if (errno == ESRCH) {
    result = SignalResult::kGone;
  } else {
    result = SignalResult::kUnsupported;  // ENOSYS, EINVAL: nothing was sent
  }
  close(fd);
  return result;
}

int SetChildSubreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -errno; }

int SetParentDeathSignal(int sig) {
  return prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(sig), 0, 0, 0) == 0 ? 0 : -errno;
}

// The calling thread's nsproxy only: a child forked from this thread afterwards
// (libuv forks from the thread that calls spawn) is born in the new namespace.
int UnshareCgroupNamespace() { return unshare(CLONE_NEWCGROUP) == 0 ? 0 : -errno; }

}  // namespace proclease
