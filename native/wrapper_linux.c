/*
 * The native ACPX wrapper (Linux): the same contract as the Node wrapper
 * (src/acpx/wrapper/main.ts; reports and exit codes in protocol.ts), in one
 * small process that decides no policy. The controller spawns it as
 *
 *   <wrapperRoot>/acpx-wrapper-<hash> [<the same path>] [--grace-ms N] -- <adapter argv...>
 *   stdio [pipe, pipe, pipe, pipe]; env OPENCLAW_ACPX_LEASE_ID, OPENCLAW_GATEWAY_INSTANCE_ID
 *   (and PROCLEASE_CGROUP / PROCLEASE_CGROUP_REQUIRED when the lease has a cgroup)
 *
 *   The path twice (argv[0] and argv[1]): the controller execs a sealed
 *   in-memory copy of the verified bytes (docs/wrapper.md), so the kernel's
 *   exe link names no file, and verification knows the wrapper by argv[1],
 *   as it knows the Node wrapper. An argv[1] equal to argv[0] is skipped.
 *
 * start: enters the lease cgroup, becomes a child subreaper, arms
 *   PR_SET_PDEATHSIG=SIGUSR2, forks the adapter into its own session and
 *   group (pgid == pid) and, inside the lease cgroup, its own cgroup
 *   namespace, with our fds 0/1/2, reports "started" on fd 3 once its exec
 *   succeeded ("spawn-error" and 127/126/2 otherwise);
 * SIGTERM/SIGINT/SIGHUP: forwarded to the adapter's group;
 * adapter exits: "exit", then the tree sweep ("signal" after a forwarded
 *   signal, else "adapter-exit"), exit with its code or 128 + signal;
 * lifeline EOF or SIGUSR2: the sweep with reason "parent-gone";
 * an adopted orphan exits: reaped (never the adapter, which stays unreaped
 *   until the wrapper ends, so its group id stays provably ours).
 *
 * Idle, it blocks in poll() with no timeout: no timer, no CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wrapper_durable_linux.h"
#include "wrapper_linux.h"

#define LIFELINE_FD 3
#define DEFAULT_GRACE_MS 3000
#define MAX_GRACE_MS 600000
#define MAX_WINDOW_MS 600000
#define MAX_JOURNAL_BYTES (1L << 30)
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_EXECUTE 126
#define MAX_ENDED 4096

static struct wrapper_state st;
static struct attach att = {.listen_fd = -1, .dirfd = -1, .lock_fd = -1};
static int lifeline = -1;
/* cleared once a write failed: reports stop, but the fd is still watched for the gateway's EOF */
static int lifeline_writable = 1;
static int sigpipe_fds[2] = {-1, -1};
static int forwarded;
/* the gateway said "end" before it let go: the tree is ended at its request, not because it went away */
static int asked_to_end;

static const char *const SIGNAMES[] = {
    NULL, "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGUSR1",
    "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP",
    "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS"};

