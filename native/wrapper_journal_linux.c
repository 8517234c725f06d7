/*
 * The durable wrapper's view of the ACP lines it relays (Linux):
 *
 * - jscan: the top level of one JSON-RPC line, a byte at a time with O(1)
 *   memory, whatever the line's size: its "id" token (the raw JSON text, so
 *   1 and "1" differ, as the controller's idKey says), its "method", and
 *   whether it carries "result" or "error". Nested values are skipped with
 *   their strings; nothing is parsed or unescaped. A line that is not an
 *   object is J_OTHER.
 * - journal: whole lines of the agent, in order, with their kind and where
 *   their id sits, within a byte bound. What it holds, and when, is the
 *   relay's rule (wrapper_relay_linux.c); this file only stores.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "wrapper_durable_linux.h"

enum { S_START, S_KEY_OR_END, S_KEY, S_COLON, S_VSTART, S_VSTR, S_VNEST, S_VSCALAR, S_AFTER, S_DONE, S_BAD };
enum { K_OTHER, K_ID, K_METHOD, K_RESULT, K_ERROR };

void jscan_reset(struct jscan *s) { memset(s, 0, sizeof *s); }

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r'; }

static int is_scalar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' ||
         c == '-';
}

/* The value being read belongs to a key whose text we keep: the id's raw token, the method's characters. */
static void capture(struct jscan *s, unsigned char c, int quote) {
  if (s->which == K_ID) {
    if (s->id_len < JSCAN_ID_MAX) s->id[s->id_len++] = (char)c;
    else s->id_over = 1;
  } else if (s->which == K_METHOD && !quote) {
    if (s->method_len < JSCAN_METHOD_MAX) s->method[s->method_len++] = (char)c;
    else s->method_over = 1;
  }
}

static void begin_value(struct jscan *s, unsigned char c) {
  s->which = K_OTHER;
  if (!s->key_over) {
    if (s->key_len == 2 && memcmp(s->key, "id", 2) == 0) s->which = K_ID, s->has_id = 1, s->id_pos = s->pos;
    else if (s->key_len == 6 && memcmp(s->key, "method", 6) == 0) s->which = K_METHOD, s->has_method = 1;
    else if (s->key_len == 6 && memcmp(s->key, "result", 6) == 0) s->which = K_RESULT, s->has_result = 1;
    else if (s->key_len == 5 && memcmp(s->key, "error", 5) == 0) s->which = K_ERROR, s->has_error = 1;
  }
  /* a key given twice: the last one counts, as JSON.parse would read it */
  if (s->which == K_ID) s->id_len = 0, s->id_over = 0;
  if (s->which == K_METHOD) s->method_len = 0, s->method_over = 0;
  if (c == '"') {
    s->st = S_VSTR;
    capture(s, c, 1);
  } else if (c == '{' || c == '[') {
    s->st = S_VNEST;
    s->depth = 1;
  } else if (is_scalar(c)) {
    s->st = S_VSCALAR;
    capture(s, c, 0);
  } else {
    s->st = S_BAD;
  }
}

static void nested(struct jscan *s, unsigned char c) {
  if (s->str) {
    if (s->esc) s->esc = 0;
    else if (c == '\\') s->esc = 1;
    else if (c == '"') s->str = 0;
    return;
  }
  if (c == '"') s->str = 1;
  else if (c == '{' || c == '[') s->depth++;
  else if ((c == '}' || c == ']') && --s->depth == 0) s->st = S_AFTER;
}

void jscan_byte(struct jscan *s, unsigned char c) {
  switch (s->st) {
    case S_START:
      if (c == '{') s->st = S_KEY_OR_END;
      else if (!is_ws(c) && !(s->pos < 3 && c >= 0x80)) s->st = S_BAD; /* a UTF-8 BOM may lead */
      break;
    case S_KEY_OR_END:
      if (c == '"') s->st = S_KEY, s->key_len = 0, s->key_over = 0, s->esc = 0;
      else if (c == '}') s->st = S_DONE;
      else if (!is_ws(c)) s->st = S_BAD;
      break;
    case S_KEY:
      if (s->esc) s->esc = 0, s->key_over = 1; /* an escaped key is never one we look for */
      else if (c == '\\') s->esc = 1;
      else if (c == '"') s->st = S_COLON;
      else if (s->key_len < sizeof s->key) s->key[s->key_len++] = (char)c;
      else s->key_over = 1;
      break;
    case S_COLON:
      if (c == ':') s->st = S_VSTART;
      else if (!is_ws(c)) s->st = S_BAD;
      break;
    case S_VSTART:
      if (!is_ws(c)) begin_value(s, c);
      break;
    case S_VSTR:
      if (s->esc) {
        s->esc = 0;
        capture(s, c, 0);
        if (s->which == K_METHOD) s->method_over = 1; /* an escaped method name is compared with nothing */
      } else if (c == '\\') {
        s->esc = 1;
        capture(s, c, 0);
      } else if (c == '"') {
        capture(s, c, 1);
        s->st = S_AFTER;
      } else {
        capture(s, c, 0);
      }
      break;
    case S_VNEST:
      nested(s, c);
      break;
    case S_VSCALAR:
      if (is_scalar(c)) {
        capture(s, c, 0);
        break;
      }
      s->st = S_AFTER;
      /* this byte is the one after the value */
      __attribute__((fallthrough));
    case S_AFTER:
      if (c == ',') s->st = S_KEY_OR_END;
      else if (c == '}') s->st = S_DONE;
      else if (!is_ws(c)) s->st = S_BAD;
      break;
    case S_DONE:
      if (!is_ws(c)) s->st = S_BAD;
      break;
    default:
      break;
  }
  s->pos++;
}

