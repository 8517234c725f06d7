// The Linux /proc readers: a pid's stat and status parsed without
// allocating, the owner of its directory, live threads behind a zombie, and
// which read errors mean the host refused rather than the process is gone.
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

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "procfs_linux.h"

namespace proclease::linux_detail {
namespace {

constexpr long long kPfKthread = 0x00200000;  // PF_KTHREAD in stat field 9
constexpr long long kPfExiting = 0x00000004;  // PF_EXITING in stat field 9

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

}  // namespace

// status is a page of text at most (Groups: aside); 8 KiB holds every
// line we read on any machine we know of.
bool ReadStatusAt(int dirfd, const char* rel, StatusFacts& out) {
  char buf[8192];
  ssize_t n = ReadSmallAt(dirfd, rel, buf, sizeof buf);
  if (n <= 0) return false;
  ParseStatus(buf, static_cast<size_t>(n), out);
  return true;
}

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

int32_t DirOwner(int dirfd, const char* rel) {
  struct stat st;
  // "" is the directory dirfd itself (AT_EMPTY_PATH: an fstat, no lookup)
  if (fstatat(dirfd, rel, &st, rel[0] == '\0' ? AT_EMPTY_PATH : 0) != 0) return -1;
  return static_cast<int32_t>(st.st_uid);
}

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

}  // namespace proclease::linux_detail
