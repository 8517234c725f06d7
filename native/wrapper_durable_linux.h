/*
 * The native wrapper's durable mode (Linux; docs/wrapper.md "Durable
 * sessions"): the wrapper holds the adapter's stdin/stdout/stderr itself,
 * relays them while a gateway is attached, keeps a journal of what the
 * agent wrote, and waits for a verified gateway to re-attach through a Unix
 * socket when its gateway goes away. Plain data only; the rules the
 * controller relies on are restated in src/acpx/durable/protocol.ts.
 */
#ifndef PROCLEASE_WRAPPER_DURABLE_LINUX_H
#define PROCLEASE_WRAPPER_DURABLE_LINUX_H

#include <stddef.h>
#include <sys/types.h>

#define JSCAN_ID_MAX 96
#define JSCAN_METHOD_MAX 64

/* One JSON-RPC line's top level, read a byte at a time: its "id" token, its "method", whether it answers. */
struct jscan {
  unsigned char st, str, esc, which, key_len, key_over, id_len, id_over, method_len, method_over;
  unsigned char has_id, has_method, has_result, has_error;
  unsigned int depth;
  char key[8];
  char id[JSCAN_ID_MAX];
  char method[JSCAN_METHOD_MAX];
  size_t pos;    /* bytes of the line so far */
  size_t id_pos; /* where the id token starts in the line */
};

enum jkind { J_OTHER = 0, J_NOTE = 1, J_REQ = 2, J_RESP = 3 };

void jscan_reset(struct jscan *s);
/* one byte of the line (never its newline) */
void jscan_byte(struct jscan *s, unsigned char c);
/* jscan_byte over `n` bytes (none of them a newline), in one call */
void jscan_bytes(struct jscan *s, const char *p, size_t n);
/* the line's kind, once its newline came */
enum jkind jscan_kind(const struct jscan *s);
/* the method is exactly `m` */
int jscan_method_is(const struct jscan *s, const char *m);

/* The id token as a number, when it is a plain decimal integer (below 10^15); 0 otherwise. */
int jscan_id_number(const struct jscan *s, unsigned long long *out);
/* The last `cap` bytes of what was written, kept in `ring`. */
void tail_keep(char *ring, size_t *len, size_t cap, const char *p, size_t n);

/* The agent's lines the wrapper holds: whole lines, in order, within `bound` bytes (one read may pass it). */
struct jentry {
  size_t off, len, id_pos;
  unsigned char id_len, kind, answered, held;
};

struct journal {
  char *buf;
  size_t len, alloc, bound;
  struct jentry *e;
  size_t n, ealloc;
  int open;   /* the last entry is the line being read */
  int gap;    /* a line the turn needed could not be held (docs: "gap") */
};

/* Appends bytes of the current line (opening an entry); 0 when they were not held (over the bound or no memory). */
int journal_add(struct journal *j, const char *p, size_t n, int over_ok);
/* The current line ended: its kind and id (from the scan); `keep` 0 drops it. */
void journal_end_line(struct journal *j, const struct jscan *s, int keep);
/* Marks the agent request whose id token is `id` answered. */
void journal_answered(struct journal *j, const char *id, size_t id_len);
/* Drops every entry but unanswered requests and the line being read. */
void journal_compact(struct journal *j);
/* Whether entry `i` holds the id token `id`. */
int journal_id_is(const struct journal *j, size_t i, const char *id, size_t id_len);

/* The attach socket: frames are one type byte, a 4-byte big-endian length, the payload. */
#define FRAME_HEAD 5
#define FRAME_STDOUT 'O'
#define FRAME_STDERR 'E'
#define FRAME_REPORT 'R'
#define FRAME_HEADER 'H'
#define FRAME_LIVE 'L'
#define FRAME_REFUSED 'X'
#define FRAME_AUTH 'A'
#define FRAME_STDIN 'I'
#define FRAME_CONTROL 'C'

struct attach {
  int dirfd;            /* the attach directory */
  int listen_fd;        /* -1 when it could not be made */
  char name[96];        /* <lease id>.sock */
  int lock_fd;          /* the state dir's lock file, opened at start: its inode is the one a gateway must hold */
  dev_t lock_dev;
  ino_t lock_ino;
  char why[160];        /* why the socket or the lock could not be set up */
};

/* Opens the lock file and the socket; fills `why` and leaves listen_fd -1 on failure. */
void attach_open(struct attach *a, const char *dir, const char *lock_path, const char *lease_id);
/* Removes the socket file (and the waiting file). */
void attach_close(struct attach *a);
/*
 * <lease id>.waiting beside the socket, for operators (`proclease status`):
 * `{"since": ms, "deadline": ms}` (wall clock) while the window runs; removed
 * (window_ms 0) on a re-adoption. What decides is the wrapper's own clock.
 */
void attach_waiting(const struct attach *a, long window_ms);
/*
 * A new connection's peer: 0 when it is a process of our uid holding the
 * state dir's lock (an exclusive flock on the inode opened at start, read
 * from /proc/locks); else the refusal's code.
 */
const char *attach_peer_refusal(const struct attach *a, int conn);
/*
 * The auth frame in `buf` (`<lease id>\n<instance id>`, both this wrapper's
 * own, from its environment): -1 while incomplete, 0 when it names us, 1
 * with the refusal's code otherwise.
 */
int attach_auth(const char *buf, size_t len, const char **refusal);
/* Tells a connection why it is refused (a short code) and closes it. */
void attach_refuse(int fd, const char *code);
/* Writes a whole small frame, waiting at most `ms` for room; 0 on success. */
int frame_write_all(int fd, char type, const char *payload, size_t len, int ms);

/* A relay buffer (wrapper_attach_linux.c): bytes waiting for a non-blocking write. */
#define CHUNK 32768
#define DOWN_CAP (4 * CHUNK)
struct buf {
  char p[DOWN_CAP];
  size_t len;
};
/* Appends (the caller made sure of the room). */
void buf_put(struct buf *b, const void *p, size_t n);
/* Appends one frame. */
void buf_frame(struct buf *b, char type, const char *p, size_t n);
size_t buf_room(const struct buf *b);
/* Writes what `b` holds to `fd` without blocking; -1 when the reader is gone. */
int buf_drain(struct buf *b, int fd);
/* buf_drain until `b` is empty, waiting at most `ms` for room (fd -1: nothing); 0 when all was written. */
int buf_flush(struct buf *b, int fd, int ms);

/* The durable options from argv. */
struct durable_opts {
  int on;
  long window_ms;
  long journal_bytes;
  const char *attach_dir;
  const char *state_lock;
};

/* The relay, run instead of the plain wait once the adapter is started (wrapper_relay_linux.c). */
void durable_run(const struct durable_opts *o, struct attach *a, int ad_in, int ad_out, int ad_err, long grace_ms,
                 int parent_gone_at_start);
/* A report line while the relay runs: queued on the attached socket; 1 when taken. */
int durable_report(const char *line);

/* What the relay needs of wrapper_linux.c. */
int wrapper_signal_fd(void);
void wrapper_forward_signal(int sig);
void wrapper_drop_lifeline(void);
int wrapper_lifeline_fd(void);
void wrapper_cleanup_and_exit(const char *reason, long grace_ms);
/* The adapter ended while detached: the tree swept, the door kept open for a gateway to take the last words. */
void wrapper_sweep_only(long grace_ms);
/* After that: the "cleanup" report (to whoever is attached) and the exit. */
void wrapper_report_and_exit(void);
void wrapper_report_exit(void);
void wrapper_asked_to_end(void);
int wrapper_adapter_exited(void);
void wrapper_reap_children(void);

#endif
