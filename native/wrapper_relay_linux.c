/*
 * The durable wrapper's relay (Linux; docs/wrapper.md "Durable sessions").
 * The adapter's stdin, stdout and stderr are pipes this wrapper holds; the
 * gateway is attached through the wrapper's own fds 0/1/2/3 (the one that
 * spawned it) or, after a re-adoption, through one socket of frames
 * (wrapper_attach_linux.c). One poll loop, no thread, no timer but the
 * window's:
 *
 * - attached: bytes go both ways as they come. The gateway's lines are
 *   scanned for session/prompt requests (a turn begins: its id is kept) and
 *   for its answers to the agent's requests; the agent's lines are scanned
 *   for the answer that ends the turn. While a turn is in flight every agent
 *   line is journaled; outside a turn only the agent's requests the gateway
 *   has not answered yet. Past the journal's bound an attached turn is still
 *   relayed, and the header says the journal has a gap.
 * - the gateway goes (lifeline EOF or the parent-death signal; the socket's
 *   EOF after a re-adoption): the window starts. The adapter's stdin stays
 *   open and first gets what the gateway wrote before it went (read on to
 *   its EOF, at most LAST_IN_MS: the adapter may have lagged), every agent line is journaled (answers to the gone gateway's other
 *   requests are dropped and counted), and past the bound the adapter's
 *   stdout is no longer read: the agent blocks on its write, nothing is
 *   dropped. Its stderr keeps its last 16 KiB.
 * - a verified gateway connects (the lock holder, then its lease and
 *   instance): a header (the turn in flight when the gateway went, ended or
 *   not, how many session/update lines of it are replayed, the highest
 *   numeric request id the gateway side ever sent), then the journal without
 *   answered requests and without answers nobody asked for, then "live".
 * - the window ends: the same cleanup as a gateway's death without
 *   durability (TERM, grace, KILL). The controller's "end" makes the wrapper
 *   non-durable at once: EOF then closes the adapter's stdin and ends the tree.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wrapper_durable_linux.h"
#include "wrapper_linux.h"

#define ERR_RING 16384
#define AUTH_MS 2000
#define FLUSH_MS 2000
#define LAST_IN_MS 1000

enum { M_STDIO, M_DETACHED, M_SOCKET };

static struct {
  const struct durable_opts *o;
  struct attach *a;
  long grace_ms;
  int mode, ending, gw_in_eof;
  long long deadline, last_in_until;
  int ad_in, ad_out, ad_err, conn, pending, auth_ok;
  long long pending_until;
  char auth[FRAME_HEAD + 256];
  size_t auth_len;
  struct buf up, down;
  char err[CHUNK], ring[ERR_RING];
  size_t err_len, ring_len;
  unsigned char fhead[FRAME_HEAD];
  size_t fhead_len, frem;
  char ftype, ctl[256];
  size_t ctl_len;
  struct jscan up_scan, down_scan;
  struct journal j;
  int turn_active, adopt, adopt_ended;
  char turn_id[JSCAN_ID_MAX];
  size_t turn_id_len;
  unsigned long turn_updates, dropped_answers;
  unsigned long long id_floor;
  int replaying, adapter_done;
  size_t replay_i, replay_off;
} R;

static void put_frame(char type, const char *p, size_t n) { buf_frame(&R.down, type, p, n); }

static int down_fd(void) { return R.mode == M_STDIO ? 1 : R.mode == M_SOCKET ? R.conn : -1; }

/* The down buffer written out, waiting at most FLUSH_MS (before a report, and before the wrapper exits). */
static void flush_down(void) { buf_flush(&R.down, down_fd(), FLUSH_MS); }

int durable_report(const char *line) {
  if (R.o == NULL) return 0;
  if (R.mode != M_SOCKET) return R.mode == M_DETACHED; /* stdio: the lifeline as before; detached: nobody to tell */
  flush_down();
  frame_write_all(R.conn, FRAME_REPORT, line, strlen(line), FLUSH_MS);
  return 1;
}

static int same_id(const struct jscan *s, const char *id, size_t len) {
  return s->has_id && !s->id_over && s->id_len == len && memcmp(s->id, id, len) == 0;
}

