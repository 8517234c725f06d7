// Reads and writes confined beneath a root folder, for an ACP agent's
// fs/read_text_file and fs/write_text_file. The agent is hostile input: it
// can swap any folder under the root for a symlink while we work, and plant
// FIFOs and device nodes.
//
// Why this is race-free: no path is ever looked up again by name from "/".
// The root is opened once per request and checked against the identity the
// session pinned (so a root renamed away and replaced is refused), and
// every component after it is resolved relative to a descriptor:
// - Linux 5.6+: openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) resolves
//   the whole path in the kernel, which refuses (EXDEV) any step, `..` or
//   symlink, that would leave the root at the moment it is taken; links
//   that stay beneath are followed.
// - Otherwise (older kernels, seccomp without openat2, macOS): one
//   openat(O_NOFOLLOW | O_DIRECTORY) per folder from the previous folder's
//   descriptor; every symlink is refused (ELOOP), since following one
//   safely would mean resolving it ourselves.
// A folder renamed away after we hold its descriptor is still the folder we
// resolved beneath the root when we took it; a file the agent moves out of
// the root after that is the agent's own doing with its own rights.
//
// Why nothing here blocks: on Linux the target is first opened O_PATH (no
// open of the file itself happens, so a FIFO or a device's open routine is
// never entered) and fstat'ed; only a regular file is then reopened for
// reading or writing through /proc/self/fd, which reopens that very inode.
// On macOS (no O_PATH) the final open is O_NONBLOCK | O_NOCTTY and the
// descriptor is fstat'ed before any read or write. Writes never pass
// O_TRUNC: a regular file is truncated only after fstat said so.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "beneath.h"

#ifdef __linux__
#include <sys/syscall.h>
#ifndef SYS_openat2
#define SYS_openat2 437  // the same on every architecture (asm-generic table)
#endif
#endif

