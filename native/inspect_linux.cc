// Linux inspect: one process's facts (identity, exe, argv, the environment
// keys asked for) read through its pinned /proc/PID directory, so a pid
// reused mid-inspect never mixes two processes' facts.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "facts.h"
#include "procargs.h"
#include "procfs_linux.h"

namespace proclease {
using namespace linux_detail;
namespace {

// A per-thread buffer for cmdline and environ: inspect runs on every
// verification, and these reads are most of its allocations otherwise.
struct Scratch {
  std::unique_ptr<char[]> data;
  size_t cap = 0;
  size_t len = 0;
  static constexpr size_t kInitial = 16 * 1024;
  static constexpr size_t kKeep = 1024 * 1024;  // give back what one huge environment grew
  void Trim() {
    if (cap > kKeep) {
      data.reset();
      cap = 0;
    }
  }
};
thread_local Scratch t_cmdline;
thread_local Scratch t_environ;

// Reads a whole (possibly large) proc file relative to dirfd into b.
// Returns 0 or errno.
int ReadWholeAt(int dirfd, const char* rel, Scratch& b) {
  int fd = OpenAt(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  if (b.cap == 0) {
    b.data.reset(new char[Scratch::kInitial]);
    b.cap = Scratch::kInitial;
  }
  b.len = 0;
  int err = 0;
  for (;;) {
    if (b.len == b.cap) {
      std::unique_ptr<char[]> bigger(new char[b.cap * 2]);
      memcpy(bigger.get(), b.data.get(), b.len);
      b.data = std::move(bigger);
      b.cap *= 2;
    }
    ssize_t n = Read(fd, b.data.get() + b.len, b.cap - b.len);
    if (n > 0) {
      b.len += static_cast<size_t>(n);
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
    }
    break;
  }
  Close(fd);
  return err;
}

// Strips exactly one trailing NUL and splits on NUL: "a\0\0b\0" → a, "", b.
// An empty file (kernel thread, zombie) is an empty argv.
void SplitNul(const char* data, size_t size, std::vector<std::string>& out) {
  if (size == 0) return;
  size_t len = data[size - 1] == '\0' ? size - 1 : size;
  const char* p = data;
  const char* end = data + len;
  for (;;) {
    const char* nul = static_cast<const char*>(memchr(p, '\0', static_cast<size_t>(end - p)));
    if (nul == nullptr) {
      out.emplace_back(p, static_cast<size_t>(end - p));
      return;
    }
    out.emplace_back(p, static_cast<size_t>(nul - p));
    p = nul + 1;
  }
}

// stat + status through the pinned directory: the record with uid and
// realUid from status (with `listed`, see InspectProcess in facts.h: stat
// and the directory's owner, status only for a zombie). 0 = ok, 1 = gone
// (or dead), 2 = not a thread-group leader (a tid is not a process),
// 3 = status unreadable (dying, or denied by an LSM): the record stands on
// stat alone (uid = the stat owner), 4 = the host refused the read (errno
// says why).
int ReadIdentity(int dfd, int pid, ProcDetails& out, bool listed) {
  if (!linux_detail::ReadStatAt(dfd, "stat", out.rec)) return linux_detail::HostFailure(errno) ? 4 : 1;
  if (IsDead(out.rec.state)) return 1;
  if (listed && out.rec.state != 'Z') {
    if (StatOwnerMayHideUid(out.rec)) {
      const int32_t owner = DirOwner(dfd, "");
      if (owner < 0) return linux_detail::HostFailure(errno) ? 4 : 1;
      out.rec.uid = owner;
    }
    return 0;
  }
  StatusFacts status;
  if (!ReadStatusAt(dfd, "status", status)) return 3;
  if (status.tgid >= 0 && status.tgid != pid) return 2;
  if (status.euid >= 0 && status.ruid >= 0) {
    out.rec.uid = static_cast<int32_t>(status.euid);
    out.realUid = static_cast<int32_t>(status.ruid);
  }
  if (out.rec.state == 'Z' && LiveThreadsBehindZombie(dfd, status, "task", pid)) {
    out.rec.flags |= kRecZombieLeader;
  }
  return 0;
}

}  // namespace

int InspectProcess(int pid, const std::vector<std::string>& envKeys, ProcDetails& out, bool listed) {
  char path[32];
  memcpy(path, "/proc/", 6);
  path[6 + FormatUint(path + 6, static_cast<unsigned>(pid))] = '\0';
  // Every read below goes through this directory fd: once open, it stays
  // bound to this process, so a pid reused mid-inspect can never mix two
  // processes' facts (reads fail instead).
  int dfd = OpenAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return linux_detail::HostFailure(errno) ? -errno : kInspectGone;
  int id = ReadIdentity(dfd, pid, out, listed);
  if (id == 4) {
    const int err = errno;
    Close(dfd);
    return -err;
  }
  if (id == 1 || id == 2) {
    Close(dfd);
    return kInspectGone;
  }
  bool partial = id == 3;

  char link[PATH_MAX + 64];
  ssize_t n = readlinkat(dfd, "exe", link, sizeof link);
  if (n >= 0 && static_cast<size_t>(n) < sizeof link) {
    out.hasExe = true;  // " (deleted)" suffix kept verbatim on purpose
    out.exe.assign(link, static_cast<size_t>(n));
  } else if (n < 0 && errno == ESRCH) {
    partial = true;
  }
  // ENAMETOOLONG (a path longer than a page), EACCES, ENOENT (kernel
  // thread, zombie): exePath stays null, never a throw and never a guess.

  int err = ReadWholeAt(dfd, "cmdline", t_cmdline);
  if (err == 0) {
    out.hasArgv = true;
    SplitNul(t_cmdline.data.get(), t_cmdline.len, out.argv);
  } else if (err == ESRCH || err == ENOENT) {
    partial = true;
  }
  t_cmdline.Trim();

  if (envKeys.empty()) {
    // Nothing to pick: opening answers the permission question alone
    // (environ checks ptrace access at open time).
    int fd = OpenAt(dfd, "environ", O_RDONLY | O_CLOEXEC);
    err = fd >= 0 ? 0 : errno;
    if (fd >= 0) Close(fd);
    out.envReadable = fd >= 0;
  } else {
    err = ReadWholeAt(dfd, "environ", t_environ);
    if (err == 0) {
      out.envReadable = true;
      procargs::PickEnv(t_environ.data.get(), t_environ.data.get() + t_environ.len, envKeys, out.env);
    }
    t_environ.Trim();
  }
  if (err == ESRCH || err == ENOENT) partial = true;

  // A read failed the way a dying process fails: if it is gone now, say so;
  // if it is a zombie now, report its current state.
  if (partial) {
    out.realUid = -1;
    int again = ReadIdentity(dfd, pid, out, listed);
    if (again == 4) {
      const int err = errno;
      Close(dfd);
      return -err;
    }
    if (again == 1 || again == 2) {
      Close(dfd);
      return kInspectGone;
    }
  }
  Close(dfd);
  return kInspectFound;
}

}  // namespace proclease