/* A gateway line ended: a turn begins, an agent request was answered, the highest request id. */
static void gateway_line(void) {
  struct jscan *s = &R.up_scan;
  enum jkind k = jscan_kind(s);
  if (k == J_REQ && !s->id_over) {
    unsigned long long v;
    if (jscan_id_number(s, &v) && v > R.id_floor) R.id_floor = v;
    if (jscan_method_is(s, "session/prompt")) {
      R.turn_active = 1;
      if (R.mode == M_DETACHED) R.adopt = 1, R.adopt_ended = 0; /* the gone gateway's last write: its turn is adopted */
      memcpy(R.turn_id, s->id, s->id_len);
      R.turn_id_len = s->id_len;
      R.turn_updates = 0;
      R.j.gap = 0;
    }
  } else if (k == J_RESP && !s->id_over) {
    journal_answered(&R.j, s->id, s->id_len);
    if (!R.turn_active && R.mode != M_DETACHED) journal_compact(&R.j);
  }
  jscan_reset(s);
}

/* An agent line ended: kept or not (the header's rule), and the turn's end. */
static void agent_line(void) {
  struct jscan *s = &R.down_scan;
  enum jkind k = jscan_kind(s);
  int ends_turn = R.turn_active && k == J_RESP && same_id(s, R.turn_id, R.turn_id_len);
  int keep;
  if (R.mode == M_DETACHED) {
    keep = k != J_RESP || ends_turn;
    if (!keep) R.dropped_answers++;
  } else {
    keep = R.turn_active || k == J_REQ;
  }
  size_t before = R.j.n;
  int held = R.j.open && R.j.e[R.j.n - 1].held;
  journal_end_line(&R.j, s, keep);
  if (keep && held && R.j.n == before && R.turn_active && k == J_NOTE && jscan_method_is(s, "session/update"))
    R.turn_updates++;
  if (ends_turn) {
    R.turn_active = 0;
    if (R.mode == M_DETACHED) R.adopt_ended = 1;
    else journal_compact(&R.j);
  }
  jscan_reset(s);
}

/* Bytes of one side, cut at newlines, through its scanner (and the journal, for the agent's). */
static void scan(const char *p, size_t n, int agent) {
  struct jscan *s = agent ? &R.down_scan : &R.up_scan;
  size_t i = 0;
  while (i < n) {
    const char *nl = memchr(p + i, '\n', n - i);
    size_t seg = nl != NULL ? (size_t)(nl - (p + i)) + 1 : n - i;
    size_t body = nl != NULL ? seg - 1 : seg;
    jscan_bytes(s, p + i, body);
    if (agent) journal_add(&R.j, p + i, seg, R.mode == M_DETACHED);
    if (nl != NULL) agent ? agent_line() : gateway_line();
    i += seg;
  }
}

/* The first gateway's stdin read out (its EOF) or given up on: /dev/null takes fd 0; a line it cut short is ended. */
static void last_in_done(void) {
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null > 0) dup2(null, 0), close(null);
  R.gw_in_eof = 1;
  if (R.up_scan.pos > 0 && R.up.len < sizeof R.up.p) buf_put(&R.up, "\n", 1), jscan_reset(&R.up_scan);
}

static void detach(void) {
  if (R.mode == M_STDIO) {
    /* fd 0 is read on to its EOF: what the gateway wrote before it went is in that pipe, unread while the adapter lagged */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 1; fd < 3 && null >= 0; fd++) dup2(null, fd);
    if (null > 2) close(null);
    wrapper_drop_lifeline();
    R.last_in_until = wrapper_now_ms() + LAST_IN_MS;
  } else if (R.mode == M_SOCKET) {
    close(R.conn);
    R.conn = -1;
  }
  R.mode = M_DETACHED;
  R.replaying = 0;
  R.down.len = 0;
  R.err_len = 0;
  R.deadline = wrapper_now_ms() + R.o->window_ms;
  attach_waiting(R.a, R.o->window_ms);
  if (R.turn_active) R.adopt = 1, R.adopt_ended = 0;
  if (R.gw_in_eof) last_in_done();
}

