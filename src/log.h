/* log.h - the metrics log (one JSON object per line, flushed per line so a
 * crash loses nothing) and console output that only rank 0 prints. */
#ifndef DS_LOG_H
#define DS_LOG_H

#include <stdio.h>

#include "status.h"

typedef struct {
    long step;
    int epoch;
    double loss;
    int n_infinite;      /* utterances without an alignment, zeroed */
    double lr;
    double grad_norm;    /* before clipping */
    int skipped;         /* update skipped: non-finite gradients */
    long skipped_steps;  /* skipped so far */
    double loss_scale;   /* the step's loss scale; 0: no loss scaling (not logged) */
    double cer;          /* greedy CER of the batch, < 0: not computed */
    int frames;          /* padded input frames of the batch */
    int batch;           /* utterances in the step (all ranks) */
    double step_ms;
    double samples_per_s;       /* all ranks: global batch / slowest rank's step */
    /* data parallel (ranks > 1) */
    int ranks;
    double step_ms_min, step_ms_median, step_ms_max;   /* over ranks */
    int buckets, buckets_early;   /* reductions, and those started before backward ended */
    double backward_ms, reduce_ms, reduce_hidden_ms, reduce_wait_ms;
    /* BatchNorm's sums during backward (NCCL: on their own stream), their
     * device time, and the buckets reduced beside them: the overlap */
    int bn_sums, buckets_beside_bn_sums;
    double bn_sum_ms;
} ds_step_metrics;

typedef struct {
    FILE *f;
    char path[512];
} ds_log;

/* path NULL or "": no file. append: a resumed run adds to its log. */
ds_status ds_log_open(ds_log *l, const char *path, int append);
ds_status ds_log_step(ds_log *l, const ds_step_metrics *m);
/* Writes a free-form JSON object (the caller formats it, without newline). */
ds_status ds_log_raw(ds_log *l, const char *json);
/* v as a JSON value into buf [32]: "%.10g", or null for inf and NaN (JSON
 * has neither). Returns buf. */
const char *ds_log_json_num(double v, char *buf);
/* s as a JSON string, quoted and escaped, into buf [cap >= 10]; cut short
 * (still a valid string) where it does not fit. Returns buf. */
const char *ds_log_json_str(const char *s, char *buf, size_t cap);
/* The length (1-4) of the valid UTF-8 character at s, or 0 when the byte
 * there starts none (a stray byte, an overlong form, a surrogate, a cut
 * sequence): a file name's bytes, which JSON text cannot hold raw. Such a
 * byte is written as U+FFFD (JSON) or \xHH (the run's options). */
int ds_log_utf8_len(const char *s);
/* v for printf: a NaN made positive, so a NaN loss prints "nan", never
 * glibc's "-nan". */
double ds_log_printable(double v);
void ds_log_close(ds_log *l);

/* Console printing from rank 0 only (the rank is set by the MPI layer). */
void ds_log_set_print_rank(int rank);
void ds_log_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A one-line bar drawn over the last one (a terminal's carriage return);
 * the next ds_log_print replaces it, unless last (the final bar): that one ends
 * its line and stays. */
void ds_log_print_bar(const char *text, int last);

#endif
