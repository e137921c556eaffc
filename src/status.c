/* status.c - the recorded error message behind ds_status. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024];

/* The longest run of characters without a space in s, [*at, *at + *len). */
static void longest_word(const char *s, size_t *at, size_t *len)
{
    *at = *len = 0;
    for (size_t i = 0; s[i];) {
        const size_t n = strcspn(s + i, " ");
        if (n > *len) {
            *at = i;
            *len = n;
        }
        i += n + (s[i + n] == ' ');
    }
}

/* msg (a whole message, shortened in place) into last_error. A message over the
 * buffer has its longest words (paths, 4000 characters at most) shortened
 * in the middle, "/a/b/.../y/z", until it fits, so that the reason, before
 * or after a path, is never cut off. */
static void keep_fitting(char *msg)
{
    const char *const dots = "...";
    for (size_t len = strlen(msg); len >= sizeof last_error;) {
        size_t at, n;
        longest_word(msg, &at, &n);
        const size_t over = len - (sizeof last_error - 1), keep = n > 40 ? 40 : n;
        if (n <= keep + 3)
            break;   /* nothing long left: cut at the end as before */
        /* cut what is over (and the dots' room) from the word's middle, keeping 20 + 20 */
        size_t cut = over + 3 > n - keep ? n - keep : over + 3;
        const size_t from = at + (n - cut) / 2;
        memcpy(msg + from, dots, 3);
        memmove(msg + from + 3, msg + from + cut, len - from - cut + 1);
        len = len - cut + 3;
    }
    snprintf(last_error, sizeof last_error, "%s", msg);
}

ds_status ds_status_fail(ds_status code, const char *file, int line, const char *fmt, ...)
{
    if (last_error[0] == '\0') {   /* keep the innermost (first) failure */
        int n = snprintf(last_error, sizeof last_error, "%s:%d: ", file, line);
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        int m = -1;
        if (n > 0 && (size_t)n < sizeof last_error)
            m = vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
        va_end(ap);
        char *whole = m >= 0 && (size_t)(n + m) >= sizeof last_error ? malloc((size_t)(n + m) + 1)
                                                                      : NULL;
        if (whole) {   /* it was cut: formatted whole, then its paths shortened */
            memcpy(whole, last_error, (size_t)n);
            vsnprintf(whole + n, (size_t)m + 1, fmt, again);
            keep_fitting(whole);
            free(whole);
        }
        va_end(again);
    }
    return code;
}

const char *ds_status_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

void ds_status_clear_error(void) { last_error[0] = '\0'; }

const char *ds_status_name(ds_status s)
{
    switch (s) {
    case DS_OK: return "ok";
    case DS_ERR_ARG: return "invalid argument";
    case DS_ERR_IO: return "i/o error";
    case DS_ERR_MEM: return "out of memory";
    case DS_ERR_NUM: return "numerical error";
    case DS_ERR_BACKEND: return "backend error";
    case DS_ERR_MPI: return "communication error";
    case DS_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}
