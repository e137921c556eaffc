/* transcript.h - transcripts normalised to the 29-symbol alphabet. */
#ifndef DS_TRANSCRIPT_H
#define DS_TRANSCRIPT_H

#include "status.h"

typedef enum { DS_UNKNOWN_DROP_CHAR, DS_UNKNOWN_SKIP_UTTERANCE, DS_UNKNOWN_ERROR } ds_transcript_policy;

ds_status ds_transcript_policy_parse(const char *s, ds_transcript_policy *out);   /* drop-char|skip-utterance|error */
const char *ds_transcript_policy_name(ds_transcript_policy p);

/* Characters outside the alphabet seen so far. count[b] counts characters
 * by their first byte: an ASCII character under itself, a multibyte UTF-8
 * character once under its lead byte (so 'é' and 'è' both count under
 * 0xC3); a byte that starts no valid UTF-8 sequence counts alone. */
typedef struct {
    long count[256];
    long dropped_chars, skipped_utterances;
} ds_transcript_stats;

/* Normalises the NUL-terminated text in place: a-z to upper case, ASCII
 * whitespace (tab, newline, CR, ...) to space, runs of spaces collapsed,
 * leading/trailing spaces removed, the typographic apostrophe U+2019 (’) to
 * '. Every other character outside A-Z, ' and space (digits, punctuation,
 * '_', non-ASCII) is unknown: counted in st (may be NULL) and handled by
 * policy:
 *   drop-char       removed (no space left in its place; "A,B" -> "AB"),
 *                   st->dropped_chars += 1 per character;
 *   skip-utterance  DS_OK with *skip = 1, st->skipped_utterances += 1;
 *   error           DS_ERR_ARG at the first one, naming source (e.g.
 *                   "file:line", may be NULL) and the character; text is
 *                   then left partly normalised.
 * *skip is 0 otherwise. The result may be empty (e.g. "123" under drop-char). */
ds_status ds_transcript_normalize(char *text, ds_transcript_policy policy, const char *source,
                                  ds_transcript_stats *st, int *skip);
/* Prints the unknown characters with their counts ('c' when printable ASCII,
 * \xNN otherwise) and the totals of dropped characters and skipped
 * utterances to file (a FILE*, e.g. stderr). Prints nothing when no unknown
 * character was seen. */
void ds_transcript_stats_report(const ds_transcript_stats *st, void *file /* FILE* */);
void ds_transcript_stats_merge(ds_transcript_stats *into, const ds_transcript_stats *from);

#endif
