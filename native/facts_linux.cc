// Linux process facts straight from procfs.
//
// Cost model: the walk is one readdir over /proc plus, per process, exactly
// openat + fstat + read + close on /proc/PID/stat into a stack buffer. No
// per-record heap allocation; the output vectors are reserved from the size
// of the previous walk.
//
// uid is the owner of /proc/PID/stat, which the kernel sets to the task's
// effective uid — except for non-dumpable processes (setuid programs,
// prctl(PR_SET_DUMPABLE, 0)), whose /proc files are owned by root. Such a
// process shows uid 0 here. That errs towards "not ours", which is the safe
// direction for an ownership check.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "facts.h"

namespace proclease {
namespace {

std::atomic<size_t> g_lastCount{512};

constexpr long long kPfKthread = 0x00200000;  // PF_KTHREAD in stat field 9

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
  out.flags = (flags & kPfKthread) != 0 ? kRecKernelThread : 0;
  out.start = static_cast<double>(start);
  return true;
}

// Reads up to cap bytes of a small proc file relative to dirfd into buf.
// Returns the length, or -1 when it could not be opened or read.
ssize_t ReadSmallAt(int dirfd, const char* rel, char* buf, size_t cap) {
  int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len < cap) {
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      len = static_cast<size_t>(-1);
      break;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  close(fd);
  return static_cast<ssize_t>(len);
}

// The value after "\nName:\t" in /proc/PID/status text, or nullptr.
const char* StatusField(const char* buf, size_t len, const char* name) {
  size_t nameLen = strlen(name);
  const char* end = buf + len;
  for (const char* line = buf; line < end;) {
    const char* nl = static_cast<const char*>(memchr(line, '\n', static_cast<size_t>(end - line)));
    if (nl == nullptr) nl = end;
    if (static_cast<size_t>(nl - line) > nameLen && memcmp(line, name, nameLen) == 0 && line[nameLen] == ':') {
      const char* v = line + nameLen + 1;
      while (v < nl && (*v == '\t' || *v == ' ')) v++;
      return v;
    }
    line = nl + 1;
  }
  return nullptr;
}

bool StatusInt(const char* buf, size_t len, const char* name, long long& v) {
  const char* p = StatusField(buf, len, name);
  if (p == nullptr) return false;
  Cursor c{p, buf + len};
  return c.Int(v);
}

// A zombie thread-group leader whose other threads still run (the main
// thread called pthread_exit): /proc/PID/stat says Z, yet the process lives.
// status "Threads:" counts the leader until it is reaped, so > 1 means live
// threads; when status cannot say, /proc/PID/task is counted instead.
bool LiveThreadsBehindZombie(int dirfd, const char* statusRel, const char* taskRel) {
  char buf[8192];
  ssize_t n = ReadSmallAt(dirfd, statusRel, buf, sizeof buf);
  long long threads = 0;
  if (n > 0 && StatusInt(buf, static_cast<size_t>(n), "Threads", threads)) return threads > 1;
  int fd = openat(dirfd, taskRel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return false;
  }
  int tasks = 0;
  while (struct dirent* ent = readdir(dir)) {
    if (ent->d_name[0] != '.') tasks++;
  }
  closedir(dir);
  return tasks > 1;
}

// A dead ('X', or 'x' on 2.6.33-3.13 kernels) task is on its way out of the
// table: its ids read as -1 and nothing about it can be checked. Gone.
bool IsDead(int32_t state) { return state == 'X' || state == 'x'; }

// Reads a whole (possibly large) proc file relative to dirfd. Returns 0 or errno.
int ReadWholeAt(int dirfd, const char* rel, std::string& out) {
  int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[8192];
  int err = 0;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
    }
    break;
  }
  close(fd);
  return err;
}

// Strips exactly one trailing NUL and splits on NUL: "a\0\0b\0" → a, "", b.
// An empty file (kernel thread, zombie) is an empty argv.
void SplitNul(const std::string& data, std::vector<std::string>& out) {
  if (data.empty()) return;
  size_t len = data.size();
  if (data[len - 1] == '\0') len--;
  size_t from = 0;
  for (;;) {
    size_t at = data.find('\0', from);
    if (at == std::string::npos || at >= len) {
      out.emplace_back(data, from, len - from);
      return;
    }
    out.emplace_back(data, from, at - from);
    from = at + 1;
  }
}

