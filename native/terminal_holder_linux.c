/*
 * proclease-terminal-holder: the root of an ACP client terminal of a durable
 * session (src/acpx/durable/terminals.ts, docs/lifecycle-controller.md).
 *
 *   proclease-terminal-holder --out FILE --status FILE --limit BYTES
 *     --grace-ms N --session-pid PID --session-start TICKS -- argv...
 *
 * It runs argv in a process group of its own, stdin /dev/null, stdout and
 * stderr together into one pipe it reads, and keeps what it reads in FILE
 * (one header byte, '0' or '1' once something was cut, then the bytes), so
 * the output outlives the gateway that asked for the terminal. FILE holds at
 * most 2 x BYTES after its header, plus the one read (64 KiB at most) that
 * took it past that for the moment before the cut: its last BYTES go into a fresh
 * file renamed over it (a reader opens either one, whole), and what a
 * terminal/output answer keeps (the last BYTES, cut forward to a character
 * start) is always in it. When argv's process ends, its status goes to
 * STATUS (`{"exitCode":N,"signal":null}` or `{"exitCode":null,"signal":"SIGTERM"}`,
 * written then renamed), so a gateway that re-took the terminal answers
 * terminal/wait_for_exit truthfully.
 *
 * It lives as long as its session: the session's wrapper (PID, with the
 * start time TICKS, so a reused pid is not it), watched through a pidfd. When
 * that wrapper is gone (the session closed, its window ran out, a reap ended
 * it) the terminal's group is ended: TERM, GRACE, KILL to the whole group,
 * whether or not its leader ended in the grace. A gateway's death is
 * nothing to it: the wrapper of a durable session waits, and so does this.
 * TERM, INT and HUP sent to it go on to the terminal's group (how a
 * supervisor's tree kill reaches a group that is not the root's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static int sig_w = -1;
static void on_signal(int s) {
  int e = errno;
  char c = (char)s;
  ssize_t n = write(sig_w, &c, 1);
  (void)n;
  errno = e;
}

struct opts {
  const char *out, *status;
  long long limit;
  long grace_ms;
  pid_t session_pid;
  unsigned long long session_start;
  int first;
};

static void usage(const char *why) {
  fprintf(stderr, "proclease-terminal-holder: %s\n", why);
  exit(125);
}

static void parse(int argc, char **argv, struct opts *o) {
  memset(o, 0, sizeof *o);
  o->limit = -1;
  o->grace_ms = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      if (i + 1 >= argc) usage("no command after --");
      o->first = i + 1;
      break;
    }
    if (i + 1 >= argc) usage("an option without its value");
    const char *k = argv[i], *v = argv[++i];
    if (strcmp(k, "--out") == 0) o->out = v;
    else if (strcmp(k, "--status") == 0) o->status = v;
    else if (strcmp(k, "--limit") == 0) o->limit = strtoll(v, NULL, 10);
    else if (strcmp(k, "--grace-ms") == 0) o->grace_ms = strtol(v, NULL, 10);
    else if (strcmp(k, "--session-pid") == 0) o->session_pid = (pid_t)strtol(v, NULL, 10);
    else if (strcmp(k, "--session-start") == 0) o->session_start = strtoull(v, NULL, 10);
    else usage("an unknown option");
  }
  if (!o->first || !o->out || !o->status || o->limit < 0 || o->grace_ms < 0 || o->session_pid <= 0)
    usage("--out, --status, --limit, --grace-ms, --session-pid and a command are required");
}

/* field 22 of /proc/PID/stat (after the comm, which may hold spaces and parentheses) */
static int start_ticks(pid_t pid, unsigned long long *ticks) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (p == NULL) return -1;
  p += 2; /* the state, field 3: a zombie has ended (the polling fallback would see it as alive) */
  if (*p == 'Z' || *p == 'X') return -1;
  for (int f = 3; f < 22; f++) {
    p = strchr(p, ' ');
    if (p == NULL) return -1;
    p++;
  }
  *ticks = strtoull(p, NULL, 10);
  return 0;
}

static int session_alive(const struct opts *o) {
  unsigned long long t;
  return start_ticks(o->session_pid, &t) == 0 && t == o->session_start;
}

/* the output file: its descriptor (read-write, for the compaction) and the bytes after its header */
static int out_fd = -1;
static long long out_len = 0;

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int open_out(const char *path, char header) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (write_all(fd, &header, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* the last `limit` bytes into a fresh file, renamed over the old one: a reader never sees a half-made file */
static void compact(const struct opts *o) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", o->out);
  int fd = open_out(tmp, '1');
  if (fd < 0) return;
  long long keep = out_len < o->limit ? out_len : o->limit;
  long long from = 1 + out_len - keep;
  char buf[65536];
  while (keep > 0) {
    ssize_t r = pread(out_fd, buf, keep < (long long)sizeof buf ? (size_t)keep : sizeof buf, from);
    if (r <= 0 || write_all(fd, buf, (size_t)r) != 0) {
      close(fd);
      unlink(tmp);
      return;
    }
    from += r;
    keep -= r;
  }
  if (rename(tmp, o->out) != 0) {
    close(fd);
    unlink(tmp);
    return;
  }
  close(out_fd);
  out_fd = fd;
  out_len = out_len < o->limit ? out_len : o->limit;
}

static void append(const struct opts *o, const char *p, size_t n) {
  if (write_all(out_fd, p, n) != 0) return;
  out_len += (long long)n;
  if (out_len > 2 * o->limit) compact(o);
}

static const char *signal_name(int s) {
  switch (s) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGVTALRM: return "SIGVTALRM";
    case SIGPROF: return "SIGPROF";
    case SIGSYS: return "SIGSYS";
    default: return NULL;
  }
}

