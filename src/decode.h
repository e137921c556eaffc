/* decode.h - greedy CTC decoding and the edit distances behind WER and CER.
 *
 * Error rates follow deepspeech.pytorch: over a corpus,
 *   WER = sum of word edits / sum of reference words,
 *   CER = sum of character edits / sum of reference characters,
 * where words are the runs of non-space characters and characters are
 * compared with every space removed. Sum the counts below over utterances
 * and divide once at the end (not a mean of per-utterance rates). */
#ifndef DS_DECODE_H
#define DS_DECODE_H

/* Best path: argmax of each frame of scores [t][stride] (frame s at
 * scores + s*stride, its first c entries the class scores; ties go to the
 * lower index), repeats collapsed, then blanks dropped. Writes out [t] and
 * returns the number of labels written. */
int ds_decode_greedy(const double *scores, int t, long stride, int c, int blank, int *out);

/* The same from the best classes already chosen: best [t][stride] (frame s
 * at best + s*stride), repeats collapsed, blanks dropped, into out [t].
 * Returns the number of labels written. */
int ds_decode_collapse(const int *best, int t, long stride, int blank, int *out);

/* Levenshtein distance between the words of ref and hyp (split on spaces);
 * *ref_words (if not NULL) gets the number of words of ref. Returns -1 when
 * memory runs out. */
int ds_decode_word_edits(const char *ref, const char *hyp, int *ref_words);

/* Levenshtein distance between the characters of ref and hyp with spaces
 * removed; *ref_chars (if not NULL) gets the number of non-space characters
 * of ref. Returns -1 when memory runs out. */
int ds_decode_char_edits(const char *ref, const char *hyp, int *ref_chars);

#endif
