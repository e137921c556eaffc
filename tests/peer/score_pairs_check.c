/* score_pairs_check.c - the C side of the wer_cer_reference test
 * (tests/peer/wer_cer_check.py).
 *
 * Reads reference/hypothesis pairs from stdin, one a line as REF<TAB>HYP
 * (either may be empty; a line without a tab is an error), scores each with
 * ds_decode_word_edits and ds_decode_char_edits and prints one line a pair:
 *
 *   pair WORD_EDITS REF_WORDS CHAR_EDITS REF_CHARS
 *
 * then, summed over the pairs into a ds_score as the trainer does,
 *
 *   total WORD_EDITS WORDS CHAR_EDITS CHARS WER CER
 *
 * with WER and CER from ds_score_wer / ds_score_cer printed with %.17g, so
 * they read back as the exact doubles. Exits 1 on a malformed line or when
 * an edit distance fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "score.h"

int main(void)
{
    ds_score acc = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) {
            fprintf(stderr, "score_pairs_check: line %ld has no tab\n", lineno);
            free(line);
            return 1;
        }
        *tab = '\0';
        const char *ref = line, *hyp = tab + 1;
        int words = -1, chars = -1;
        int we = ds_decode_word_edits(ref, hyp, &words);
        int ce = ds_decode_char_edits(ref, hyp, &chars);
        if (we < 0 || ce < 0) {
            fprintf(stderr, "score_pairs_check: line %ld: edit distance failed\n", lineno);
            free(line);
            return 1;
        }
        printf("pair %d %d %d %d\n", we, words, ce, chars);
        acc.word_edits += we;
        acc.words += words;
        acc.char_edits += ce;
        acc.chars += chars;
        acc.utterances++;
    }
    free(line);
    printf("total %ld %ld %ld %ld %.17g %.17g\n", acc.word_edits, acc.words, acc.char_edits,
           acc.chars, ds_score_wer(&acc), ds_score_cer(&acc));
    return 0;
}
