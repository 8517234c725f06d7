// What runs is what was installed, and what the gateway's helpers hold stays
// theirs (Linux).
//
// SealedCopy: the bytes of a verified executable in an anonymous memory file
// (memfd) sealed against every write, grow and shrink. Nothing can change a
// sealed memfd afterwards, not the gateway's uid, not root through the file
// (only through the gateway's memory), so a process exec'd from it runs
// exactly the bytes the gateway verified, whatever happens meanwhile to the
// copy on disk. The descriptor is close-on-exec and at least 10: a child
// execs it by "/proc/self/fd/N" (the kernel opens the path before it closes
// close-on-exec descriptors), above the stdio a spawn installs.
//
// SetDumpable: prctl(PR_SET_DUMPABLE). A process that is not dumpable has its
// /proc files owned by root: another process of its uid cannot read its
// environ, memory or descriptors, nor ptrace it; no core file is written.
//
// SetMmapThreshold: mallopt(M_MMAP_THRESHOLD) where the C library is glibc.
// Setting it also ends glibc's dynamic threshold (docs/bounds.md says why).
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "facts.h"

#ifndef SYS_memfd_create
#if defined(__x86_64__)
#define SYS_memfd_create 319
#elif defined(__aarch64__)
#define SYS_memfd_create 279
#endif
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif

namespace proclease {

namespace {

int MemfdCreate(const char* name, unsigned flags) {
#ifdef SYS_memfd_create
  return static_cast<int>(syscall(SYS_memfd_create, name, flags));
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

int SealedCopy(const char* name, const unsigned char* bytes, size_t len) {
  // MFD_EXEC (Linux >= 6.3) keeps the copy executable where vm.memfd_noexec would seal it otherwise; older kernels refuse the flag
  int fd = MemfdCreate(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = MemfdCreate(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, bytes + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      close(fd);
      return -e;
    }
    done += static_cast<size_t>(n);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  int e = errno;
  close(fd);
  return high < 0 ? -e : high;
}

int SetMmapThreshold(int bytes) {
#if defined(__GLIBC__)
  return mallopt(M_MMAP_THRESHOLD, bytes) == 1 ? 0 : -EINVAL;
#else
  (void)bytes;
  return -ENOSYS;
#endif
}

int TrimMalloc() {
#if defined(__GLIBC__)
  return malloc_trim(0);
#else
  return -ENOSYS;
#endif
}

int SetDumpable(bool on) { return prctl(PR_SET_DUMPABLE, on ? 1 : 0, 0, 0, 0) == 0 ? 0 : -errno; }

int GetDumpable() {
  int r = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  return r < 0 ? -errno : r;
}

}  // namespace proclease