static void write_status(const struct opts *o, int ws) {
  char tmp[4200], json[128];
  if (WIFEXITED(ws)) snprintf(json, sizeof json, "{\"exitCode\":%d,\"signal\":null}\n", WEXITSTATUS(ws));
  else {
    const char *name = signal_name(WTERMSIG(ws));
    if (name != NULL) snprintf(json, sizeof json, "{\"exitCode\":null,\"signal\":\"%s\"}\n", name);
    else snprintf(json, sizeof json, "{\"exitCode\":null,\"signal\":null,\"signo\":%d}\n", WTERMSIG(ws));
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", o->status);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  int ok = write_all(fd, json, strlen(json)) == 0;
  close(fd);
  if (!ok || rename(tmp, o->status) != 0) unlink(tmp);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t spawn_command(char **argv, int out_w) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  int nul = open("/dev/null", O_RDONLY);
  if (nul >= 0) dup2(nul, 0);
  dup2(out_w, 1);
  dup2(out_w, 2);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < 32; s++) sigaction(s, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execvp(argv[0], argv);
  dprintf(1, "%s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

static void install_handlers(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) usage("no signal pipe");
  sig_w = p[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  int caught[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
  for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++) sigaction(caught[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (dup3(p[0], 3 + 64, O_CLOEXEC) < 0) usage("no signal pipe"); /* a known place, closed at the exec */
  close(p[0]);
}

/*
 * The command's exit is seen with WNOWAIT and it is reaped only when the
 * holder leaves: an unreaped leader keeps its pid, so the group id every
 * signal here names cannot be another process's while the holder lives.
 */
struct state {
  pid_t child;
  int exited, status, pipe_r, pidfd, ending, killed;
  long long kill_at;
};

/* what is in the pipe now, without waiting */
static void drain(const struct opts *o, struct state *s) {
  char buf[65536];
  while (s->pipe_r >= 0) {
    ssize_t r = read(s->pipe_r, buf, sizeof buf);
    if (r > 0) append(o, buf, (size_t)r);
    else if (r < 0 && errno == EINTR) continue;
    else {
      if (r == 0) {
        close(s->pipe_r);
        s->pipe_r = -1;
      }
      return;
    }
  }
}

static void on_signals(const struct opts *o, struct state *s) {
  char c[64];
  ssize_t n;
  /* the group outlives its leader's exit: what is sent to the holder still reaches it */
  while ((n = read(3 + 64, c, sizeof c)) > 0) {
    for (ssize_t i = 0; i < n; i++)
      if (c[i] != SIGCHLD) kill(-s->child, c[i]);
  }
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (s->exited || waitid(P_PID, (id_t)s->child, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != s->child)
    return;
  s->exited = 1;
  s->status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : W_EXITCODE(0, si.si_status);
  /* what it wrote before it ended is in the file before its status is */
  drain(o, s);
  write_status(o, s->status);
}

/* done: the command ended and, once its group is being ended, the KILL went to the whole group */
static int finished(const struct state *s) {
  return s->exited && (s->ending ? s->killed : s->pipe_r < 0);
}

/* the session's wrapper is gone: the terminal's group ends (TERM, grace, KILL) */
static void end_group(const struct opts *o, struct state *s) {
  if (s->ending) return;
  s->ending = 1;
  s->kill_at = now_ms() + o->grace_ms;
  kill(-s->child, SIGTERM);
}

int main(int argc, char **argv) {
  struct opts o;
  parse(argc, argv, &o);
  install_handlers();
  out_fd = open_out(o.out, '0');
  if (out_fd < 0) usage("the output file could not be made");
  struct state s = {0};
  s.pidfd = (int)syscall(SYS_pidfd_open, o.session_pid, 0);
  int polling = s.pidfd < 0 && errno == ENOSYS;
  /* opened first, then checked: the pidfd then names the session's wrapper, not a process that reused its pid */
  int gone = !session_alive(&o) || (s.pidfd < 0 && !polling);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) usage("no output pipe");
  s.child = spawn_command(argv + o.first, p[1]);
  if (s.child < 0) usage("fork failed");
  setpgid(s.child, s.child);
  close(p[1]);
  s.pipe_r = p[0];
  fcntl(s.pipe_r, F_SETFL, O_NONBLOCK);
  if (gone) end_group(&o, &s);
  while (!finished(&s)) {
    struct pollfd f[3] = {{3 + 64, POLLIN, 0}, {s.pipe_r, POLLIN, 0}, {s.ending ? -1 : s.pidfd, POLLIN, 0}};
    int timeout = -1;
    if (s.ending && !s.killed) timeout = (int)(s.kill_at - now_ms() > 0 ? s.kill_at - now_ms() : 0);
    else if (polling && !s.ending) timeout = 500;
    int r = poll(f, 3, timeout);
    if (r < 0 && errno != EINTR) break;
    if (f[1].revents) drain(&o, &s);
    on_signals(&o, &s);
    if (!s.ending && ((s.pidfd >= 0 && f[2].revents) || (polling && !session_alive(&o)))) end_group(&o, &s);
    if (s.ending && !s.killed && now_ms() >= s.kill_at) {
      kill(-s.child, SIGKILL);
      s.killed = 1;
    }
  }
  if (s.exited) waitpid(s.child, NULL, 0);
  if (s.exited && WIFEXITED(s.status)) return WEXITSTATUS(s.status);
  return s.exited ? 128 + WTERMSIG(s.status) : 125;
}