static void put_stderr(const char *s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

/* One report line on fd 3; dropped (never retried) once the gateway stopped reading. */
static void send_line(const char *line) {
  if (durable_report(line)) return;
  if (lifeline < 0 || !lifeline_writable) return;
  size_t len = strlen(line), off = 0;
  while (off < len) {
    ssize_t n = write(lifeline, line + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      lifeline_writable = 0;
      return;
    }
    off += (size_t)n;
  }
}

static void report_spawn_error(const char *code, const char *message) {
  char esc[2048], line[2304];
  json_escape(esc, sizeof esc, message);
  snprintf(line, sizeof line, "{\"type\":\"spawn-error\",\"code\":\"%s\",\"message\":\"%s\"}\n", code, esc);
  send_line(line);
}

static void usage_error(const char *message) {
  report_spawn_error("EUSAGE", message);
  put_stderr("proclease wrapper: ");
  put_stderr(message);
  put_stderr("\nusage: <wrapper> [--grace-ms N] [--durable-ms N --journal-bytes N --attach-dir D --state-lock F] -- <adapter argv...>\n");
  exit(EXIT_USAGE);
}

/* An integer option's value, in [min, max], or a usage error naming it. */
static long int_option(const char *name, const char *value, long min, long max) {
  char msg[512];
  size_t len = strlen(value), digits = strspn(value, "0123456789");
  long v = len > 0 && digits == len && len <= 10 ? strtol(value, NULL, 10) : -1;
  if (v < min || v > max) {
    snprintf(msg, sizeof msg, "--%s must be an integer between %ld and %ld, got %.100s", name, min, max, value);
    usage_error(msg);
  }
  return v;
}

/* The value of `--name V` or `--name=V` at argv[*i], or NULL when argv[*i] is another option. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], "--", 2) != 0 || strncmp(argv[*i] + 2, name, n) != 0) return NULL;
  const char *rest = argv[*i] + 2 + n;
  if (*rest == '=') return rest + 1;
  if (*rest != 0) return NULL;
  if (++*i >= argc) {
    char msg[128];
    snprintf(msg, sizeof msg, "--%s needs a value", name);
    usage_error(msg);
  }
  return argv[*i];
}

/*
 * The same rules as src/acpx/wrapper/args.ts, plus the durable options only
 * this wrapper knows (all four or none); returns the index of the adapter's
 * argv[0].
 */
static int parse_args(int argc, char **argv, long *grace_ms, struct durable_opts *d) {
  char msg[512];
  *grace_ms = DEFAULT_GRACE_MS;
  memset(d, 0, sizeof *d);
  int i = 1;
  /* the wrapper's own name again (a sealed copy is known by its argv[1]): not an option */
  if (argc > 1 && strcmp(argv[1], argv[0]) == 0) i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
    const char *v;
    if ((v = option_value(argc, argv, &i, "grace-ms")) != NULL) *grace_ms = int_option("grace-ms", v, 0, MAX_GRACE_MS);
    else if ((v = option_value(argc, argv, &i, "durable-ms")) != NULL) d->window_ms = int_option("durable-ms", v, 1, MAX_WINDOW_MS);
    else if ((v = option_value(argc, argv, &i, "journal-bytes")) != NULL) d->journal_bytes = int_option("journal-bytes", v, 4096, MAX_JOURNAL_BYTES);
    else if ((v = option_value(argc, argv, &i, "attach-dir")) != NULL) d->attach_dir = v;
    else if ((v = option_value(argc, argv, &i, "state-lock")) != NULL) d->state_lock = v;
    else {
      snprintf(msg, sizeof msg, "unknown wrapper option \"%.200s\" (adapter argv goes after \"--\")", argv[i]);
      usage_error(msg);
    }
  }
  int given = (d->window_ms > 0) + (d->journal_bytes > 0) + (d->attach_dir != NULL) + (d->state_lock != NULL);
  if (given != 0 && given != 4) usage_error("--durable-ms, --journal-bytes, --attach-dir and --state-lock go together");
  d->on = given == 4;
  if (i >= argc) usage_error("missing \"--\" before the adapter argv");
  if (i + 1 >= argc || argv[i + 1][0] == 0) usage_error("missing adapter command after \"--\"");
  return i + 1;
}

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t r = write(sigpipe_fds[1], &b, 1);
  (void)r;
  errno = saved;
}

static void install_handlers(void) {
  if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    put_stderr("proclease wrapper: cannot create its signal pipe\n");
    exit(EXIT_CANNOT_EXECUTE);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR2, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
  /* a write to the lifeline of a gone gateway is an EPIPE, not a death */
  signal(SIGPIPE, SIG_IGN);
}

/* fd 3 when it is a socket or a pipe (what the controller's "pipe" gives); else no lifeline. */
static void open_lifeline(void) {
  struct stat sb;
  if (fstat(LIFELINE_FD, &sb) != 0 || !(S_ISSOCK(sb.st_mode) || S_ISFIFO(sb.st_mode))) return;
  lifeline = LIFELINE_FD;
  fcntl(lifeline, F_SETFD, FD_CLOEXEC);
  fcntl(lifeline, F_SETFL, fcntl(lifeline, F_GETFL) | O_NONBLOCK);
}

/* Refuses the start: nothing may run outside the cgroup the session's limits live in. */
static void refuse_cgroup(const char *why) {
  report_spawn_error("ECGROUPMOVE", why);
  put_stderr("proclease wrapper: cannot start adapter: ");
  put_stderr(why);
  put_stderr("\n");
  exit(EXIT_CANNOT_EXECUTE);
}

/*
 * The adapter's birth: born inside the lease cgroup when the kernel can
 * clone into it, the wrapper joining right after (wrapper_cgroup_linux.c
 * says why); else the wrapper joins first and forks. A join that fails
 * leaves the session uncontained unless limits need the cgroup: then the
 * adapter never runs (or, born inside already, is killed before it is
 * reported).
 */