/* The gateway is gone: the window, or (asked to end, or not durable at all) the cleanup as before. */
static void gateway_gone(void) {
  if (R.ending) wrapper_cleanup_and_exit("parent-gone", R.grace_ms);
  detach();
}

static void control_line(const char *line, size_t n) {
  if (n == 3 && memcmp(line, "end", 3) == 0) R.ending = 1, wrapper_asked_to_end();
}

static void header(void) {
  char h[512], turn[256] = "null";
  if (R.adopt && R.turn_id_len > 0)
    snprintf(turn, sizeof turn, "{\"id\":%.*s,\"ended\":%s,\"updates\":%lu,\"gap\":%s}", (int)R.turn_id_len, R.turn_id,
             R.adopt_ended ? "true" : "false", R.turn_updates, R.j.gap ? "true" : "false");
  int n = snprintf(h, sizeof h,
                   "{\"v\":1,\"turn\":%s,\"idFloor\":%llu,\"droppedAnswers\":%lu,\"journalBytes\":%zu,\"held\":%s}",
                   turn, R.id_floor, R.dropped_answers, R.j.len, R.j.len >= R.j.bound ? "true" : "false");
  put_frame(FRAME_HEADER, h, (size_t)n);
  if (R.ring_len > 0) put_frame(FRAME_STDERR, R.ring, R.ring_len);
  R.ring_len = 0;
}

/* Journal entries to the socket as room allows; then "live", and the journal back to the attached rule. */
static void replay(void) {
  while (R.replaying && buf_room(&R.down) > FRAME_HEAD + 1) {
    if (R.replay_i >= R.j.n) {
      put_frame(FRAME_LIVE, "", 0);
      R.replaying = 0;
      /* an adapter that ended while nobody was attached: its last words are out, now its end */
      if (R.adapter_done) flush_down(), wrapper_report_exit(), wrapper_report_and_exit();
      R.adopt = 0;
      R.adopt_ended = 0;
      if (!R.turn_active) journal_compact(&R.j);
      return;
    }
    struct jentry *e = &R.j.e[R.replay_i];
    int open = R.j.open && R.replay_i == R.j.n - 1;
    int skip = !open && ((e->kind == J_REQ && e->answered) ||
                         (e->kind == J_RESP && !(R.turn_id_len > 0 && journal_id_is(&R.j, R.replay_i, R.turn_id, R.turn_id_len))));
    size_t left = e->len - R.replay_off, take = buf_room(&R.down) - FRAME_HEAD;
    if (skip || left == 0) {
      R.replay_i++, R.replay_off = 0;
      continue;
    }
    if (take > left) take = left;
    put_frame(FRAME_STDOUT, R.j.buf + e->off + R.replay_off, take);
    R.replay_off += take;
  }
}

static void adopt_conn(void) {
  attach_waiting(R.a, 0);
  R.mode = M_SOCKET;
  R.conn = R.pending;
  R.pending = -1;
  R.fhead_len = 0;
  R.frem = 0;
  jscan_reset(&R.up_scan);
  header();
  R.replaying = 1;
  R.replay_i = 0;
  R.replay_off = 0;
}

/*
 * A new connection: only a lock holder gets as far as its auth frame. One
 * that comes while the first gateway is still attached by its stdio waits
 * (up to AUTH_MS): holding the lock proves that gateway let it go, and its
 * lifeline's EOF may be a moment behind.
 */