void jscan_bytes(struct jscan *s, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) jscan_byte(s, (unsigned char)p[i]);
}

enum jkind jscan_kind(const struct jscan *s) {
  if (s->st != S_DONE) return J_OTHER;
  if (s->has_method) return s->has_id ? J_REQ : J_NOTE;
  if (s->has_id && (s->has_result || s->has_error)) return J_RESP;
  return J_OTHER;
}

int jscan_method_is(const struct jscan *s, const char *m) {
  size_t n = strlen(m);
  return !s->method_over && s->method_len == n && memcmp(s->method, m, n) == 0;
}

int jscan_id_number(const struct jscan *s, unsigned long long *out) {
  size_t d = 0;
  while (d < s->id_len && s->id[d] >= '0' && s->id[d] <= '9') d++;
  if (s->id_over || d != s->id_len || d == 0 || d >= 16) return 0;
  *out = strtoull(s->id, NULL, 10);
  return 1;
}

void tail_keep(char *ring, size_t *len, size_t cap, const char *p, size_t n) {
  size_t k = n > cap ? cap : n, keep = cap - k < *len ? cap - k : *len;
  memmove(ring, ring + *len - keep, keep);
  memcpy(ring + keep, p + n - k, k);
  *len = keep + k;
}

/* ---------------------------------------------------------------- journal */

static int grow(void **p, size_t *alloc, size_t need, size_t unit) {
  if (need <= *alloc) return 1;
  size_t n = *alloc ? *alloc : 16;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * unit);
  if (q == NULL) return 0;
  *p = q;
  *alloc = n;
  return 1;
}

int journal_add(struct journal *j, const char *p, size_t n, int over_ok) {
  if (!j->open) {
    if (!grow((void **)&j->e, &j->ealloc, j->n + 1, sizeof *j->e)) return 0;
    j->e[j->n] = (struct jentry){.off = j->len, .len = 0, .held = 1};
    j->n++;
    j->open = 1;
  }
  struct jentry *e = &j->e[j->n - 1];
  if (!e->held) return 0;
  if ((!over_ok && j->len + n > j->bound) || !grow((void **)&j->buf, &j->alloc, j->len + n, 1)) {
    /* the line cannot be held whole: what was kept of it goes, the line is not replayable */
    j->len = e->off;
    e->len = 0;
    e->held = 0;
    return 0;
  }
  memcpy(j->buf + j->len, p, n);
  j->len += n;
  e->len += n;
  return 1;
}

void journal_end_line(struct journal *j, const struct jscan *s, int keep) {
  if (!j->open) return;
  j->open = 0;
  struct jentry *e = &j->e[j->n - 1];
  if (!keep || !e->held) {
    if (keep) j->gap = 1;
    j->len = e->off;
    j->n--;
    return;
  }
  e->kind = (unsigned char)jscan_kind(s);
  e->answered = 0;
  if (s->has_id && !s->id_over && s->id_len > 0 && s->id_pos + s->id_len <= e->len) {
    e->id_pos = s->id_pos;
    e->id_len = s->id_len;
  } else {
    e->id_len = 0;
  }
}

int journal_id_is(const struct journal *j, size_t i, const char *id, size_t id_len) {
  const struct jentry *e = &j->e[i];
  return e->id_len == id_len && id_len > 0 && memcmp(j->buf + e->off + e->id_pos, id, id_len) == 0;
}

void journal_answered(struct journal *j, const char *id, size_t id_len) {
  size_t last = j->open ? j->n - 1 : j->n;
  for (size_t i = 0; i < last; i++)
    if (j->e[i].kind == J_REQ && !j->e[i].answered && journal_id_is(j, i, id, id_len)) j->e[i].answered = 1;
}

void journal_compact(struct journal *j) {
  size_t w = 0, at = 0;
  for (size_t i = 0; i < j->n; i++) {
    struct jentry e = j->e[i];
    int open = j->open && i == j->n - 1;
    if (!open && !(e.kind == J_REQ && !e.answered)) continue;
    if (e.off != at) memmove(j->buf + at, j->buf + e.off, e.len);
    e.off = at;
    at += e.len;
    j->e[w++] = e;
  }
  j->n = w;
  j->len = at;
  j->gap = 0;
  /* an idle journal gives its memory back: only a turn may hold the bound */
  if (j->len == 0 && j->alloc > 65536) {
    free(j->buf);
    j->buf = NULL;
    j->alloc = 0;
  }
}