static pid_t fork_adapter(const struct lease_cgroup *cg, int *inside) {
  char why[2400];
  pid_t pid = cg->given ? lease_cgroup_fork(cg) : -2;
  if (pid == 0) {
    *inside = 1;
    return 0;
  }
  if (pid > 0) {
    if (!lease_cgroup_join(cg, why, sizeof why) && cg->required) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      refuse_cgroup(why);
    }
    return pid;
  }
  *inside = cg->given && lease_cgroup_join(cg, why, sizeof why);
  if (cg->given && !*inside && cg->required) refuse_cgroup(why);
  return fork();
}

/* The adapter's cgroup namespace as the "started" report names it: "entered", an errno name, or why it was not tried. */
static char cgroupns_state[32];

/* fork + setsid + execvp; the exec's errno comes back over a close-on-exec pipe, so "started" means it ran. */
static void spawn_adapter(char **command, const struct lease_cgroup *cg, const int *stdio) {
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    report_spawn_error(wrapper_errname(errno), "cannot create the exec status pipe");
    exit(EXIT_CANNOT_EXECUTE);
  }
  sigset_t all, old;
  sigfillset(&all);
  /* no handler of ours may run in the child between fork and exec */
  sigprocmask(SIG_SETMASK, &all, &old);
  int inside = 0;
  pid_t pid = fork_adapter(cg, &inside);
  if (pid == 0) {
    for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* durable: the adapter's stdio are the wrapper's pipes (dup2 clears their close-on-exec) */
    for (int fd = 0; stdio != NULL && fd < 3; fd++) dup2(stdio[fd], fd);
    /* first word: the namespace (-1 not tried: outside the lease cgroup); a second one only when the exec failed */
    int ns = inside ? lease_cgroup_unshare() : -1;
    ssize_t r = write(errpipe[1], &ns, sizeof ns);
    int e = setsid() < 0 ? errno : 0;
    if (e == 0) {
      execvp(command[0], command);
      e = errno;
    }
    r = write(errpipe[1], &e, sizeof e);
    (void)r;
    _exit(EXIT_NOT_FOUND);
  }
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(errpipe[1]);
  int words[2] = {-1, 0};
  size_t got = 0;
  ssize_t n;
  int child_errno = 0;
  if (pid < 0) child_errno = fork_errno;
  else
    while (got < sizeof words && ((n = read(errpipe[0], (char *)words + got, sizeof words - got)) > 0 || (n < 0 && errno == EINTR)))
      if (n > 0) got += (size_t)n;
  if (pid > 0 && got >= sizeof words) child_errno = words[1];
  close(errpipe[0]);
  if (cg->given)
    snprintf(cgroupns_state, sizeof cgroupns_state, "%s", words[0] == 0 ? "entered" : words[0] < 0 ? "not-in-cgroup" : wrapper_errname(words[0]));
  if (pid > 0 && child_errno == 0) {
    st.adapter = pid;
    return;
  }
  if (pid > 0) waitpid(pid, NULL, 0);
  char msg[1200];
  snprintf(msg, sizeof msg, "spawn %.1000s %s", command[0], wrapper_errname(child_errno));
  report_spawn_error(wrapper_errname(child_errno), msg);
  put_stderr("proclease wrapper: cannot start adapter: ");
  put_stderr(msg);
  put_stderr("\n");
  exit(child_errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXECUTE);
}

static void report_exit(void) {
  char line[128];
  if (st.adapter_signal != 0) {
    const char *name = st.adapter_signal > 0 && st.adapter_signal < (int)(sizeof SIGNAMES / sizeof SIGNAMES[0]) ? SIGNAMES[st.adapter_signal] : NULL;
    if (name) snprintf(line, sizeof line, "{\"type\":\"exit\",\"code\":null,\"signal\":\"%s\"}\n", name);
    else snprintf(line, sizeof line, "{\"type\":\"exit\",\"code\":null,\"signal\":\"SIG%d\"}\n", st.adapter_signal);
  } else {
    snprintf(line, sizeof line, "{\"type\":\"exit\",\"code\":%d,\"signal\":null}\n", st.adapter_code);
  }
  send_line(line);
}

/* What the sweep did, for the "cleanup" report (sent at once, or after a durable wrapper's replay). */
static struct {
  pid_t ended[MAX_ENDED];
  int n;
  long long t0;
  const char *reason;
} sw;

