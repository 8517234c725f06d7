// macOS process facts from libproc and sysctl. Not compiled on the Linux CI
// machine: written against the documented <libproc.h>, <sys/proc_info.h> and
// <sys/sysctl.h> interfaces.
//
// Identity: start = pbi_start_tvsec * 1e6 + pbi_start_tvusec (microseconds
// since the epoch), exact in a double until the year 2255.
#include <errno.h>
#include <libproc.h>
#include <signal.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "facts.h"

namespace proclease {
namespace {

// p_stat values from <sys/proc.h>; mapped to the letters ps(1) prints.
int StateLetter(uint32_t status) {
  switch (status) {
    case 1:  // SIDL: being created by fork
    case 2:  // SRUN
      return 'R';
    case 3:  // SSLEEP
      return 'S';
    case 4:  // SSTOP
      return 'T';
    case 5:  // SZOMB
      return 'Z';
    default:
      return '?';
  }
}

int32_t SessionOf(pid_t pid) {
  pid_t sid = getsid(pid);
  return sid < 0 ? -1 : static_cast<int32_t>(sid);  // -1: unknown
}

// proc_pidinfo(PROC_PIDTBSDINFO) fails for zombies, so those fall back to
// sysctl KERN_PROC_PID (kinfo_proc), which still describes them.
bool ReadRecord(pid_t pid, ProcRecord& out) {
  out.flags = 0;  // no kernel threads as processes, no zombie leaders on macOS
  struct proc_bsdinfo bi;
  int n = proc_pidinfo(pid, PROC_PIDTBSDINFO, 0, &bi, static_cast<int>(sizeof bi));
  if (n == static_cast<int>(sizeof bi)) {
    out.pid = static_cast<int32_t>(bi.pbi_pid);
    out.ppid = static_cast<int32_t>(bi.pbi_ppid);
    out.pgid = static_cast<int32_t>(bi.pbi_pgid);
    out.uid = static_cast<int32_t>(bi.pbi_uid);
    out.state = StateLetter(bi.pbi_status);
    out.start = static_cast<double>(bi.pbi_start_tvsec) * 1e6 + static_cast<double>(bi.pbi_start_tvusec);
    out.sid = SessionOf(pid);
    return true;
  }
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid};
  struct kinfo_proc kp;
  size_t len = sizeof kp;
  if (sysctl(mib, 4, &kp, &len, nullptr, 0) != 0 || len != sizeof kp || kp.kp_proc.p_pid != pid) return false;
  out.pid = kp.kp_proc.p_pid;
  out.ppid = kp.kp_eproc.e_ppid;
  out.pgid = kp.kp_eproc.e_pgid;
  out.uid = static_cast<int32_t>(kp.kp_eproc.e_ucred.cr_uid);
  out.state = StateLetter(static_cast<uint32_t>(kp.kp_proc.p_stat));
  out.start = static_cast<double>(kp.kp_proc.p_starttime.tv_sec) * 1e6 +
              static_cast<double>(kp.kp_proc.p_starttime.tv_usec);
  out.sid = SessionOf(pid);
  return true;
}

int ArgMax() {
  int mib[2] = {CTL_KERN, KERN_ARGMAX};
  int argmax = 0;
  size_t len = sizeof argmax;
  if (sysctl(mib, 2, &argmax, &len, nullptr, 0) != 0 || argmax <= 0) return 1 << 20;
  return argmax;
}

// KERN_PROCARGS2 layout: int argc, exec path NUL, NUL padding, argc argv
// strings, then environment strings until an empty string or the end.
// Only readable for our own uid (or as root); false otherwise.
bool ReadProcArgs(pid_t pid, const std::vector<std::string>& keys, ProcDetails& out) {
  std::vector<char> buf(static_cast<size_t>(ArgMax()));
  int mib[3] = {CTL_KERN, KERN_PROCARGS2, pid};
  size_t len = buf.size();
  if (sysctl(mib, 3, buf.data(), &len, nullptr, 0) != 0 || len < sizeof(int)) return false;
  int argc = 0;
  memcpy(&argc, buf.data(), sizeof argc);
  const char* p = buf.data() + sizeof argc;
  const char* end = buf.data() + len;
  while (p < end && *p != '\0') p++;  // exec path
  while (p < end && *p == '\0') p++;  // padding
  out.hasArgv = true;
  for (int i = 0; i < argc && p < end; i++) {
    const char* s = p;
    while (p < end && *p != '\0') p++;
    out.argv.emplace_back(s, static_cast<size_t>(p - s));
    if (p < end) p++;
  }
  out.envReadable = true;
  std::vector<bool> found(keys.size(), false);
  while (p < end && *p != '\0') {
    const char* s = p;
    while (p < end && *p != '\0') p++;
    const char* eq = static_cast<const char*>(memchr(s, '=', static_cast<size_t>(p - s)));
    if (eq != nullptr) {
      size_t keyLen = static_cast<size_t>(eq - s);
      for (size_t k = 0; k < keys.size(); k++) {
        if (found[k] || keys[k].size() != keyLen || memcmp(keys[k].data(), s, keyLen) != 0) continue;
        found[k] = true;  // first occurrence wins, as with getenv(3)
        out.env.emplace_back(keys[k], std::string(eq + 1, static_cast<size_t>(p - eq - 1)));
        break;
      }
    }
    if (p < end) p++;
  }
  return true;
}

}  // namespace

