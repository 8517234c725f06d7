/*
 * The native wrapper's lease cgroup (Linux): the same join rule as
 * src/containment/enter.ts (cgroup.procs opened write-only, never created;
 * "0" moves the writer), plus the adapter's birth inside it.
 *
 * Why the adapter is cloned into the cgroup (clone3 CLONE_INTO_CGROUP,
 * Linux >= 5.7) rather than only inheriting it from the wrapper: a write to
 * cgroup.procs waits for an RCU grace period on hosts without favordynmods
 * (10-30 ms measured here), while a clone into the cgroup takes no such
 * wait. So the adapter is born inside at once, and the wrapper's own join
 * runs while the adapter's runtime boots, before the "started" report.
 * Every descendant is born inside either way. Where the clone cannot target
 * the cgroup (an older kernel, a directory that is no cgroup), the wrapper
 * joins first and then forks, as the Node wrapper does.
 *
 * Why the adapter gets a cgroup namespace (lease_cgroup_unshare): its root
 * is the cgroup the adapter is in when it unshares, the lease's, and on a
 * cgroup2 mounted with nsdelegate the kernel then refuses every write to a
 * cgroup.procs whose source or destination cgroup lies outside that root
 * (cgroup_procs_write_permission: ENOENT), root or not: the adapter's tree
 * can neither leave its lease cgroup nor pull another process into it. The
 * adapter itself unshares, after fork and before exec, and only once it is
 * inside (born there, or the wrapper joined before the fork); the wrapper
 * and the gateway stay in their own namespace, so the gateway still sees
 * and kills the whole lease cgroup. Where the kernel refuses the unshare
 * (no CAP_SYS_ADMIN: a gateway that is not root; a seccomp policy), the
 * adapter runs all the same, contained as before, and the "started" report
 * names the errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wrapper_linux.h"

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#define PROCLEASE_CLONE_INTO_CGROUP 0x200000000ULL
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/* clone3's argument as of Linux 5.7 (CLONE_INTO_CGROUP), declared here so old kernel headers still compile this file */
struct proclease_clone_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};

/* Only a normalised absolute path (what the controller's cgroup paths are): no "//", "." or ".." components. */
static int path_shape_ok(const char *p) {
  if (p[0] != '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../")) return 0;
  size_t n = strlen(p);
  return !(n >= 2 && strcmp(p + n - 2, "/.") == 0) && !(n >= 3 && strcmp(p + n - 3, "/..") == 0);
}

static const char *join_outcome(int e) {
  switch (e) {
    case ENOENT: case ENOTDIR: return "no-cgroup";
    case EACCES: case EPERM: return "denied";
    case EBUSY: return "busy";
    case EOPNOTSUPP: return "unsupported";
    case ESRCH: return "gone";
    default: return "unknown";
  }
}

void lease_cgroup_read(struct lease_cgroup *cg) {
  const char *env = getenv("PROCLEASE_CGROUP");
  const char *req = getenv("PROCLEASE_CGROUP_REQUIRED");
  cg->required = req != NULL && strcmp(req, "1") == 0;
  cg->given = env != NULL;
  cg->dirfd = -1;
  snprintf(cg->dir, sizeof cg->dir, "%s", env ? env : "");
  /* the adapter does not inherit them */
  unsetenv("PROCLEASE_CGROUP");
  unsetenv("PROCLEASE_CGROUP_REQUIRED");
  cg->shape_ok = cg->given && path_shape_ok(cg->dir) && strlen(cg->dir) + sizeof "/cgroup.procs" <= sizeof cg->dir;
  if (cg->shape_ok) cg->dirfd = open(cg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int lease_cgroup_join(const struct lease_cgroup *cg, char *why, size_t cap) {
  const char *outcome = "refused", *detail = "not a normalised absolute path";
  if (cg->shape_ok) {
    char procs[sizeof cg->dir + 16];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cg->dir);
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    int ok = fd >= 0 && write(fd, "0", 1) == 1;
    int e = errno;
    if (fd >= 0) close(fd);
    if (ok) return 1;
    outcome = join_outcome(e);
    detail = wrapper_errname(e);
  }
  snprintf(why, cap, "cannot enter the lease cgroup %s (%s: %s), so the session's limits would not hold", cg->dir, outcome, detail);
  return 0;
}

pid_t lease_cgroup_fork(const struct lease_cgroup *cg) {
  if (cg->dirfd < 0) return -2;
  struct proclease_clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = PROCLEASE_CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = (uint64_t)cg->dirfd;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  /* any refusal (no clone3, not a cgroup2 directory, a busy cgroup) falls back to join-then-fork, which names the cause */
  return pid < 0 ? -2 : (pid_t)pid;
}

int lease_cgroup_unshare(void) {
  return unshare(CLONE_NEWCGROUP) == 0 ? 0 : errno;
}
