/* transcript.c - transcripts normalised to the 29-symbol alphabet; see
 * transcript.h. */
#include "transcript.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alphabet.h"

static const char *const policy_names[] = {"drop-char", "skip-utterance", "error"};

const char *ds_transcript_policy_name(ds_transcript_policy p)
{
    return (unsigned)p < sizeof policy_names / sizeof policy_names[0] ? policy_names[p] : "unknown";
}

ds_status ds_transcript_policy_parse(const char *s, ds_transcript_policy *out)
{
    for (int i = 0; s && i < (int)(sizeof policy_names / sizeof policy_names[0]); i++) {
        if (strcmp(s, policy_names[i]) == 0) {
            *out = (ds_transcript_policy)i;
            return DS_OK;
        }
    }
    return DS_FAIL(DS_ERR_ARG,
                   "unknown-character policy '%s': use drop-char, skip-utterance or error",
                   s ? s : "(null)");
}

/* Length in bytes of the character starting at s (1..4) and its code point:
 * a well-formed UTF-8 sequence as a whole, any other byte alone (its value
 * as the code point). Overlong forms and surrogates count as well-formed:
 * they are unknown characters either way. */
static int next_char(const unsigned char *s, uint32_t *cp)
{
    int len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 1;
    if (s[0] >= 0xF5)
        len = 1;
    uint32_t v = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {   /* also stops at the NUL */
            *cp = s[0];
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

/* How an error message shows the character s [len] with code point cp. */
static void describe_char(const unsigned char *s, int len, uint32_t cp, char *buf, size_t cap)
{
    if (len > 1)
        snprintf(buf, cap, "'%.*s' (U+%04X)", len, (const char *)s, (unsigned)cp);
    else if (s[0] >= 0x20 && s[0] < 0x7F)
        snprintf(buf, cap, "'%c'", s[0]);
    else
        snprintf(buf, cap, "\\x%02X", s[0]);
}

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The symbol the character maps to: upper-case letter, apostrophe or space;
 * 0 for unknown characters. */
static char symbol_of(const unsigned char *s, int len, uint32_t cp)
{
    if (len == 1 && is_space(s[0]))
        return ' ';
    if (cp == 0x2019)   /* right single quotation mark, the typographic apostrophe */
        return '\'';
    int id = len == 1 ? ds_alphabet_index((char)s[0]) : -1;
    return id > DS_BLANK ? ds_alphabet[id] : 0;
}

ds_status ds_transcript_normalize(char *text, ds_transcript_policy policy, const char *source,
                                  ds_transcript_stats *st, int *skip)
{
    ds_transcript_stats local;
    if (!st) {
        memset(&local, 0, sizeof local);
        st = &local;
    }
    *skip = 0;
    unsigned char *s = (unsigned char *)text;
    size_t r = 0, w = 0;   /* read and write positions: w <= r throughout */
    int unknown = 0;
    while (s[r]) {
        uint32_t cp;
        int len = next_char(s + r, &cp);
        char sym = symbol_of(s + r, len, cp);
        if (sym == ' ') {
            if (w > 0 && s[w - 1] != ' ')
                s[w++] = ' ';
        } else if (sym) {
            s[w++] = (unsigned char)sym;
        } else {
            st->count[s[r]]++;
            unknown++;
            if (policy == DS_UNKNOWN_ERROR) {
                char what[32];
                describe_char(s + r, len, cp, what, sizeof what);
                return DS_FAIL(DS_ERR_ARG,
                               "%s: character %s at byte %zu is not in the alphabet (A-Z, ', "
                               "space); use the drop-char or skip-utterance policy to go on",
                               source ? source : "transcript", what, r);
            }
            if (policy == DS_UNKNOWN_DROP_CHAR)
                st->dropped_chars++;
        }
        r += (size_t)len;
    }
    if (w > 0 && s[w - 1] == ' ')
        w--;
    s[w] = '\0';
    if (unknown && policy == DS_UNKNOWN_SKIP_UTTERANCE) {
        st->skipped_utterances++;
        *skip = 1;
    }
    return DS_OK;
}

void ds_transcript_stats_report(const ds_transcript_stats *st, void *file)
{
    FILE *f = file;
    long total = 0;
    for (int b = 0; b < 256; b++)
        total += st->count[b];
    if (total == 0 && st->dropped_chars == 0 && st->skipped_utterances == 0)
        return;
    fprintf(f, "characters outside the alphabet (%ld):\n", total);
    for (int b = 0; b < 256; b++) {
        if (!st->count[b])
            continue;
        if (b >= 0x20 && b < 0x7F)
            fprintf(f, "  '%c'  %ld\n", b, st->count[b]);
        else if (b >= 0xC2 && b <= 0xF4)
            fprintf(f, "  \\x%02X  %ld (UTF-8 characters starting with this byte)\n", b,
                    st->count[b]);
        else
            fprintf(f, "  \\x%02X  %ld\n", b, st->count[b]);
    }
    fprintf(f, "dropped %ld characters, skipped %ld utterances\n", st->dropped_chars,
            st->skipped_utterances);
}

void ds_transcript_stats_merge(ds_transcript_stats *into, const ds_transcript_stats *from)
{
    for (int b = 0; b < 256; b++)
        into->count[b] += from->count[b];
    into->dropped_chars += from->dropped_chars;
    into->skipped_utterances += from->skipped_utterances;
}