const char* PlatformName() { return "darwin"; }

int WalkProcesses(PackedSnapshot& out) {
  // With a null buffer the kernel answers how many pids there are (plus
  // slack); grow and retry if the table grew past the buffer meanwhile.
  errno = 0;
  int estimate = proc_listallpids(nullptr, 0);
  if (estimate <= 0) return -(errno != 0 ? errno : EPERM);
  std::vector<pid_t> pids(static_cast<size_t>(estimate) + 256);
  int n = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    n = proc_listallpids(pids.data(), static_cast<int>(pids.size() * sizeof(pid_t)));
    if (n <= 0) return -(errno != 0 ? errno : EPERM);
    if (static_cast<size_t>(n) < pids.size()) break;
    pids.resize(pids.size() * 2);
  }
  out.ints.reserve(static_cast<size_t>(n) * kIntFields);
  out.starts.reserve(static_cast<size_t>(n));
  ProcRecord rec;
  for (int i = 0; i < n; i++) {
    if (pids[i] <= 0) continue;  // pid 0 (kernel_task) has no BSD info worth listing
    if (!ReadRecord(pids[i], rec)) continue;  // vanished mid-walk
    out.ints.insert(out.ints.end(), {rec.pid, rec.ppid, rec.pgid, rec.sid, rec.uid, rec.state, rec.flags});
    out.starts.push_back(rec.start);
  }
  out.count = out.starts.size();
  return 0;
}

bool InspectProcess(int pid, const std::vector<std::string>& envKeys, ProcDetails& out) {
  if (!ReadRecord(pid, out.rec)) return false;
  char path[PROC_PIDPATHINFO_MAXSIZE];
  int n = proc_pidpath(pid, path, sizeof path);
  if (n > 0) {
    out.hasExe = true;
    out.exe.assign(path, static_cast<size_t>(n));
  }
  ReadProcArgs(pid, envKeys, out);
  // libproc has no handle that pins a process, so confirm the pid still
  // names the same process after the reads; otherwise the facts may mix two.
  ProcRecord again;
  if (!ReadRecord(pid, again) || again.start != out.rec.start) return false;
  out.rec = again;
  return true;
}

bool BootId(std::string& out) {
  int mib[2] = {CTL_KERN, KERN_BOOTTIME};
  struct timeval tv;
  size_t len = sizeof tv;
  if (sysctl(mib, 2, &tv, &len, nullptr, 0) != 0 || len != sizeof tv) return false;
  char buf[64];
  snprintf(buf, sizeof buf, "%ld.%06d", static_cast<long>(tv.tv_sec), static_cast<int>(tv.tv_usec));
  out = buf;
  return true;
}

bool PidNamespace(std::string&) { return false; }

bool PidfdSupported() { return false; }

// Not race-free: between the start-time check and kill(2) the process can
// exit and its pid be handed to a newcomer, which would get the signal.
// macOS has no pidfd; the window is one syscall wide, and pids are
// allocated sequentially up to 99999 before wrapping, so reuse inside it
// needs the whole pid space to cycle. The TS signaller reports raceFree=false.
SignalResult SignalIfSame(int pid, double expectedStart, int sig) {
  ProcRecord rec;
  if (!ReadRecord(pid, rec)) return SignalResult::kGone;
  if (rec.start != expectedStart) return SignalResult::kMismatch;
  if (kill(pid, sig) == 0) return SignalResult::kSignalled;
  if (errno == EPERM) return SignalResult::kDenied;
  if (errno == ESRCH) return SignalResult::kGone;
  return SignalResult::kUnsupported;
}

int SetChildSubreaper() { return -ENOSYS; }

int SetParentDeathSignal(int) { return -ENOSYS; }

bool ReapChild(int pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid;
}

}  // namespace proclease
