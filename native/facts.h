// The plain C++ surface each OS file implements. addon.cc only marshals
// these structs to JS; no N-API type crosses into the OS files, so each one
// reads like a small syscall wrapper (serialport/bindings-cpp style).
//
// Every OS failure is reported as a value (bool, negative errno, outcome):
// the addon is built without C++ exceptions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace proclease {

// One process's cheap fields. `start` is Linux clock ticks since boot or
// macOS microseconds since the epoch; both are exact in a double below 2^53.
struct ProcRecord {
  int32_t pid = 0;
  int32_t ppid = 0;
  int32_t pgid = 0;
  int32_t sid = 0;
  int32_t uid = 0;
  int32_t state = 0;  // kernel state letter as a char code ('Z' = zombie)
  int32_t flags = 0;  // kRecKernelThread | kRecZombieLeader | kRecExiting
  double start = 0;
};

// ProcRecord::flags bits (mirrored in src/facts/native-binding.ts).
// A zombie leader is a thread-group leader in state Z whose other threads
// still run: the process is alive and a signal to its pid reaches them.
constexpr int32_t kRecKernelThread = 1;
constexpr int32_t kRecZombieLeader = 2;
// PF_EXITING: the task is inside exit(2). Its memory (argv, environ, exe)
// may already be gone while its state is still R or D; unless it is a leader
// whose other threads run on (kRecZombieLeader), the process is going away.
constexpr int32_t kRecExiting = 4;

// Packed like the JS side wants it: ints holds kIntFields per record, and
// index the lookup tables BuildSnapshotIndex makes (layout in
// snapshot_index.cc and src/facts/native-binding.ts).
constexpr int kIntFields = 7;
struct PackedSnapshot {
  std::vector<int32_t> ints;
  std::vector<double> starts;
  std::vector<int32_t> index;
  size_t count = 0;
};

struct ProcDetails {
  ProcRecord rec;     // rec.uid: the effective uid
  int32_t realUid = -1;  // -1: unknown
  bool hasExe = false;
  std::string exe;
  bool hasArgv = false;
  std::vector<std::string> argv;
  bool envReadable = false;
  // only the requested keys that were present, in request order
  std::vector<std::pair<std::string, std::string>> env;

  // as a fresh one, keeping the vectors' storage for the next inspect
  void Clear() {
    rec = ProcRecord{};
    realUid = -1;
    hasExe = false;
    exe.clear();
    hasArgv = false;
    argv.clear();
    envReadable = false;
    env.clear();
  }
};

enum class SignalResult { kSignalled, kGone, kMismatch, kDenied, kUnsupported };

const char* PlatformName();

// Walks every visible process into out.ints/starts/count. Returns 0, or
// -errno when the process table itself cannot be listed or was only partly
// listed (processes that vanish mid-walk are skipped). Dead records are
// never listed. uid is always the effective uid (procfs_linux.cc says how).
int WalkProcesses(PackedSnapshot& out);

// Fills out.index from out.ints: the pid, ppid and pgid lookup tables, so
// the main thread builds nothing per record (snapshot_index.cc, portable).
void BuildSnapshotIndex(PackedSnapshot& out);

// kInspectFound; kInspectGone when the process does not exist, vanished
// mid-read, or `pid` names a thread that is not its thread group's leader;
// -errno when the host refused a read that decides it (EMFILE, ENOMEM, EIO…):
// nothing is known then, and "gone" would be a guess.
// `listed`: the caller found pid in a snapshot (which lists only thread-group
// leaders) and compares its start time with that record, so the leader check
// and the real uid are not asked for: Linux then skips /proc/PID/status, a
// third of an inspect's kernel time (it is still read for a zombie, whose
// live threads decide whether it is alive), takes the effective uid as the
// walk does, and leaves realUid unknown (-1).
constexpr int kInspectFound = 1;
constexpr int kInspectGone = 0;
int InspectProcess(int pid, const std::vector<std::string>& envKeys, ProcDetails& out, bool listed);

bool BootId(std::string& out);
bool PidNamespace(std::string& out);
bool PidfdSupported();

SignalResult SignalIfSame(int pid, double expectedStart, int sig);