// Picks only the requested keys out of a NUL-separated environ block; the
// first occurrence wins, as with getenv(3).
void PickEnv(const std::string& data, const std::vector<std::string>& keys,
             std::vector<std::pair<std::string, std::string>>& out) {
  std::vector<bool> found(keys.size(), false);
  size_t from = 0;
  while (from < data.size()) {
    size_t at = data.find('\0', from);
    if (at == std::string::npos) at = data.size();
    size_t eq = data.find('=', from);
    if (eq != std::string::npos && eq < at) {
      size_t keyLen = eq - from;
      for (size_t k = 0; k < keys.size(); k++) {
        if (found[k] || keys[k].size() != keyLen) continue;
        if (data.compare(from, keyLen, keys[k]) != 0) continue;
        found[k] = true;
        out.emplace_back(keys[k], data.substr(eq + 1, at - eq - 1));
        break;
      }
    }
    from = at + 1;
  }
}

}  // namespace

namespace linux_detail {

bool ReadStatAt(int dirfd, const char* rel, ProcRecord& out) {
  int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  char buf[4096];
  ssize_t n = ok ? read(fd, buf, sizeof buf) : -1;
  close(fd);
  if (n <= 0) return false;
  out.uid = static_cast<int32_t>(st.st_uid);
  return ParseStat(buf, static_cast<size_t>(n), out);
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
    // A process that exits between readdir and openat is simply not listed.
    if (!linux_detail::ReadStatAt(dfd, rel, rec) || IsDead(rec.state)) continue;
    if (rec.state == 'Z') {
      // rare: only zombies pay for the status read
      char task[32];
      memcpy(rel + n, "/status", 8);
      memcpy(task, rel, n);
      memcpy(task + n, "/task", 6);
      if (LiveThreadsBehindZombie(dfd, rel, task)) rec.flags |= kRecZombieLeader;
    }
    out.ints.insert(out.ints.end(), {rec.pid, rec.ppid, rec.pgid, rec.sid, rec.uid, rec.state, rec.flags});
    out.starts.push_back(rec.start);
  }
  closedir(dir);
  out.count = out.starts.size();
  g_lastCount.store(out.count, std::memory_order_relaxed);
  return 0;
}

bool InspectProcess(int pid, const std::vector<std::string>& envKeys, ProcDetails& out) {
  char path[32];
  snprintf(path, sizeof path, "/proc/%d", pid);
  // Every read below goes through this directory fd: once open, it stays
  // bound to this process, so a pid reused mid-inspect can never mix two
  // processes' facts (reads fail instead).
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return false;
  if (!linux_detail::ReadStatAt(dfd, "stat", out.rec) || IsDead(out.rec.state)) {
    close(dfd);
    return false;
  }
  if (out.rec.state == 'Z' && LiveThreadsBehindZombie(dfd, "status", "task")) out.rec.flags |= kRecZombieLeader;
  bool partial = false;

  char link[PATH_MAX + 64];
  ssize_t n = readlinkat(dfd, "exe", link, sizeof link);
  if (n >= 0 && static_cast<size_t>(n) < sizeof link) {
    out.hasExe = true;  // " (deleted)" suffix kept verbatim on purpose
    out.exe.assign(link, static_cast<size_t>(n));
  } else if (n < 0 && errno == ESRCH) {
    partial = true;
  }

  std::string data;
  int err = ReadWholeAt(dfd, "cmdline", data);
  if (err == 0) {
    out.hasArgv = true;
    SplitNul(data, out.argv);
  } else if (err == ESRCH || err == ENOENT) {
    partial = true;
  }

  data.clear();
  err = ReadWholeAt(dfd, "environ", data);
  if (err == 0) {
    out.envReadable = true;
    if (!envKeys.empty()) PickEnv(data, envKeys, out.env);
  } else if (err == ESRCH || err == ENOENT) {
    partial = true;
  }

  // A read failed the way a dying process fails: if it is gone now, say so;
  // if it is a zombie now, report its current state.
  if (partial) {
    if (!linux_detail::ReadStatAt(dfd, "stat", out.rec) || IsDead(out.rec.state)) {
      close(dfd);
      return false;
    }
    if (out.rec.state == 'Z' && LiveThreadsBehindZombie(dfd, "status", "task")) out.rec.flags |= kRecZombieLeader;
  }
  close(dfd);
  return true;
}

bool BootId(std::string& out) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
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