static void accept_one(void) {
  int fd = accept4(R.a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  const char *no = attach_peer_refusal(R.a, fd);
  if (no == NULL && R.mode == M_SOCKET) no = "attached";
  if (no != NULL) return attach_refuse(fd, no);
  R.pending = fd;
  R.pending_until = wrapper_now_ms() + AUTH_MS;
  R.auth_len = 0;
  R.auth_ok = 0;
}

/* The lock holder's auth frame, as it arrives: then adopted (once detached), or refused. */
static void read_auth(void) {
  ssize_t n = read(R.pending, R.auth + R.auth_len, sizeof R.auth - R.auth_len);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return (void)(close(R.pending), R.pending = -1);
  R.auth_len += (size_t)n;
  const char *no = NULL;
  int r = attach_auth(R.auth, R.auth_len, &no);
  if (r > 0) return attach_refuse(R.pending, no), (void)(R.pending = -1);
  R.auth_ok = r == 0;
}

/* Frames from the adopted gateway: stdin bytes and control lines. */
static int read_frames(void) {
  char b[CHUNK];
  size_t cap = sizeof R.up.p - R.up.len < sizeof b ? sizeof R.up.p - R.up.len : sizeof b;
  ssize_t n = read(R.conn, b, cap);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) return -1;
  for (size_t i = 0; i < (size_t)n;) {
    if (R.fhead_len < FRAME_HEAD) {
      R.fhead[R.fhead_len++] = (unsigned char)b[i++];
      if (R.fhead_len == FRAME_HEAD) {
        R.ftype = (char)R.fhead[0];
        R.frem = ((size_t)R.fhead[1] << 24) | ((size_t)R.fhead[2] << 16) | ((size_t)R.fhead[3] << 8) | R.fhead[4];
        R.ctl_len = 0;
        if (R.ftype != FRAME_STDIN && (R.ftype != FRAME_CONTROL || R.frem > sizeof R.ctl)) return -1;
        if (R.frem == 0) R.fhead_len = 0;
      }
      continue;
    }
    size_t take = (size_t)n - i < R.frem ? (size_t)n - i : R.frem;
    if (R.ftype == FRAME_STDIN) {
      scan(b + i, take, 0);
      buf_put(&R.up, b + i, take);
    } else {
      memcpy(R.ctl + R.ctl_len, b + i, take);
      R.ctl_len += take;
    }
    i += take;
    R.frem -= take;
    if (R.frem == 0) {
      if (R.ftype == FRAME_CONTROL) control_line(R.ctl, R.ctl_len);
      R.fhead_len = 0;
    }
  }
  return 0;
}

/* The agent's stdout: to the gateway (raw, or a frame) and the journal; detached, to the journal only. */
static void read_agent(void) {
  char b[CHUNK];
  size_t cap = sizeof b;
  if (R.mode == M_SOCKET) cap = buf_room(&R.down) - FRAME_HEAD;
  else if (R.mode == M_STDIO) cap = buf_room(&R.down);
  ssize_t n = read(R.ad_out, b, cap < sizeof b ? cap : sizeof b);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return (void)(close(R.ad_out), R.ad_out = -1);
  if (R.mode == M_SOCKET) put_frame(FRAME_STDOUT, b, (size_t)n);
  else if (R.mode == M_STDIO) buf_put(&R.down, b, (size_t)n);
  scan(b, (size_t)n, 1);
}

static void read_stderr(void) {
  char b[CHUNK];
  size_t cap = R.mode == M_STDIO ? sizeof R.err - R.err_len : R.mode == M_SOCKET ? buf_room(&R.down) - FRAME_HEAD : sizeof b;
  ssize_t n = read(R.ad_err, b, cap < sizeof b ? cap : sizeof b);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return (void)(close(R.ad_err), R.ad_err = -1);
  if (R.mode == M_STDIO) {
    memcpy(R.err + R.err_len, b, (size_t)n);
    R.err_len += (size_t)n;
  } else if (R.mode == M_SOCKET) {
    put_frame(FRAME_STDERR, b, (size_t)n);
  } else {
    /* nobody attached: the tail is kept for the next gateway's stderrTail */
    tail_keep(R.ring, &R.ring_len, ERR_RING, b, (size_t)n);
  }
}

static void read_gateway_stdin(void) {
  char b[CHUNK];
  size_t cap = sizeof R.up.p - R.up.len < sizeof b ? sizeof R.up.p - R.up.len : sizeof b;
  ssize_t n = read(0, b, cap);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    R.gw_in_eof = 1;
    if (R.mode == M_DETACHED) last_in_done();
    return;
  }
  scan(b, (size_t)n, 0);
  buf_put(&R.up, b, (size_t)n);
}