int SetChildSubreaper();            // 0 or -errno
int SetParentDeathSignal(int sig);  // 0 or -errno
int UnshareCgroupNamespace();      // 0 or -errno: the calling thread's own cgroup namespace
bool ReapChild(int pid);            // true when waitpid(WNOHANG) reaped it

// exec_guard_linux.cc (stubs elsewhere: -ENOSYS).
// A close-on-exec memfd (fd >= 10) holding `bytes`, sealed against writes,
// growth and shrinking; or -errno.
int SealedCopy(const char* name, const unsigned char* bytes, size_t len);
int SetDumpable(bool on);  // prctl(PR_SET_DUMPABLE): 0 or -errno
int GetDumpable();         // 1, 0, or -errno
int SetMmapThreshold(int bytes);  // glibc mallopt(M_MMAP_THRESHOLD): 0, -EINVAL, or -ENOSYS (no glibc)
int TrimMalloc();                 // glibc malloc_trim(0): 1 when memory went back, 0 when none, -ENOSYS (no glibc)

// attach_linux.cc (stub elsewhere: -ENOSYS). A non-blocking, close-on-exec
// Unix socket connected to <dir>/<name>, and its listener's pid and uid
// (SO_PEERCRED); the descriptor, or -errno.
int ConnectAttach(const char* dir, const char* name, int* peer_pid, int* peer_uid);

// CLOCK_THREAD_CPUTIME_ID of the calling thread in ns, or -1
// (thread_clock_posix.cc, shared by both OSes).
double ThreadCpuTimeNs();

// flock(fd, LOCK_EX | LOCK_NB): 0, or -errno (-EWOULDBLOCK when another
// open file description holds it). lock_posix.cc, shared by both OSes.
int LockExclusive(int fd);

// Which syscall a file job stopped at (mirrors FILE_STEP in native-binding.ts).
constexpr int kStepOpen = 0;
constexpr int kStepStat = 1;
constexpr int kStepRead = 2;
constexpr int kStepWrite = 3;
constexpr int kStepSync = 4;
constexpr int kStepClose = 5;
constexpr int kStepRename = 6;
constexpr int kStepDirSync = 7;
constexpr int kStepUnlink = 8;
constexpr int kStepDirOpen = 9;

struct SmallFileRead {
  int err = 0;  // 0, or -errno of the syscall at `step`
  int step = kStepOpen;
  bool regular = false;
  bool tooLarge = false;
  double ino = 0, dev = 0, mode = 0, uid = 0, size = 0, mtimeMs = 0;
  std::string data;  // the bytes, when regular, not too large and err == 0
};

// open(O_NOFOLLOW|O_NONBLOCK) + fstat + read + close of one file; the stat
// fields are set once fstat succeeded, the bytes only for a regular file of
// at most maxBytes. files_posix.cc, shared by both OSes.
void ReadSmallFile(const std::string& path, size_t maxBytes, SmallFileRead& out);

// tmp (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) + write + fsync when durable + close
// + rename onto target + fsync(dir) when durable. 0, or -errno with `step`
// naming the syscall; a failure before the rename removes tmp.
int ReplaceFile(const std::string& dir, const std::string& tmp, const std::string& target, const std::string& data, bool durable, int& step);

// unlink(target) + fsync(dir) when durable: 0, or -errno at `step`. A target
// that is already gone is not an error (the directory is still synced).
int RemoveFile(const std::string& dir, const std::string& target, bool durable, int& step);

// A move of a file to another folder with new contents: ReplaceFile of the
// new copy, then, only once it is in place (and synced when durable),
// RemoveFile of the old one. 0, or -errno at `step`; `removing` tells which
// of the two stopped (a failed removal leaves both copies, the new one whole).
struct FileMove {
  std::string dir, tmp, target, data, fromDir, from;
  bool durable = true;
};
int MoveFile(const FileMove& m, int& step, bool& removing);

}  // namespace proclease

#ifdef __linux__
namespace proclease::linux_detail {
// Reads and parses `rel` (a "stat" file) relative to dirfd in one
// open+fstat+read+close. false when it is unreadable (process gone).
bool ReadStatAt(int dirfd, const char* rel, ProcRecord& out);
// Whether errno from a failed /proc read means the host refused it (EMFILE,
// ENOMEM, EIO…) rather than that the process is gone or hidden from us.
bool HostFailure(int err);
}  // namespace proclease::linux_detail
#endif
