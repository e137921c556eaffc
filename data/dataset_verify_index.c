/* dataset_verify_index.c - step 4 of ds_dataset_verify: the index, /labels,
 * the transcripts and /stats against each other. The loader has already
 * checked each utterance alone (inside /features and /labels, lengths >= 1,
 * its labels in the alphabet); what it cannot see from one utterance is
 * checked here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphabet.h"
#include "dataset_impl.h"
#include "dataset_verify_impl.h"
#include "h5_io.h"

#define SHOW 60   /* characters of a transcript shown in a message */

static int by_start(const void *a, const void *b)
{
    const ds_dataset_verify_span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->utt < y->utt ? -1 : x->utt > y->utt;
}

/* Sorts spans [n] and fails at the first two that share a row or entry of
 * target; *unused gets what lies in no span. what: "rows", "entries". */
static ds_status check_disjoint(const ds_dataset_verify_ctx *c, ds_dataset_verify_span *s, const char *field,
                                const char *target, const char *what, long long total,
                                long long *unused)
{
    const ds_dataset *d = c->d;
    const long n = d->n;
    qsort(s, (size_t)n, sizeof *s, by_start);
    long long covered = 0;
    for (long k = 0; k < n; k++) {
        if (k > 0 && s[k].start < s[k - 1].start + s[k - 1].len) {
            const ds_dataset_verify_span *a = &s[k - 1], *b = &s[k];
            return DS_FAIL(DS_ERR_IO, "%s: dataset /%s: utterance %ld (id %s) %s [%lld, %lld) "
                           "overlap utterance %ld (id %s) %s [%lld, %lld) of /%s", c->path, field,
                           b->utt, d->ids[b->utt], what, (long long)b->start,
                           (long long)(b->start + b->len), a->utt, d->ids[a->utt], what,
                           (long long)a->start, (long long)(a->start + a->len), target);
        }
        covered += s[k].len;
    }
    *unused = total - covered;
    return DS_OK;
}

/* Whether the utterances lie one after another, in index order, from row 0
 * and entry 0 (as dstrain writes them): back to back, or each at the next
 * multiple of DS_DATASET_ALIGN_ROWS (dataset.h: chunk layout). *padding gets
 * the rows between them then, which belong to no utterance by design. */
static int stored_in_order(const ds_dataset *d, long long *padding)
{
    int64_t fo = 0, lo = 0;
    *padding = 0;
    for (long i = 0; i < d->n; i++) {
        const int64_t aligned = (fo + DS_DATASET_ALIGN_ROWS - 1) / DS_DATASET_ALIGN_ROWS
                                * DS_DATASET_ALIGN_ROWS;
        if ((d->frame_offset[i] != fo && d->frame_offset[i] != aligned) || d->label_offset[i] != lo) {
            *padding = 0;
            return 0;
        }
        *padding += d->frame_offset[i] - fo;
        fo = d->frame_offset[i] + d->frames[i];
        lo += d->label_length[i];
    }
    return 1;
}

static ds_status check_spans(ds_dataset_verify_ctx *c)
{
    const ds_dataset *d = c->d;
    const size_t n = (size_t)d->n;
    ds_dataset_verify_span *labels = malloc(n * sizeof *labels);
    c->frames = malloc(n * sizeof *c->frames);
    if (!labels || !c->frames) {
        free(labels);
        return DS_FAIL(DS_ERR_MEM, "%s: index of %zu utterances", c->path, n);
    }
    for (long i = 0; i < d->n; i++) {
        c->frames[i] = (ds_dataset_verify_span){d->frame_offset[i], d->frames[i], i};
        labels[i] = (ds_dataset_verify_span){d->label_offset[i], d->label_length[i], i};
    }
    ds_status st = check_disjoint(c, c->frames, "utterances/frame_offset", "features", "rows",
                                  d->total_frames, &c->sum->unused_frames);
    if (st == DS_OK)
        st = check_disjoint(c, labels, "utterances/label_offset", "labels", "entries",
                            d->total_labels, &c->sum->unused_labels);
    free(labels);
    long long padding;
    c->sum->in_order = stored_in_order(d, &padding);
    c->sum->unused_frames -= padding;   /* alignment, not rows lost */
    return st;
}

/* Labels [n] as text into out [SHOW + 4], "..." when cut. */
static void spell(const uint8_t *labels, int32_t n, char *out)
{
    int32_t k = 0;
    for (; k < n && k < SHOW; k++)
        out[k] = labels[k] < DS_ALPHABET_SIZE ? ds_alphabet[labels[k]] : '?';
    strcpy(out + k, k < n ? "..." : "");
}

/* Every entry of /labels (those of no utterance too) is an alphabet symbol
 * other than the blank; each utterance has an id, and a transcript that
 * spells exactly its labels (the strings carry no checksum: this is what
 * finds them damaged). */
