// Linux process facts straight from procfs.
//
// Cost model: the walk is one readdir over /proc plus, per process, exactly
// openat + fstat + read + close on /proc/PID/stat into a stack buffer. No
// per-record heap allocation; the output vectors are reserved from the size
// of the previous walk. Two rare cases add one read of /proc/PID/status:
// zombies (is it a leader whose threads still run?) and, for a caller that
// is not root, processes whose stat is owned by root (see uid below).
//
// uid. The owner of /proc/PID/stat is the task's effective uid, except for
// a non-dumpable process (setuid without exec, ruid != euid at exec,
// prctl(PR_SET_DUMPABLE, 0)) and a zombie, whose /proc files belong to root.
// The kernel's rule (task_dump_owner) exempts the world-readable
// directories: /proc/PID itself is always owned by the effective uid. So the
// walk takes the stat owner, and only for a root-owned stat of a process
// that is not a kernel thread asks the directory (one fstatat): a root
// process pays one cheap syscall, every other process nothing. inspect reads
// "Uid:" from status (uid = effective, realUid = real).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>

#include "facts.h"
#include "procargs.h"

namespace proclease {
namespace {

std::atomic<size_t> g_lastCount{512};

// openat, read and close straight to the kernel. libc's wrappers of these
// are pthread cancellation points, and in a multi-threaded process (every
// Node process) each call pays the cancellation bookkeeping around its
// syscall. Nothing here is ever cancelled, so the raw syscall is the same
// call without that cost (on the walk: three of its four syscalls per process).
int OpenAt(int dirfd, const char* path, int flags) {
  return static_cast<int>(syscall(SYS_openat, dirfd, path, flags));
}
ssize_t Read(int fd, void* buf, size_t len) { return static_cast<ssize_t>(syscall(SYS_read, fd, buf, len)); }
void Close(int fd) { syscall(SYS_close, fd); }

constexpr long long kPfKthread = 0x00200000;  // PF_KTHREAD in stat field 9
constexpr long long kPfExiting = 0x00000004;  // PF_EXITING in stat field 9

// Writes the decimal digits of v to dst; returns the length.
size_t FormatUint(char* dst, unsigned v) {
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) dst[i] = tmp[n - 1 - i];
  return n;
}

// Minimal cursor over the space-separated fields after "comm)".
struct Cursor {
  const char* p;
  const char* end;
  void SkipField() {
    while (p < end && *p != ' ') p++;
    if (p < end) p++;
  }
  bool Int(long long& v) {
    bool neg = false;
    if (p < end && *p == '-') {
      neg = true;
      p++;
    }
    if (p >= end || *p < '0' || *p > '9') return false;
    unsigned long long acc = 0;
    while (p < end && *p >= '0' && *p <= '9') acc = acc * 10 + static_cast<unsigned>(*p++ - '0');
    v = neg ? -static_cast<long long>(acc) : static_cast<long long>(acc);
    if (p < end && *p == ' ') p++;
    return true;
  }
};

// Parses "pid (comm) S ppid pgrp session ... starttime ...". comm may hold
// spaces, parentheses and even ") (", so the fields start after the LAST ')'.
bool ParseStat(const char* buf, size_t len, ProcRecord& out) {
  const char* open = static_cast<const char*>(memchr(buf, '(', len));
  const char* rparen = static_cast<const char*>(memrchr(buf, ')', len));
  if (open == nullptr || rparen == nullptr || rparen < open || rparen + 2 >= buf + len) return false;
  Cursor pidc{buf, open};
  long long pid = 0;
  if (!pidc.Int(pid)) return false;
  Cursor c{rparen + 2, buf + len};  // skip ") "
  out.pid = static_cast<int32_t>(pid);
  out.state = static_cast<unsigned char>(*c.p);
  c.SkipField();  // field 3: state
  long long ppid = 0, pgrp = 0, sid = 0, flags = 0, start = 0;
  if (!c.Int(ppid) || !c.Int(pgrp) || !c.Int(sid)) return false;  // fields 4-6
  c.SkipField();                                                  // 7: tty_nr
  c.SkipField();                                                  // 8: tpgid
  if (!c.Int(flags)) return false;                                // 9: flags (PF_*)
  for (int field = 10; field < 22; field++) c.SkipField();
  if (!c.Int(start)) return false;  // field 22: starttime, clock ticks since boot
  out.ppid = static_cast<int32_t>(ppid);
  out.pgid = static_cast<int32_t>(pgrp);
  out.sid = static_cast<int32_t>(sid);
  out.flags = ((flags & kPfKthread) != 0 ? kRecKernelThread : 0) | ((flags & kPfExiting) != 0 ? kRecExiting : 0);
  out.start = static_cast<double>(start);
  return true;
}

// Reads up to cap bytes of a small proc file relative to dirfd into buf.
// Returns the length, or -1 when it could not be opened or read.
ssize_t ReadSmallAt(int dirfd, const char* rel, char* buf, size_t cap) {
  int fd = OpenAt(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len < cap) {
    ssize_t n = Read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      len = static_cast<size_t>(-1);
      break;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  Close(fd);
  return static_cast<ssize_t>(len);
}

// The "Tgid:", "Uid:" and "Threads:" lines of /proc/PID/status; -1 where a
// line is missing or malformed.
struct StatusFacts {
  long long tgid = -1;
  long long ruid = -1;
  long long euid = -1;
  long long threads = -1;
};

// Parses decimal digits at p (after any tabs/spaces); -1 if there are none.
long long StatusNumber(const char*& p, const char* end) {
  while (p < end && (*p == '\t' || *p == ' ')) p++;
  if (p >= end || *p < '0' || *p > '9') return -1;
  long long v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
  return v;
}

void ParseStatus(const char* buf, size_t len, StatusFacts& out) {
  const char* end = buf + len;
  for (const char* line = buf; line < end;) {
    const char* nl = static_cast<const char*>(memchr(line, '\n', static_cast<size_t>(end - line)));
    if (nl == nullptr) nl = end;
    const size_t n = static_cast<size_t>(nl - line);
    const char* v = nullptr;
    if (n > 5 && memcmp(line, "Tgid:", 5) == 0) {
      v = line + 5;
      out.tgid = StatusNumber(v, nl);
    } else if (n > 4 && memcmp(line, "Uid:", 4) == 0) {
      v = line + 4;
      out.ruid = StatusNumber(v, nl);
      out.euid = StatusNumber(v, nl);
    } else if (n > 8 && memcmp(line, "Threads:", 8) == 0) {
      v = line + 8;
      out.threads = StatusNumber(v, nl);
      break;  // the last line we need
    }
    line = nl + 1;
  }
}

// status is a page of text at most (Groups: aside); 8 KiB holds every
// line we read on any machine we know of.
bool ReadStatusAt(int dirfd, const char* rel, StatusFacts& out) {
  char buf[8192];
  ssize_t n = ReadSmallAt(dirfd, rel, buf, sizeof buf);
  if (n <= 0) return false;
  ParseStatus(buf, static_cast<size_t>(n), out);
  return true;
}

// Whether a zombie thread-group leader (its main thread called
// pthread_exit: /proc/PID/stat says Z) still has a live thread: one in
// task/ that is neither a zombie, dead, nor inside exit(2). status
// "Threads:" counts the leader until it is waited for, so "Threads: 1" (or
// less) answers no without reading task/. A dying multi-threaded process
// (node, say) shows "Threads: 5" for a moment with every thread on its way
// out: that process is not alive. The same rule as src/facts/procfs.ts.
bool LiveThreadsBehindZombie(int dirfd, const StatusFacts& status, const char* taskRel, int leader) {
  if (status.threads >= 0 && status.threads <= 1) return false;
  int fd = OpenAt(dirfd, taskRel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    Close(fd);
    return false;
  }
  bool live = false;
  char rel[96];
  while (struct dirent* ent = readdir(dir)) {
    if (ent->d_name[0] < '0' || ent->d_name[0] > '9') continue;
    int n = snprintf(rel, sizeof rel, "%s/%s/stat", taskRel, ent->d_name);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof rel) continue;
    ProcRecord t;
    if (!linux_detail::ReadStatAt(dirfd, rel, t) || t.pid == leader) continue;
    if (t.state != 'Z' && t.state != 'X' && t.state != 'x' && (t.flags & kRecExiting) == 0) {
      live = true;
      break;
    }
  }
  closedir(dir);
  return live;
}

// Whether a record's stat owner may not be its uid: a root-owned stat of a
// process that is not a kernel thread may be a non-dumpable process of
// another uid, whose /proc files the kernel gives to root. Then the walk and
// a listed inspect ask the pid directory's owner (DirOwner).
bool StatOwnerMayHideUid(const ProcRecord& rec) { return rec.uid == 0 && (rec.flags & kRecKernelThread) == 0; }

// The effective uid of /proc/<rel> (a pid directory): its owner, whatever
// the process's dumpability (see the header). -1 when it is gone.
int32_t DirOwner(int dirfd, const char* rel) {
  struct stat st;
  // "" is the directory dirfd itself (AT_EMPTY_PATH: an fstat, no lookup)
  if (fstatat(dirfd, rel, &st, rel[0] == '\0' ? AT_EMPTY_PATH : 0) != 0) return -1;
  return static_cast<int32_t>(st.st_uid);
}

// A dead ('X', or 'x' on 2.6.33-3.13 kernels) task is on its way out of the
// table: its ids read as -1 and nothing about it can be checked. Gone.
bool IsDead(int32_t state) { return state == 'X' || state == 'x'; }

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

}  // namespace

namespace linux_detail {

bool ReadStatAt(int dirfd, const char* rel, ProcRecord& out) {
  int fd = OpenAt(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  char buf[4096];
  ssize_t n = ok ? Read(fd, buf, sizeof buf) : -1;
  const int err = n < 0 ? errno : 0;
  Close(fd);
  errno = err;  // the caller tells a gone process from a failing host by it (HostFailure)
  if (n <= 0) return false;
  out.uid = static_cast<int32_t>(st.st_uid);
  return ParseStat(buf, static_cast<size_t>(n), out);
}

bool HostFailure(int err) {
  switch (err) {
    case 0:
    case ENOENT:
    case ESRCH:
    case EACCES:  // hidden (hidepid, an LSM): not ours to read, like the procfs backend
    case EPERM:
    case EINVAL:
      return false;
    default:
      return true;
  }
}


}  // namespace linux_detail

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

namespace {

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
