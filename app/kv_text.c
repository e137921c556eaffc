/* kv_text.c - key=value lines; see kv_text.h. */
#include "kv_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void ds_kv_put(ds_kv_text *t, const char *fmt, ...)
{
    if (t->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= t->cap - t->len) {
        t->full = 1;
        t->buf[t->len] = '\0';   /* no half line */
        return;
    }
    t->len += (size_t)n;
}

void ds_kv_put_str(ds_kv_text *t, const char *s)
{
    for (const char *p = s; *p && !t->full;) {
        const unsigned char c = (unsigned char)*p;
        const int len = ds_log_utf8_len(p);
        if (c == '\\')
            ds_kv_put(t, "\\\\");
        else if (c == '\n')
            ds_kv_put(t, "\\n");
        else if (c < 0x20 || c == 0x7f || !len)
            ds_kv_put(t, "\\x%02x", c);
        else {
            ds_kv_put(t, "%.*s", len, p);
            p += len;
            continue;
        }
        p++;
    }
}

const char *ds_kv_num(double v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, cap, "%.17g", v);
    return buf;
}

const char *ds_kv_find(const char *lines, const char *key, size_t klen, size_t *vlen)
{
    for (const char *p = lines; p && *p;) {
        const char *end = strchr(p, '\n');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > klen && p[klen] == '=' && !strncmp(p, key, klen)) {
            *vlen = n - klen - 1;
            return p + klen + 1;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

int ds_kv_value_of(const char *lines, const char *key, char *out, size_t cap)
{
    size_t n = 0;
    const char *v = ds_kv_find(lines, key, strlen(key), &n);
    if (!v || n >= cap)
        return 0;
    memcpy(out, v, n);
    out[n] = '\0';
    return 1;
}
