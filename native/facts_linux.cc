// Linux process facts straight from procfs: the walk (a snapshot of every
// process), and the host's boot id and pid namespace.
//
// Cost model: the walk is one readdir over /proc plus, per process, exactly
// openat + fstat + read + close on /proc/PID/stat into a stack buffer. No
// per-record heap allocation; the output vectors are reserved from the size
// of the previous walk. Two rare cases add one read of /proc/PID/status:
// zombies (is it a leader whose threads still run?) and, for a caller that
// is not root, processes whose stat is owned by root (whose uid that stands
// for is procfs_linux.cc's rule). Inspecting one process is inspect_linux.cc's.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "facts.h"
#include "procfs_linux.h"

namespace proclease {
using namespace linux_detail;
namespace {

std::atomic<size_t> g_lastCount{512};

}  // namespace

const char* PlatformName() { return "linux"; }

int WalkProcesses(PackedSnapshot& out) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return -errno;
  const int dfd = dirfd(dir);
  size_t hint = g_lastCount.load(std::memory_order_relaxed) + 64;
  out.ints.reserve(hint * kIntFields);
  out.starts.reserve(hint);
  char rel[32];
  char task[32];
  ProcRecord rec;
  while (struct dirent* ent = readdir(dir)) {
    const char* name = ent->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    unsigned pid = 0;
    bool numeric = true;
    for (const char* p = name; *p; p++) {
      if (*p < '0' || *p > '9') {
        numeric = false;
        break;
      }
      pid = pid * 10 + static_cast<unsigned>(*p - '0');
    }
    if (!numeric) continue;
    size_t n = FormatUint(rel, pid);
    memcpy(rel + n, "/stat", 6);
    // A process that exits between readdir and openat is simply not listed;
    // a read the host refused (EMFILE, ENOMEM, EIO…) fails the walk: left
    // out, a live process would read as gone.
    if (!linux_detail::ReadStatAt(dfd, rel, rec)) {
      const int err = errno;
      if (linux_detail::HostFailure(err)) {
        closedir(dir);
        return -err;
      }
      continue;
    }
    if (IsDead(rec.state)) continue;
    if (StatOwnerMayHideUid(rec)) {
      rel[n] = '\0';
      const int32_t owner = DirOwner(dfd, rel);
      if (owner < 0 && linux_detail::HostFailure(errno)) {
        const int err = errno;
        closedir(dir);
        return -err;
      }
      if (owner < 0) continue;  // gone since its stat was read
      rec.uid = owner;
    }
    // a zombie leader may still have live threads: only then is status read. A
    // leader merely exiting (not yet Z) is counted as going away: a process
    // being SIGKILLed shows exactly that, with threads not yet flagged.
    if (rec.state == 'Z') {
      StatusFacts status;
      memcpy(rel + n, "/status", 8);
      ReadStatusAt(dfd, rel, status);
      memcpy(task, rel, n);
      memcpy(task + n, "/task", 6);
      if (LiveThreadsBehindZombie(dfd, status, task, rec.pid)) rec.flags |= kRecZombieLeader;
    }
    out.ints.insert(out.ints.end(), {rec.pid, rec.ppid, rec.pgid, rec.sid, rec.uid, rec.state, rec.flags});
    out.starts.push_back(rec.start);
  }
  closedir(dir);
  out.count = out.starts.size();
  g_lastCount.store(out.count, std::memory_order_relaxed);
  return 0;
}

bool BootId(std::string& out) {
  int fd = OpenAt(AT_FDCWD, "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n = Read(fd, buf, sizeof buf);
  Close(fd);
  if (n <= 0) return false;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
  out.assign(buf, static_cast<size_t>(n));
  return !out.empty();
}

bool PidNamespace(std::string& out) {
  char buf[128];
  ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return false;
  out.assign(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace proclease
