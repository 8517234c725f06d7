// macOS process facts: only the libproc and sysctl calls live here. The
// pure parts (the KERN_PROCARGS2 parser, the record mapping, the environment
// picker) are in procargs.cc, compiled and tested on Linux too.
//
// This file is cross-compiled in CI for x86_64 and arm64 macOS with Zig's
// bundled SDK headers (.ci/macos-cross); it has never run on a Mac.
//
// Identity: start = pbi_start_tvsec * 1e6 + pbi_start_tvusec (microseconds
// since the epoch). uid is the effective uid (pbi_uid), realUid pbi_ruid.
#include <errno.h>
#include <libproc.h>
#include <signal.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "facts.h"
#include "procargs.h"

namespace proclease {
namespace {

int32_t SessionOf(pid_t pid) {
  pid_t sid = getsid(pid);
  return sid < 0 ? -1 : static_cast<int32_t>(sid);  // -1: unknown
}

// PROC_PIDTBSDINFO with arg 1 also answers for zombies (xnu then looks the
// pid up among zombies when no live process has it). It refuses (EPERM) a
// caller that is not root for another user's process, so those come from
// sysctl KERN_PROC_PID, which describes every process, as ps(1) does.
bool ReadBsdInfo(pid_t pid, procargs::BsdInfo& out) {
  struct proc_bsdinfo bi;
  errno = 0;
  int n = proc_pidinfo(pid, PROC_PIDTBSDINFO, 1, &bi, static_cast<int>(sizeof bi));
  if (n == static_cast<int>(sizeof bi) && static_cast<pid_t>(bi.pbi_pid) == pid) {
    out.pid = bi.pbi_pid;
    out.ppid = bi.pbi_ppid;
    out.pgid = bi.pbi_pgid;
    out.uid = bi.pbi_uid;
    out.ruid = bi.pbi_ruid;
    out.status = bi.pbi_status;
    out.startSec = bi.pbi_start_tvsec;
    out.startUsec = bi.pbi_start_tvusec;
    return true;
  }
  if (errno == ESRCH) return false;  // neither a live process nor a zombie
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid};
  struct kinfo_proc kp;
  size_t len = sizeof kp;
  if (sysctl(mib, 4, &kp, &len, nullptr, 0) != 0 || len != sizeof kp || kp.kp_proc.p_pid != pid) return false;
  out.pid = static_cast<uint32_t>(kp.kp_proc.p_pid);
  out.ppid = static_cast<uint32_t>(kp.kp_eproc.e_ppid);
  out.pgid = static_cast<uint32_t>(kp.kp_eproc.e_pgid);
  out.uid = kp.kp_eproc.e_ucred.cr_uid;
  out.ruid = kp.kp_eproc.e_pcred.p_ruid;
  out.status = static_cast<uint32_t>(kp.kp_proc.p_stat);
  out.startSec = static_cast<uint64_t>(kp.kp_proc.p_starttime.tv_sec);
  out.startUsec = static_cast<uint64_t>(kp.kp_proc.p_starttime.tv_usec);
  return true;
}

bool ReadRecord(pid_t pid, ProcRecord& out, int32_t* realUid = nullptr) {
  procargs::BsdInfo bi;
  if (!ReadBsdInfo(pid, bi)) return false;
  procargs::MapBsdInfo(bi, SessionOf(pid), out);
  if (realUid != nullptr) *realUid = static_cast<int32_t>(bi.ruid);
  return true;
}

int ArgMax() {
  int mib[2] = {CTL_KERN, KERN_ARGMAX};
  int argmax = 0;
  size_t len = sizeof argmax;
  if (sysctl(mib, 2, &argmax, &len, nullptr, 0) != 0 || argmax <= 0) return 1 << 20;
  return argmax;
}

// KERN_PROCARGS2 is only readable for our own uid (or as root); otherwise
// argv and environment stay unknown. The size query keeps the buffer small;
// if the process exec'd a longer command line in between, the answer fills
// the buffer, which reads as "unknown", so one retry asks with ARG_MAX.
void ReadProcArgs(pid_t pid, const std::vector<std::string>& keys, ProcDetails& out) {
  int mib[3] = {CTL_KERN, KERN_PROCARGS2, pid};
  const size_t argmax = static_cast<size_t>(ArgMax());
  size_t want = 0;
  if (sysctl(mib, 3, nullptr, &want, nullptr, 0) != 0) return;
  size_t cap = want + 4096 < argmax ? want + 4096 : argmax;
  std::vector<char> buf;
  for (int attempt = 0; attempt < 2; attempt++) {
    buf.resize(cap);
    size_t len = cap;
    if (sysctl(mib, 3, buf.data(), &len, nullptr, 0) != 0) return;
    procargs::ParseProcArgs2(buf.data(), len, cap, keys, out);
    if (len < cap || cap == argmax) return;
    cap = argmax;
  }
}

}  // namespace