static ds_status check_text(const ds_dataset_verify_ctx *c)
{
    const ds_dataset *d = c->d;
    for (long k = 0; k < d->total_labels; k++)
        if (d->labels[k] < 1 || d->labels[k] >= DS_ALPHABET_SIZE)
            return DS_FAIL(DS_ERR_IO, "%s: dataset /labels: entry %ld is %d, outside the alphabet "
                           "1..%d", c->path, k, d->labels[k], DS_ALPHABET_SIZE - 1);
    for (long i = 0; i < d->n; i++) {
        if (!d->ids[i][0])
            return DS_FAIL(DS_ERR_IO, "%s: dataset /utterances/id: utterance %ld has an empty id",
                           c->path, i);
        const char *t = d->transcripts[i];
        const uint8_t *l = d->labels + d->label_offset[i];
        const int32_t nl = d->label_length[i];
        int32_t k = 0;
        while (k < nl && t[k] && t[k] == ds_alphabet[l[k]])
            k++;
        if (k < nl || t[k]) {
            char spelt[SHOW + 4];
            spell(l, nl, spelt);
            return DS_FAIL(DS_ERR_IO, "%s: dataset /utterances/transcript: utterance %ld (id %s) "
                           "reads \"%.*s%s\" but its /labels entries [%lld, %lld) spell \"%s\" "
                           "(they differ at character %d)", c->path, i, d->ids[i], SHOW, t,
                           strlen(t) > SHOW ? "..." : "", (long long)d->label_offset[i],
                           (long long)(d->label_offset[i] + nl), spelt, k);
        }
    }
    return DS_OK;
}

/* /stats/count, sum and sumsq (needed by merge only, so checked when
 * present): count is the utterances' frames, sum and sumsq are finite and
 * give /stats/mean. */
static ds_status check_sums(const ds_dataset_verify_ctx *c)
{
    const ds_dataset *d = c->d;
    const hid_t f = ds_dataset_file(d);
    if (!ds_h5_exists(f, "stats/count"))
        return DS_OK;
    int64_t count, frames = 0;
    DS_TRY(ds_h5_read(f, "stats/count", DS_I64, 1, &count));
    for (long i = 0; i < d->n; i++)
        frames += d->frames[i];
    if (count != frames)
        return DS_FAIL(DS_ERR_IO, "%s: dataset /stats/count: %lld frames, but the utterances hold "
                       "%lld (the sum of /utterances/frames): one of them was changed", c->path,
                       (long long)count, (long long)frames);
    if (!ds_h5_exists(f, "stats/sum") || !ds_h5_exists(f, "stats/sumsq"))
        return DS_FAIL(DS_ERR_IO, "%s: dataset /stats/%s is missing (/stats/count is present)",
                       c->path, ds_h5_exists(f, "stats/sum") ? "sumsq" : "sum");
    const size_t nf = (size_t)d->n_features;
    double *s = malloc(2 * nf * sizeof *s);
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "%s: stats of %zu features", c->path, nf);
    ds_status st = ds_h5_read(f, "stats/sum", DS_F64, nf, s);
    if (st == DS_OK)
        st = ds_h5_read(f, "stats/sumsq", DS_F64, nf, s + nf);
    for (size_t j = 0; j < nf && st == DS_OK; j++) {
        const double mean = s[j] / (double)count;
        if (!isfinite(s[j]) || !isfinite(s[nf + j]) || s[nf + j] < 0)
            st = DS_FAIL(DS_ERR_IO, "%s: dataset /stats/sum: feature %zu has sum %g, sum of "
                         "squares %g", c->path, j, s[j], s[nf + j]);
        else if (fabs(mean - d->mean[j]) > 1e-5 * (1 + fabs(mean)))
            st = DS_FAIL(DS_ERR_IO, "%s: dataset /stats/mean: feature %zu is %g, but /stats/sum "
                         "over /stats/count gives %g", c->path, j, d->mean[j], mean);
    }
    free(s);
    return st;
}

static int by_id_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two utterances share an id (a prep refuses them; a file written
 * otherwise may hold them). */
static ds_status check_unique_ids(const ds_dataset_verify_ctx *c)
{
    const ds_dataset *d = c->d;
    const char **ids = malloc((size_t)d->n * sizeof *ids);
    if (!ids)
        return DS_FAIL(DS_ERR_MEM, "%s: %ld ids to sort", c->path, d->n);
    for (long i = 0; i < d->n; i++)
        ids[i] = d->ids[i];
    qsort(ids, (size_t)d->n, sizeof *ids, by_id_ptr);
    ds_status st = DS_OK;
    for (long i = 1; i < d->n && st == DS_OK; i++)
        if (!strcmp(ids[i], ids[i - 1]))
            st = DS_FAIL(DS_ERR_IO, "%s: dataset /utterances/id: id %s is given to more than one "
                         "utterance", c->path, ids[i]);
    free(ids);
    return st;
}

ds_status ds_dataset_verify_index(ds_dataset_verify_ctx *c)
{
    const ds_dataset *d = c->d;
    if (d->n < 1)
        return DS_FAIL(DS_ERR_IO, "%s: dataset /utterances/frame_offset: no utterances", c->path);
    DS_TRY(check_spans(c));
    DS_TRY(check_text(c));
    DS_TRY(check_unique_ids(c));
    for (int j = 0; j < d->n_features; j++)
        c->sum->constant_features += d->std[j] == 0;
    return check_sums(c);
}

ds_status ds_dataset_check_index(ds_dataset *d)
{
    if (d->n < 1)   /* an empty file opens (nothing to train on is the caller's to say) */
        return DS_OK;
    ds_dataset_verify_summary sum;
    memset(&sum, 0, sizeof sum);
    ds_dataset_verify_ctx c = {.path = d->path, .d = d, .sum = &sum};
    /* what training's reads rest on; the transcripts (shown, not trained
     * on) and the ids are verify's alone */
    ds_status st = check_spans(&c);
    if (st == DS_OK)
        st = check_sums(&c);
    free(c.frames);
    return st;
}