/* The sweep of the tree; `keep_door`: a durable wrapper whose adapter ended while detached still takes a gateway. */
static void sweep(const char *reason, long grace_ms, int keep_door) {
  /* no gateway may attach to a tree being ended */
  if (att.listen_fd >= 0 && !keep_door) attach_close(&att);
  sw.t0 = wrapper_now_ms();
  sw.reason = reason;
  int reported = st.adapter_exited;
  /* nobody asked: the wrapper's own word on who ended the tree, for the reconcile that settles its lease */
  int unasked = (strcmp(reason, "parent-gone") == 0 && !asked_to_end) || strcmp(reason, "window-expired") == 0;
  if (unasked) end_record(&st, reason, NULL, 0);
  int n = wrapper_sweep(&st, grace_ms, sw.ended, MAX_ENDED - 1);
  if (unasked) end_record(&st, reason, sw.ended, n);
  /* the adapter was signalled too: give it a moment to report its status */
  for (long long until = wrapper_now_ms() + 1000; !wrapper_peek_adapter(&st) && wrapper_now_ms() < until;) poll(NULL, 0, 5);
  if (st.adapter_exited && !reported) report_exit();
  int has = 0;
  for (int i = 0; i < n; i++) has |= sw.ended[i] == st.adapter;
  if (st.adapter_exited && !has) {
    int i = n++;
    while (i > 0 && sw.ended[i - 1] > st.adapter) sw.ended[i] = sw.ended[i - 1], i--;
    sw.ended[i] = st.adapter;
  }
  sw.n = n;
}

/* The "cleanup" report and the wrapper's exit with the adapter's status. */
static void report_and_exit(void) {
  size_t cap = 96 + (size_t)sw.n * 12;
  char *line = malloc(cap);
  if (line != NULL) {
    size_t o = (size_t)snprintf(line, cap, "{\"type\":\"cleanup\",\"reason\":\"%s\",\"ended\":[", sw.reason);
    for (int i = 0; i < sw.n; i++) o += (size_t)snprintf(line + o, cap - o, i ? ",%d" : "%d", (int)sw.ended[i]);
    snprintf(line + o, cap - o, "],\"durationMs\":%lld}\n", wrapper_now_ms() - sw.t0);
    send_line(line);
  }
  if (att.listen_fd >= 0) attach_close(&att);
  if (st.adapter_exited) waitpid(st.adapter, NULL, WNOHANG);
  if (!st.adapter_exited) exit(1);
  exit(st.adapter_signal != 0 ? 128 + st.adapter_signal : st.adapter_code);
}

static void cleanup_and_exit(const char *reason, long grace_ms) {
  sweep(reason, grace_ms, 0);
  report_and_exit();
}

static void forward(int sig) {
  if (st.adapter_exited) return;
  forwarded = 1;
  kill(-st.adapter, sig);
}

/* What the durable relay (wrapper_relay_linux.c) uses of this file. */
int wrapper_signal_fd(void) { return sigpipe_fds[0]; }
void wrapper_forward_signal(int sig) { forward(sig); }
int wrapper_lifeline_fd(void) { return lifeline; }
int wrapper_adapter_exited(void) { return st.adapter_exited; }
void wrapper_reap_children(void) { wrapper_reap_adopted(&st); }
void wrapper_report_exit(void) { report_exit(); }
void wrapper_asked_to_end(void) { asked_to_end = 1; }
void wrapper_drop_lifeline(void) {
  if (lifeline >= 0) close(lifeline);
  lifeline = -1;
}
/* NULL: the adapter ended, by a forwarded signal or on its own */
void wrapper_cleanup_and_exit(const char *reason, long grace_ms) {
  cleanup_and_exit(reason != NULL ? reason : forwarded ? "signal" : "adapter-exit", grace_ms);
}
void wrapper_sweep_only(long grace_ms) { sweep(forwarded ? "signal" : "adapter-exit", grace_ms, 1); }
void wrapper_report_and_exit(void) { report_and_exit(); }

/* Idle in poll() (no timeout) until the adapter exits or the gateway goes. */
static void run(long grace_ms, int parent_gone_at_start) {
  if (parent_gone_at_start) cleanup_and_exit("parent-gone", grace_ms);
  for (;;) {
    struct pollfd fds[2] = {{sigpipe_fds[0], POLLIN, 0}, {lifeline, POLLIN, 0}};
    int nfds = lifeline >= 0 ? 2 : 1;
    if (poll(fds, (nfds_t)nfds, -1) < 0 && errno != EINTR) continue;
    unsigned char sigs[64];
    ssize_t n = read(sigpipe_fds[0], sigs, sizeof sigs);
    int gone = 0, child = 0;
    for (ssize_t i = 0; i < n; i++) {
      if (sigs[i] == SIGCHLD) child = 1;
      else if (sigs[i] == SIGUSR2) gone = 1;
      else forward(sigs[i]);
    }
    if (nfds == 2 && fds[1].revents != 0) {
      char buf[512];
      ssize_t r = read(lifeline, buf, sizeof buf);
      /* "end": the gateway ends the session (its close); EOF, a reset or a hang-up mean it is gone */
      if (r > 0 && memmem(buf, (size_t)r, "end\n", 4) != NULL) asked_to_end = 1;
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) gone = 1;
    }
    if (child) wrapper_reap_adopted(&st);
    if (st.adapter_exited) {
      report_exit();
      cleanup_and_exit(gone ? "parent-gone" : forwarded ? "signal" : "adapter-exit", grace_ms);
    }
    if (gone) cleanup_and_exit("parent-gone", grace_ms);
  }
}