const char* PlatformName() { return "darwin"; }

int WalkProcesses(PackedSnapshot& out) {
  // With a null buffer the kernel answers how many pids there are (plus
  // slack); grow and retry while the table outgrows the buffer. A table we
  // could only partly list is an error: a short table would read as
  // "those processes are gone".
  errno = 0;
  int estimate = proc_listallpids(nullptr, 0);
  if (estimate <= 0) return -(errno != 0 ? errno : EPERM);
  std::vector<pid_t> pids(static_cast<size_t>(estimate) + 256);
  int n = 0;
  bool complete = false;
  for (int attempt = 0; attempt < 4 && !complete; attempt++) {
    n = proc_listallpids(pids.data(), static_cast<int>(pids.size() * sizeof(pid_t)));
    if (n <= 0) return -(errno != 0 ? errno : EPERM);
    if (static_cast<size_t>(n) < pids.size()) {
      complete = true;
    } else {
      pids.resize(pids.size() * 2);
    }
  }
  if (!complete) return -EAGAIN;
  out.ints.reserve(static_cast<size_t>(n) * kIntFields);
  out.starts.reserve(static_cast<size_t>(n));
  ProcRecord rec;
  for (int i = 0; i < n; i++) {
    if (pids[i] <= 0) continue;               // pid 0 (kernel_task) has no BSD info worth listing
    if (!ReadRecord(pids[i], rec)) continue;  // vanished mid-walk
    out.ints.insert(out.ints.end(), {rec.pid, rec.ppid, rec.pgid, rec.sid, rec.uid, rec.state, rec.flags});
    out.starts.push_back(rec.start);
  }
  out.count = out.starts.size();
  return 0;
}

int InspectProcess(int pid, const std::vector<std::string>& envKeys, ProcDetails& out, bool /*listed: one sysctl answers both anyway*/) {
  if (!ReadRecord(pid, out.rec, &out.realUid)) return kInspectGone;
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
  if (!ReadRecord(pid, again, &out.realUid) || again.start != out.rec.start) return kInspectGone;
  out.rec = again;
  return kInspectFound;
}

// kern.bootsessionuuid changes at every boot and, unlike kern.boottime,
// does not move when the wall clock is stepped.
bool BootId(std::string& out) {
  char buf[64];
  size_t len = sizeof buf;
  if (sysctlbyname("kern.bootsessionuuid", buf, &len, nullptr, 0) != 0 || len == 0) return false;
  while (len > 0 && buf[len - 1] == '\0') len--;
  out.assign(buf, len);
  return !out.empty();
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

// no memfd and no PR_SET_DUMPABLE on macOS (exec_guard_linux.cc has the Linux ones)
int SealedCopy(const char*, const unsigned char*, size_t) { return -ENOSYS; }

int SetDumpable(bool) { return -ENOSYS; }
int SetMmapThreshold(int) { return -ENOSYS; }
int TrimMalloc() { return -ENOSYS; }

int GetDumpable() { return -ENOSYS; }

int UnshareCgroupNamespace() { return -ENOSYS; }

int ConnectAttach(const char*, const char*, int*, int*) { return -ENOSYS; }

}  // namespace proclease
