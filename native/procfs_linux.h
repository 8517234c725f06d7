// The /proc readers the Linux walk (facts_linux.cc) and inspect
// (inspect_linux.cc) share: raw syscalls, a pid's stat and status, the owner
// of its directory, and whether a zombie leader has live threads.
#pragma once
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "facts.h"

namespace proclease::linux_detail {

// openat, read and close straight to the kernel. libc's wrappers of these
// are pthread cancellation points, and in a multi-threaded process (every
// Node process) each call pays the cancellation bookkeeping around its
// syscall. Nothing here is ever cancelled, so the raw syscall is the same
// call without that cost (on the walk: three of its four syscalls per process).
inline int OpenAt(int dirfd, const char* path, int flags) {
  return static_cast<int>(syscall(SYS_openat, dirfd, path, flags));
}
inline ssize_t Read(int fd, void* buf, size_t len) { return static_cast<ssize_t>(syscall(SYS_read, fd, buf, len)); }
inline void Close(int fd) { syscall(SYS_close, fd); }

// Writes the decimal digits of v to dst; returns the length.
inline size_t FormatUint(char* dst, unsigned v) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) dst[i] = tmp[n - 1 - i];
  return n;
}

// The "Tgid:", "Uid:" and "Threads:" lines of /proc/PID/status; -1 where a
// line is missing or malformed.
struct StatusFacts {
  long long tgid = -1;
  long long ruid = -1;
  long long euid = -1;
  long long threads = -1;
};

// Reads and parses `rel` (a "status" file) relative to dirfd; false when it
// could not be read.
bool ReadStatusAt(int dirfd, const char* rel, StatusFacts& out);

// Whether a zombie thread-group leader (its main thread called
// pthread_exit: /proc/PID/stat says Z) still has a live thread: one in
// task/ that is neither a zombie, dead, nor inside exit(2). status
// "Threads:" counts the leader until it is waited for, so "Threads: 1" (or
// less) answers no without reading task/. A dying multi-threaded process
// (node, say) shows "Threads: 5" for a moment with every thread on its way
// out: that process is not alive. The same rule as src/facts/procfs.ts.
bool LiveThreadsBehindZombie(int dirfd, const StatusFacts& status, const char* taskRel, int leader);

// Whether a record's stat owner may not be its uid: a root-owned stat of a
// process that is not a kernel thread may be a non-dumpable process of
// another uid, whose /proc files the kernel gives to root. Then the walk and
// a listed inspect ask the pid directory's owner (DirOwner).
inline bool StatOwnerMayHideUid(const ProcRecord& rec) { return rec.uid == 0 && (rec.flags & kRecKernelThread) == 0; }

// The effective uid of /proc/<rel> (a pid directory): its owner, whatever
// the process's dumpability (see procfs_linux.cc). -1 when it is gone.
int32_t DirOwner(int dirfd, const char* rel);

// A dead ('X', or 'x' on 2.6.33-3.13 kernels) task is on its way out of the
// table: its ids read as -1 and nothing about it can be checked. Gone.
inline bool IsDead(int32_t state) { return state == 'X' || state == 'x'; }

}  // namespace proclease::linux_detail