static void read_lifeline(void) {
  int fd = wrapper_lifeline_fd();
  char b[256];
  ssize_t n = read(fd, b, sizeof b);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return gateway_gone();
  for (ssize_t i = 0; i < n; i++) {
    if (b[i] == '\n') {
      control_line(R.ctl, R.ctl_len);
      R.ctl_len = 0;
    } else if (R.ctl_len < sizeof R.ctl) {
      R.ctl[R.ctl_len++] = b[i];
    }
  }
}

/*
 * The adapter ended: what it wrote before is delivered first, then its exit
 * and the sweep, as without durability. While nobody is attached, the tree
 * is swept now and what the agent wrote waits in the journal for a gateway,
 * until the window ends; a gateway that comes gets the replay, then the
 * reports, then the wrapper exits.
 */
static void adapter_ended(void) {
  if (R.adapter_done) return;
  while (R.ad_out >= 0 && (R.mode == M_DETACHED || buf_room(&R.down) > FRAME_HEAD + 1)) {
    int before = R.ad_out;
    size_t had = R.down.len, jl = R.j.len;
    read_agent();
    if (R.ad_out == before && R.down.len == had && R.j.len == jl) break; /* nothing more right now (a grandchild holds the pipe) */
    if (R.mode != M_DETACHED) flush_down();
  }
  if (R.mode == M_DETACHED) {
    R.adapter_done = 1;
    wrapper_sweep_only(R.grace_ms);
    return;
  }
  flush_down();
  wrapper_report_exit();
  wrapper_cleanup_and_exit(NULL, R.grace_ms);
}

static void signals(void) {
  unsigned char sigs[64];
  ssize_t n = read(wrapper_signal_fd(), sigs, sizeof sigs);
  int child = 0;
  for (ssize_t i = 0; i < n; i++) {
    if (sigs[i] == SIGCHLD) child = 1;
    else if (sigs[i] == SIGUSR2) {
      if (R.mode == M_STDIO) gateway_gone();
    } else wrapper_forward_signal(sigs[i]);
  }
  if (child) wrapper_reap_children();
  if (wrapper_adapter_exited()) adapter_ended();
}

