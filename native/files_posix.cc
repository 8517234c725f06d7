// The state dir's small files, each read or replaced in ONE thread-pool job:
// a lease store read through fs/promises is four round trips (open, fstat,
// read, close) with a FileHandle and an Error per missing file, and an atomic
// write about eight; a startup reap of 1,000 leases makes thousands of them
// on the gateway's main thread (bench/reconcile.bench.mjs). Only syscalls
// here: which results are refused, and the messages, are fs-safe.ts's.
// POSIX on both Linux and macOS, so one file serves both builds.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "facts.h"

namespace proclease {

namespace {

// The jobs' creates, renames and unlinks, one at a time in this process.
// In one folder they serialise on its inode lock in the kernel anyway, and
// the kernel's waiters spin while the holder runs. On ext4 without a
// journal a create scans past every inode freed in the last seconds, so a
// reap ending a thousand leases would keep the second core of a 2-core
// host spinning (perf: 15% of the process's samples) while the main thread
// waits for a core. Here a waiter sleeps; the writes and fsyncs, which hold
// no folder lock, still overlap. The lease store's two folders (live and
// archive) give up the little overlap they had.
std::mutex namespaceLock;

int OpenRetry(const char* path, int flags, mode_t mode = 0) {
  for (;;) {
    int fd = open(path, flags | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

int FsyncFd(int fd) {
  for (;;) {
    if (fsync(fd) == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

double MtimeMs(const struct stat& st) {
#ifdef __APPLE__
  return static_cast<double>(st.st_mtimespec.tv_sec) * 1e3 + static_cast<double>(st.st_mtimespec.tv_nsec) / 1e6;
#else
  return static_cast<double>(st.st_mtim.tv_sec) * 1e3 + static_cast<double>(st.st_mtim.tv_nsec) / 1e6;
#endif
}

}  // namespace

void ReadSmallFile(const std::string& path, size_t maxBytes, SmallFileRead& out) {
  const int fd = OpenRetry(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    out.err = -errno;
    out.step = kStepOpen;
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    out.err = -errno;
    out.step = kStepStat;
    close(fd);
    return;
  }
  out.regular = S_ISREG(st.st_mode);
  out.ino = static_cast<double>(st.st_ino);
  out.dev = static_cast<double>(st.st_dev);
  out.mode = static_cast<double>(st.st_mode);
  out.uid = static_cast<double>(st.st_uid);
  out.size = static_cast<double>(st.st_size);
  out.mtimeMs = MtimeMs(st);
  // a file the caller refuses anyway is not read
  if (!out.regular || static_cast<size_t>(st.st_size) > maxBytes) {
    close(fd);
    return;
  }
  // one read as a rule (files here are replaced by rename, never rewritten
  // in place); one that grew since its fstat is read to EOF or past maxBytes
  out.data.resize(static_cast<size_t>(st.st_size) + 1);
  size_t len = 0;
  for (;;) {
    if (len == out.data.size()) {
      if (len > maxBytes) break;
      out.data.resize(len * 2 < maxBytes + 1 ? len * 2 : maxBytes + 1);
    }
    const ssize_t n = pread(fd, &out.data[len], out.data.size() - len, static_cast<off_t>(len));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.err = -errno;
      out.step = kStepRead;
      break;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
    if (len == static_cast<size_t>(st.st_size)) break;
  }
  out.tooLarge = out.err == 0 && len > maxBytes;
  out.data.resize(out.err == 0 && !out.tooLarge ? len : 0);
  close(fd);
}

// The temp file, created under namespaceLock: its fd, or -errno.
static int CreateExclusive(const std::string& tmp) {
  std::lock_guard<std::mutex> held(namespaceLock);
  const int fd = OpenRetry(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  return fd < 0 ? -errno : fd;
}

// fsync(dir), so a rename or unlink in it is durable: 0, or -errno at
// kStepDirOpen or kStepDirSync.
static int SyncDir(const std::string& dir, int& step) {
  step = kStepDirOpen;
  const int dfd = OpenRetry(dir.c_str(), O_RDONLY);
  if (dfd < 0) return -errno;
  step = kStepDirSync;
  const int rc = FsyncFd(dfd);
  close(dfd);
  return rc;
}

int ReplaceFile(const std::string& dir, const std::string& tmp, const std::string& target, const std::string& data, bool durable, int& step) {
  step = kStepOpen;
  const int fd = CreateExclusive(tmp);
  if (fd < 0) return fd;
  int rc = 0;
  step = kStepWrite;
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rc = -errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (rc == 0 && durable) {
    step = kStepSync;
    rc = FsyncFd(fd);
  }
  if (close(fd) != 0 && rc == 0 && errno != EINTR) {
    step = kStepClose;
    rc = -errno;
  }
  if (rc == 0) {
    step = kStepRename;
    std::lock_guard<std::mutex> held(namespaceLock);
    if (rename(tmp.c_str(), target.c_str()) != 0) rc = -errno;
  }
  if (rc != 0) {
    std::lock_guard<std::mutex> held(namespaceLock);
    unlink(tmp.c_str());  // the old file stays as it was; no temp is left behind
    return rc;
  }
  return durable ? SyncDir(dir, step) : 0;
}

int RemoveFile(const std::string& dir, const std::string& target, bool durable, int& step) {
  step = kStepUnlink;
  {
    std::lock_guard<std::mutex> held(namespaceLock);
    if (unlink(target.c_str()) != 0 && errno != ENOENT) return -errno;
  }
  return durable ? SyncDir(dir, step) : 0;
}

int MoveFile(const FileMove& m, int& step, bool& removing) {
  removing = false;
  const int rc = ReplaceFile(m.dir, m.tmp, m.target, m.data, m.durable, step);
  if (rc != 0) return rc;
  removing = true;
  return RemoveFile(m.fromDir, m.from, m.durable, step);
}

}  // namespace proclease
