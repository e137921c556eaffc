/* kv_text.h - "key=value" lines as the run's records write them (a
 * checkpoint's run configuration, the ranks' agreement): a bounded output
 * buffer, the one escaping of values, numbers that read back exactly, and
 * the lookup of a key's line. */
#ifndef DS_KV_TEXT_H
#define DS_KV_TEXT_H

#include <stddef.h>

/* An output buffer that remembers running out of room (never half a line:
 * what did not fit is not written, and nothing after it). */
typedef struct {
    char *buf;
    size_t cap, len;
    int full;
} ds_kv_text;

void ds_kv_put(ds_kv_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s as one line's value: a backslash, a newline, another control character
 * and a byte that is not UTF-8 written as \\, \n, \xHH, so that every value
 * stays on its line (a newline in a --train path would write a line of its
 * own, which could forge another key) and reads one way. Checkpoints store
 * these lines and a resume compares them: the escaping must not change. */
void ds_kv_put_str(ds_kv_text *t, const char *s);

/* v into buf [cap] as the shortest of %.15g and %.17g that reads back as v:
 * 3e-4 stays "0.0003" and still compares exactly. Returns buf. */
const char *ds_kv_num(double v, char *buf, size_t cap);

/* The value of key [klen] in lines: the rest of the line that starts with
 * "key=" (a key matches at a line's start only, never inside a value), its
 * length in *vlen; NULL when no line has that key. */
const char *ds_kv_find(const char *lines, const char *key, size_t klen, size_t *vlen);

/* key's value copied into out [cap]: 1, or 0 when absent or longer than
 * out holds. */
int ds_kv_value_of(const char *lines, const char *key, char *out, size_t cap);

#endif