static void set_nonblock(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

enum { P_SIG, P_LISTEN, P_PENDING, P_AD_OUT, P_AD_ERR, P_AD_IN, P_IN, P_OUT, P_ERR, P_LIFE, P_N };

void durable_run(const struct durable_opts *o, struct attach *a, int ad_in, int ad_out, int ad_err, long grace_ms,
                 int parent_gone_at_start) {
  R.o = o, R.a = a, R.grace_ms = grace_ms, R.mode = M_STDIO, R.conn = -1, R.pending = -1;
  R.ad_in = ad_in, R.ad_out = ad_out, R.ad_err = ad_err;
  R.j.bound = (size_t)o->journal_bytes;
  for (int fd = 0; fd < 3; fd++) set_nonblock(fd);
  set_nonblock(ad_in), set_nonblock(ad_out), set_nonblock(ad_err);
  if (parent_gone_at_start) gateway_gone();
  for (;;) {
    struct pollfd p[P_N];
    for (int i = 0; i < P_N; i++) p[i] = (struct pollfd){-1, 0, 0};
    int stdio = R.mode == M_STDIO, sock = R.mode == M_SOCKET;
    p[P_SIG] = (struct pollfd){wrapper_signal_fd(), POLLIN, 0};
    if (a->listen_fd >= 0 && R.pending < 0) p[P_LISTEN] = (struct pollfd){a->listen_fd, POLLIN, 0};
    if (R.pending >= 0) p[P_PENDING] = (struct pollfd){R.pending, POLLIN, 0};
    if (R.replaying) replay();
    int out_room = R.mode == M_DETACHED ? R.j.len < R.j.bound : buf_room(&R.down) > CHUNK / 4 + FRAME_HEAD;
    if (R.ad_out >= 0 && !R.replaying && out_room) p[P_AD_OUT] = (struct pollfd){R.ad_out, POLLIN, 0};
    int err_room = stdio ? R.err_len < sizeof R.err : sock ? buf_room(&R.down) > CHUNK / 4 + FRAME_HEAD : 1;
    if (R.ad_err >= 0 && !R.replaying && err_room) p[P_AD_ERR] = (struct pollfd){R.ad_err, POLLIN, 0};
    if (R.ad_in >= 0 && R.up.len > 0) p[P_AD_IN] = (struct pollfd){R.ad_in, POLLOUT, 0};
    int up_room = R.up.len < sizeof R.up.p;
    if ((stdio || R.mode == M_DETACHED) && !R.gw_in_eof && up_room) p[P_IN] = (struct pollfd){0, POLLIN, 0};
    if (sock) p[P_IN] = (struct pollfd){R.conn, (short)(up_room ? POLLIN : 0), 0};
    if (R.down.len > 0 && (stdio || sock)) p[P_OUT] = (struct pollfd){stdio ? 1 : R.conn, POLLOUT, 0};
    if (stdio && R.err_len > 0) p[P_ERR] = (struct pollfd){2, POLLOUT, 0};
    if (stdio && wrapper_lifeline_fd() >= 0) p[P_LIFE] = (struct pollfd){wrapper_lifeline_fd(), POLLIN, 0};
    long long now = wrapper_now_ms(), until = -1;
    if (R.mode == M_DETACHED) until = !R.gw_in_eof && R.last_in_until < R.deadline ? R.last_in_until : R.deadline;
    if (R.pending >= 0 && (until < 0 || R.pending_until < until)) until = R.pending_until;
    int timeout = until < 0 ? -1 : until <= now ? 0 : (int)(until - now);
    if (poll(p, P_N, timeout) < 0 && errno != EINTR) continue;
    if (p[P_SIG].revents) signals();
    if (R.mode == M_DETACHED && wrapper_now_ms() >= R.deadline) {
      if (R.adapter_done) wrapper_report_and_exit();
      wrapper_cleanup_and_exit("window-expired", grace_ms);
    }
    /* what was polled for one mode is not handled in another (the lifeline's EOF or an adoption changes it) */
    int was = R.mode;
    if (p[P_LIFE].revents && R.mode == M_STDIO) read_lifeline();
    if (R.pending >= 0 && p[P_PENDING].revents) read_auth();
    if (R.mode == M_DETACHED && !R.gw_in_eof && wrapper_now_ms() >= R.last_in_until) last_in_done();
    /* the gone gateway's last bytes go first: then the new one is adopted */
    if (R.pending >= 0 && R.auth_ok && R.mode == M_DETACHED && R.gw_in_eof) adopt_conn();
    if (R.pending >= 0 && wrapper_now_ms() >= R.pending_until)
      attach_refuse(R.pending, R.mode == M_DETACHED ? "no-auth" : "attached"), R.pending = -1;
    if (p[P_LISTEN].revents) accept_one();
    if (p[P_IN].revents && p[P_IN].fd == 0 && !R.gw_in_eof) read_gateway_stdin();
    if (p[P_IN].revents && R.mode == was && was == M_SOCKET && read_frames() < 0) gateway_gone();
    /* nothing live before the replay: the adapter's output waits in its pipe until the journal is out */
    if (p[P_AD_OUT].revents && R.ad_out >= 0 && !R.replaying) read_agent();
    if (p[P_AD_ERR].revents && R.ad_err >= 0 && !R.replaying) read_stderr();
    if (R.ad_in >= 0 && R.up.len > 0 && buf_drain(&R.up, R.ad_in) < 0) R.up.len = 0, close(R.ad_in), R.ad_in = -1;
    /* a gateway that ends (not one that goes) closes the adapter's stdin, as without durability */
    if (R.ending && R.ad_in >= 0 && R.up.len == 0 && (R.gw_in_eof || R.mode == M_DETACHED)) close(R.ad_in), R.ad_in = -1;
    if (R.mode == M_STDIO && R.err_len > 0) {
      ssize_t n = write(2, R.err, R.err_len);
      if (n > 0) memmove(R.err, R.err + n, R.err_len - (size_t)n), R.err_len -= (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR) R.err_len = 0;
    }
    if ((R.mode == M_STDIO || R.mode == M_SOCKET) && R.down.len > 0 && buf_drain(&R.down, down_fd()) < 0) {
      if (R.mode == M_SOCKET) gateway_gone();
      else R.down.len = 0; /* the gateway's stdout is gone: its lifeline says whether it is */
    }
  }
}
