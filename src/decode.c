/* decode.c - greedy CTC decoding and the edit distances of WER and CER; see
 * decode.h. */
#include "decode.h"

#include <stdlib.h>
#include <string.h>

/* One frame of best-path decoding: a label is emitted when it starts a run;
 * a blank between two equal labels ends the run, so "A_A" gives two A's. */
static int emit(int best, int blank, int *prev, int *out, int n)
{
    if (best != blank && best != *prev)
        out[n++] = best;
    *prev = best;
    return n;
}

int ds_decode_greedy(const double *scores, int t, long stride, int c, int blank, int *out)
{
    int n = 0, prev = -1;
    for (int s = 0; s < t; s++) {
        const double *row = scores + s * stride;
        int best = 0;
        for (int k = 1; k < c; k++)
            if (row[k] > row[best])
                best = k;
        n = emit(best, blank, &prev, out, n);
    }
    return n;
}

int ds_decode_collapse(const int *best, int t, long stride, int blank, int *out)
{
    int n = 0, prev = -1;
    for (int s = 0; s < t; s++)
        n = emit(best[s * stride], blank, &prev, out, n);
    return n;
}

/* A token is a slice of a string: a word, or a single character. */
typedef struct {
    const char *p;
    int len;
} tok;

static int tok_eq(tok a, tok b) { return a.len == b.len && memcmp(a.p, b.p, (size_t)a.len) == 0; }

/* Splits s into words (by_word) or non-space characters; out [strlen(s)]. */
static int tokenize(const char *s, int by_word, tok *out)
{
    int n = 0;
    for (const char *p = s; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        const char *q = p + 1;
        if (by_word)
            while (*q && *q != ' ')
                q++;
        out[n].p = p;
        out[n].len = (int)(q - p);
        n++;
        p = q;
    }
    return n;
}

/* Edit distance (unit cost insert, delete, substitute) of a [na] to b [nb],
 * keeping one row of the table plus the diagonal. */
static int levenshtein(const tok *a, int na, const tok *b, int nb, int *row)
{
    for (int j = 0; j <= nb; j++)
        row[j] = j;
    for (int i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int sub = diag + !tok_eq(a[i - 1], b[j - 1]);
            int del = row[j] + 1, ins = row[j - 1] + 1;
            diag = row[j];
            int m = sub < del ? sub : del;
            row[j] = m < ins ? m : ins;
        }
    }
    return row[nb];
}

/* Transcripts up to this many characters are scored on the stack: scoring
 * during training allocates nothing (LibriSpeech's longest is ~ 520). */
enum { STACK_CHARS = 1024 };

static int edits(const char *ref, const char *hyp, int by_word, int *ref_count)
{
    size_t lr = strlen(ref), lh = strlen(hyp);
    tok a_stack[STACK_CHARS + 1], b_stack[STACK_CHARS + 1];
    int row_stack[STACK_CHARS + 1];
    const int heap_a = lr > STACK_CHARS, heap_b = lh > STACK_CHARS;
    tok *a = heap_a ? malloc((lr + 1) * sizeof *a) : a_stack;
    tok *b = heap_b ? malloc((lh + 1) * sizeof *b) : b_stack;
    int *row = heap_b ? malloc((lh + 1) * sizeof *row) : row_stack;
    int d = -1;
    if (a && b && row) {
        int na = tokenize(ref, by_word, a), nb = tokenize(hyp, by_word, b);
        if (ref_count)
            *ref_count = na;
        d = levenshtein(a, na, b, nb, row);
    }
    if (heap_a)
        free(a);
    if (heap_b) {
        free(b);
        free(row);
    }
    return d;
}

int ds_decode_word_edits(const char *ref, const char *hyp, int *ref_words)
{
    return edits(ref, hyp, 1, ref_words);
}

int ds_decode_char_edits(const char *ref, const char *hyp, int *ref_chars)
{
    return edits(ref, hyp, 0, ref_chars);
}
