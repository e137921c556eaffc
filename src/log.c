/* log.c - the JSON metrics log and rank 0's console output; see log.h. */
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "file.h"

static int print_rank;
static int bar_shown;   /* a progress bar, without newline, is on the console's line */

void ds_log_set_print_rank(int rank) { print_rank = rank; }

void ds_log_print_bar(const char *text, int last)
{
    if (print_rank != 0)
        return;
    /* back to the line's start, the bar, then erase what a longer one left */
    printf("\r%s\033[K%s", text, last ? "\n" : "");
    fflush(stdout);
    bar_shown = !last;
}

void ds_log_print(const char *fmt, ...)
{
    if (print_rank != 0)
        return;
    if (bar_shown) {   /* the line goes where the bar was; the next step draws it again */
        fputs("\r\033[K", stdout);
        bar_shown = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

ds_status ds_log_open(ds_log *l, const char *path, int append)
{
    memset(l, 0, sizeof *l);
    if (!path || !*path)
        return DS_OK;
    snprintf(l->path, sizeof l->path, "%s", path);
    return ds_file_open_stream(path, append, "metrics log", &l->f);
}

/* The line just written reached the file, or the system's reason why not
 * (the flush's errno: a full disk, a file that takes no writes, ...). */
static ds_status flushed(ds_log *l)
{
    errno = 0;
    const int failed = fflush(l->f) != 0 || ferror(l->f);
    if (!failed)
        return DS_OK;
    const int err = errno ? errno : EIO;
    clearerr(l->f);
    return DS_FAIL(DS_ERR_IO, "%s: writing the metrics log failed: %s", l->path, strerror(err));
}

const char *ds_log_json_num(double v, char *buf)
{
    if (isfinite(v))
        snprintf(buf, 32, "%.10g", v);
    else
        snprintf(buf, 32, "null");
    return buf;
}

int ds_log_utf8_len(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80)
        return 1;
    const int n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
                : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;   /* a NUL ends the sequence early too */
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||   /* overlong, surrogate */
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))     /* overlong, > U+10FFFF */
        return 0;
    return n;
}

const char *ds_log_json_str(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 8 < cap;) {
        const int len = ds_log_utf8_len((const char *)p);
        if (*p == '"' || *p == '\\')
            n += (size_t)snprintf(buf + n, cap - n, "\\%c", *p);
        else if (*p < 0x20)   /* a control byte: JSON allows none raw */
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", *p);
        else if (!len)   /* not UTF-8 (a folder named in Latin-1): JSON's text must be */
            n += (size_t)snprintf(buf + n, cap - n, "\\ufffd");
        else if (len > 1) {   /* a whole character or none: a cut one is not UTF-8 */
            memcpy(buf + n, p, (size_t)len);
            n += (size_t)len;
            p += len;
            continue;
        } else
            buf[n++] = (char)*p;
        p++;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

double ds_log_printable(double v) { return isnan(v) ? NAN : v; }

static void put_num(FILE *f, const char *key, double v, int last)
{
    char num[32];
    fprintf(f, "\"%s\":%s%s", key, ds_log_json_num(v, num), last ? "" : ",");
}

ds_status ds_log_step(ds_log *l, const ds_step_metrics *m)
{
    if (!l->f)
        return DS_OK;
    fprintf(l->f, "{\"step\":%ld,\"epoch\":%d,", m->step, m->epoch);
    put_num(l->f, "loss", m->loss, 0);
    fprintf(l->f, "\"n_inf\":%d,", m->n_infinite);
    put_num(l->f, "lr", m->lr, 0);
    put_num(l->f, "grad_norm", m->grad_norm, 0);
    fprintf(l->f, "\"skipped\":%s,\"skipped_steps\":%ld,", m->skipped ? "true" : "false",
            m->skipped_steps);
    if (m->loss_scale > 0)
        put_num(l->f, "loss_scale", m->loss_scale, 0);
    if (m->cer >= 0)
        put_num(l->f, "cer", m->cer, 0);
    fprintf(l->f, "\"frames\":%d,\"batch\":%d,", m->frames, m->batch);
    put_num(l->f, "step_ms", m->step_ms, 0);
    if (m->ranks > 1) {
        fprintf(l->f, "\"ranks\":%d,\"buckets\":%d,\"buckets_early\":%d,", m->ranks, m->buckets,
                m->buckets_early);
        put_num(l->f, "step_ms_min", m->step_ms_min, 0);
        put_num(l->f, "step_ms_median", m->step_ms_median, 0);
        put_num(l->f, "step_ms_max", m->step_ms_max, 0);
        put_num(l->f, "backward_ms", m->backward_ms, 0);
        put_num(l->f, "reduce_ms", m->reduce_ms, 0);
        put_num(l->f, "reduce_hidden_ms", m->reduce_hidden_ms, 0);
        put_num(l->f, "reduce_wait_ms", m->reduce_wait_ms, 0);
        fprintf(l->f, "\"bn_sums\":%d,\"buckets_beside_bn_sums\":%d,", m->bn_sums,
                m->buckets_beside_bn_sums);
        put_num(l->f, "bn_sum_ms", m->bn_sum_ms, 0);
    }
    put_num(l->f, "samples_per_s", m->samples_per_s, 1);
    fputs("}\n", l->f);
    return flushed(l);
}

ds_status ds_log_raw(ds_log *l, const char *json)
{
    if (!l->f)
        return DS_OK;
    fprintf(l->f, "%s\n", json);
    return flushed(l);
}

void ds_log_close(ds_log *l)
{
    if (l->f)
        fclose(l->f);
    l->f = NULL;
}