namespace proclease {
namespace {

#ifdef __linux__
// struct open_how and the RESOLVE_* bits of <linux/openat2.h>, which old
// headers lack.
struct OpenHow {
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};
constexpr uint64_t kResolveNoMagiclinks = 0x02;
constexpr uint64_t kResolveBeneath = 0x08;
constexpr int kDirFlags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
#else
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
#endif

// RAII for a descriptor this job opened.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(-1); }
  void reset(int f) {
    if (fd >= 0) close(fd);
    fd = f;
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

int Fail(BeneathResult& out, int step, int err) {
  out.step = step;
  out.err = err < 0 ? err : -err;
  return -1;
}

int OpenatRetry(int dfd, const char* name, int flags, mode_t mode = 0) {
  for (;;) {
    int fd = openat(dfd, name, flags, mode);
    if (fd >= 0 || errno != EINTR) return fd < 0 ? -errno : fd;
  }
}

// The root folder, checked against its pinned identity: a descriptor, or -1 with out set.
int OpenRoot(const BeneathTarget& t, BeneathResult& out) {
  Fd root(OpenatRetry(AT_FDCWD, t.root.c_str(), kDirFlags & ~O_NOFOLLOW));
  if (root.fd < 0) return Fail(out, kBeneathRoot, root.release());
  struct stat st;
  if (fstat(root.fd, &st) != 0) return Fail(out, kBeneathRoot, errno);
  if (static_cast<uint64_t>(st.st_dev) != t.rootDev || static_cast<uint64_t>(st.st_ino) != t.rootIno) return Fail(out, kBeneathRootMoved, EXDEV);
  return root.release();
}

#ifdef __linux__
// openat2 beneath dfd: a descriptor, -errno, or -ENOSYS (or -EPERM) where
// the kernel or a seccomp filter has no openat2. EAGAIN is the kernel
// asking for a retry after a concurrent rename during a `..` step.
int Openat2Beneath(int dfd, const char* path, int flags) {
  OpenHow how{static_cast<uint64_t>(flags | O_CLOEXEC), 0, kResolveBeneath | kResolveNoMagiclinks};
  for (int attempt = 0;; attempt++) {
    long fd = syscall(SYS_openat2, dfd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR || (errno == EAGAIN && attempt < 16)) continue;
    return -errno;
  }
}
#endif

// One folder component beneath dfd without following a symlink: a
// descriptor or -errno (-ELOOP for a symlink, whatever the OS said).
int StepDir(int dfd, const char* name) {
  int fd = OpenatRetry(dfd, name, kDirFlags);
  if (fd >= 0 || (fd != -ENOTDIR && fd != -ELOOP)) return fd;
  struct stat st;
  return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) ? -ELOOP : fd;
}

// The last component beneath dfd, never following a symlink. Linux: an
// O_PATH descriptor (a symlink is opened as itself, and fstat says so);
// macOS: the real open, non-blocking, ELOOP for a symlink.
int OpenLast(int dfd, const char* name, int access) {
#ifdef __linux__
  (void)access;
  return OpenatRetry(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
#else
  return OpenatRetry(dfd, name, access | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
#endif
}

// The walk: every folder of `rel` by StepDir, then its last component by
// OpenLast. A descriptor or -errno.
int Walk(int rootfd, const std::string& rel, int access) {
  if (rel.empty()) return OpenatRetry(rootfd, ".", kDirFlags);
  Fd cur;
  int dfd = rootfd;
  size_t from = 0;
  for (;;) {
    size_t slash = rel.find('/', from);
    std::string name = rel.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    if (slash == std::string::npos) return OpenLast(dfd, name.c_str(), access);
    int next = StepDir(dfd, name.c_str());
    if (next < 0) return next;
    cur.reset(next);
    dfd = cur.fd;
    from = slash + 1;
  }
}

// t.rel beneath the root: openat2 where there is one, else the walk. A
// descriptor (O_PATH on Linux, open for `access` on macOS) or -errno.
int Resolve(int rootfd, const BeneathTarget& t, int access, BeneathResult& out) {
#ifdef __linux__
  if (!t.walkOnly) {
    int fd = Openat2Beneath(rootfd, t.rel.empty() ? "." : t.rel.c_str(), O_PATH);
    // EPERM: a seccomp filter's answer to a syscall it does not know (an
    // O_PATH open has no permission of its own to lack); the walk is as safe.
    if (fd != -ENOSYS && fd != -EPERM) {
      out.how = kHowOpenat2;
      return fd;
    }
  }
#endif
  out.how = kHowWalk;
  return Walk(rootfd, t.rel, access);
}

// The resolved file opened for `access`, non-blocking: Linux reopens the
// O_PATH descriptor's own inode through /proc/self/fd (a gateway host has
// /proc: the process facts need it); macOS's descriptor is open already.
int Reopen(int pfd, int access) {
#ifdef __linux__
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", pfd);
  return OpenatRetry(AT_FDCWD, path, access | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
#else
  (void)access;
  int fd = fcntl(pfd, F_DUPFD_CLOEXEC, 0);
  return fd < 0 ? -errno : fd;
#endif
}

// fstat of the resolved descriptor into out: true for a regular file.
bool CheckRegular(int fd, BeneathResult& out) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Fail(out, kBeneathResolve, errno);
    return false;
  }
  out.mode = static_cast<uint32_t>(st.st_mode);
  out.size = static_cast<double>(st.st_size);
  if (!S_ISREG(st.st_mode)) {
    Fail(out, kBeneathType, 0);
    return false;
  }
  return true;
}

void ReadAll(int fd, size_t maxBytes, BeneathResult& out) {
  // one byte over the bound tells a file that grew since its fstat
  size_t want = static_cast<size_t>(out.size) < maxBytes ? static_cast<size_t>(out.size) + 1 : maxBytes + 1;
  out.data.resize(want);
  size_t len = 0;
  while (len < want) {
    ssize_t n = read(fd, &out.data[len], want - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.data.clear();
      Fail(out, kBeneathIo, errno);
      return;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len == want && want <= maxBytes) {
      want = want * 2 < maxBytes + 1 ? want * 2 : maxBytes + 1;
      out.data.resize(want);
    }
  }
  if (len > maxBytes) {
    out.data.clear();
    Fail(out, kBeneathTooLarge, 0);
    return;
  }
  out.data.resize(len);
  out.step = kBeneathDone;
}

int WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// The folders of `dirRel` beneath rootfd, each made when missing: one
// component at a time, each resolved beneath its parent like Resolve does
// (openat2 there, so a link in it may not leave that folder; StepDir
// otherwise). A descriptor, or -1 with out set.
int MakeDirs(int rootfd, const std::string& dirRel, BeneathResult& out) {
  Fd cur(OpenatRetry(rootfd, ".", kDirFlags));
  if (cur.fd < 0) return Fail(out, kBeneathResolve, cur.release());
  size_t from = 0;
  while (from < dirRel.size()) {
    size_t slash = dirRel.find('/', from);
    std::string name = dirRel.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    from = slash == std::string::npos ? dirRel.size() : slash + 1;
    for (int attempt = 0;; attempt++) {
#ifdef __linux__
      int next = out.how == kHowOpenat2 ? Openat2Beneath(cur.fd, name.c_str(), O_PATH | O_DIRECTORY) : StepDir(cur.fd, name.c_str());
#else
      int next = StepDir(cur.fd, name.c_str());
#endif
      if (next >= 0) {
        cur.reset(next);
        break;
      }
      if (next != -ENOENT || attempt > 0) return Fail(out, kBeneathResolve, next);
      if (mkdirat(cur.fd, name.c_str(), 0777) != 0 && errno != EEXIST) return Fail(out, kBeneathMkdir, errno);
    }
  }
  return cur.release();
}

// An existing regular file's new contents: truncated only once fstat said regular.
void Overwrite(int pfd, const std::string& data, BeneathResult& out) {
  if (!CheckRegular(pfd, out)) return;
  Fd fd(Reopen(pfd, O_WRONLY));
  if (fd.fd < 0) {
    Fail(out, kBeneathOpen, fd.release());
    return;
  }
  int rc = ftruncate(fd.fd, 0) == 0 ? WriteAll(fd.fd, data) : -errno;
  if (rc != 0) {
    Fail(out, kBeneathIo, rc);
    return;
  }
  out.step = kBeneathDone;
}

}  // namespace

void ReadBeneath(const BeneathTarget& t, size_t maxBytes, BeneathResult& out) {
  Fd root(OpenRoot(t, out));
  if (root.fd < 0) return;
  Fd pfd(Resolve(root.fd, t, O_RDONLY, out));
  if (pfd.fd < 0) {
    Fail(out, kBeneathResolve, pfd.release());
    return;
  }
  if (!CheckRegular(pfd.fd, out)) return;
  if (static_cast<size_t>(out.size) > maxBytes) {
    Fail(out, kBeneathTooLarge, 0);
    return;
  }
  Fd fd(Reopen(pfd.fd, O_RDONLY));
  if (fd.fd < 0) {
    Fail(out, kBeneathOpen, fd.release());
    return;
  }
  ReadAll(fd.fd, maxBytes, out);
}

void WriteBeneath(const BeneathTarget& t, const std::string& data, BeneathResult& out) {
  Fd root(OpenRoot(t, out));
  if (root.fd < 0) return;
  size_t slash = t.rel.rfind('/');
  const std::string dirRel = slash == std::string::npos ? "" : t.rel.substr(0, slash);
  const std::string name = slash == std::string::npos ? t.rel : t.rel.substr(slash + 1);
  // An existing file is overwritten; a missing one is created exclusively in
  // its folder, made first when missing. A file that appears between the two
  // is looked at again.
  for (int attempt = 0; attempt < 3; attempt++) {
    Fd pfd(Resolve(root.fd, t, O_WRONLY, out));
    if (pfd.fd >= 0) return Overwrite(pfd.fd, data, out);
    if (pfd.fd != -ENOENT || t.rel.empty()) return (void)Fail(out, kBeneathResolve, pfd.release());
    Fd dir(MakeDirs(root.fd, dirRel, out));
    if (dir.fd < 0) return;
    Fd fd(OpenatRetry(dir.fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644));
    if (fd.fd == -EEXIST) continue;
    if (fd.fd < 0) return (void)Fail(out, kBeneathOpen, fd.release());
    out.created = true;
    out.mode = S_IFREG | 0644;
    int rc = WriteAll(fd.fd, data);
    if (rc != 0) return (void)Fail(out, kBeneathIo, rc);
    out.step = kBeneathDone;
    return;
  }
  Fail(out, kBeneathOpen, EEXIST);
}

}  // namespace proclease