/*
 * Durable: the wrapper leaves the gateway's session (a kill of the gateway's
 * whole process group must not reach it) and makes the adapter's pipes;
 * where its socket cannot listen it stays a plain wrapper and says why.
 */
static int durable_setup(const struct durable_opts *d, int pipes[3][2], char *why, size_t cap) {
  if (!d->on) return 0;
  attach_open(&att, d->attach_dir, d->state_lock, st.lease_id);
  if (att.listen_fd < 0) {
    json_escape(why, cap, att.why);
    return 0;
  }
  for (int i = 0; i < 3; i++)
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      report_spawn_error(wrapper_errname(errno), "cannot create the adapter's pipes");
      exit(EXIT_CANNOT_EXECUTE);
    }
  setsid();
  /*
   * Not dumpable: a process of our uid can no longer ptrace us, nor read our
   * memory, environ or fds, so it cannot take the socket over from inside
   * (the lock proof holds only against a peer that is not us). The adapter
   * is dumpable again after its exec. What the gateway reads of us to verify
   * (stat's start time, cmdline, the group) stays readable to its uid; our
   * environ and exe do not, and verification needs neither under an exact
   * start time (the native and procfs backends).
   */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return 1;
}

int main(int argc, char **argv) {
  pid_t parent = getppid();
  /* handlers first: a signal before the adapter exists is held in the pipe and forwarded after the spawn */
  install_handlers();
  open_lifeline();
  long grace_ms;
  struct durable_opts d;
  int first = parse_args(argc, argv, &grace_ms, &d);
  /* exec'd from the sealed copy (/proc/self/fd/N), the kernel named us "N": take the installed file's name, as ps shows it */
  const char *slash = strrchr(argv[0], '/');
  prctl(PR_SET_NAME, slash != NULL ? slash + 1 : argv[0], 0, 0, 0);
  st.self = getpid();
  st.self_start = own_start_time();
  st.lease_id = getenv("OPENCLAW_ACPX_LEASE_ID");
  st.instance_id = getenv("OPENCLAW_GATEWAY_INSTANCE_ID");
  end_record_open(&st);
  struct lease_cgroup cg;
  lease_cgroup_read(&cg);
  if (cg.required && !cg.given) refuse_cgroup("limits were asked for but no lease cgroup was given");
  int pipes[3][2];
  char why[200] = "";
  int durable = durable_setup(&d, pipes, why, sizeof why);
  /* before the spawn: an orphan made before we are a subreaper would go to init */
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0);
  /* the gateway may have died before the pdeathsig was armed */
  int gone = getppid() != parent;
  int child_stdio[3] = {pipes[0][0], pipes[1][1], pipes[2][1]};
  spawn_adapter(argv + first, &cg, durable ? child_stdio : NULL);
  if (cg.dirfd >= 0) close(cg.dirfd);
  for (int i = 0; durable && i < 3; i++) close(child_stdio[i]);
  char line[512], ns[64] = "", dur[260] = "";
  if (cgroupns_state[0]) snprintf(ns, sizeof ns, ",\"cgroupNamespace\":\"%s\"", cgroupns_state);
  if (d.on) snprintf(dur, sizeof dur, durable ? ",\"durable\":\"listening\"" : ",\"durable\":\"unavailable\",\"durableWhy\":\"%s\"", why);
  snprintf(line, sizeof line, "{\"type\":\"started\",\"wrapperPid\":%d,\"adapterPid\":%d,\"pgid\":%d%s%s}\n", (int)st.self, (int)st.adapter, (int)st.adapter, ns, dur);
  send_line(line);
  if (durable) durable_run(&d, &att, pipes[0][1], pipes[1][0], pipes[2][0], grace_ms, gone);
  run(grace_ms, gone);
  return 0;
}
