/* test_transcript.c - transcript normalisation and the three policies for
 * characters outside the alphabet, the statistics and their report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transcript.h"
#include "testutil.h"

/* Normalises in under drop-char and expects want, with dropped characters
 * counted. */
static void expect_norm(const char *in, const char *want, long dropped)
{
    char buf[256];
    ds_transcript_stats st;
    memset(&st, 0, sizeof st);
    int skip = -1;
    snprintf(buf, sizeof buf, "%s", in);
    ds_status s = ds_transcript_normalize(buf, DS_UNKNOWN_DROP_CHAR, "t", &st, &skip);
    T_CHECK(s == DS_OK && skip == 0, "'%s': %s", in, ds_status_last_error());
    T_CHECK(strcmp(buf, want) == 0, "'%s' -> '%s', want '%s'", in, buf, want);
    T_CHECK(st.dropped_chars == dropped && st.skipped_utterances == 0,
            "'%s': dropped %ld, want %ld", in, st.dropped_chars, dropped);
}

static void test_normalize(void)
{
    expect_norm("hello world", "HELLO WORLD", 0);
    expect_norm("HELLO WORLD", "HELLO WORLD", 0);
    expect_norm("  leading and trailing   ", "LEADING AND TRAILING", 0);
    expect_norm("tabs\tand\nnewlines\r\n here", "TABS AND NEWLINES HERE", 0);
    expect_norm("many     spaces", "MANY SPACES", 0);
    expect_norm("don't stop", "DON'T STOP", 0);
    expect_norm("it\xE2\x80\x99s", "IT'S", 0);   /* typographic apostrophe */
    expect_norm("hello, world!", "HELLO WORLD", 2);
    expect_norm("a - b", "A B", 1);   /* the spaces around a dropped dash collapse */
    expect_norm("rock-and-roll", "ROCKANDROLL", 2);
    expect_norm("room 101", "ROOM", 3);
    expect_norm("caf\xC3\xA9 au lait", "CAF AU LAIT", 1);   /* "café": one character */
    expect_norm("na\xC3\xAFve \xE2\x82\xAC 5", "NAVE", 3);   /* 'ï', '€' and '5' */
    expect_norm("snake_case", "SNAKECASE", 1);   /* the blank is not a transcript symbol */
    expect_norm("bad \xFF byte \xC3", "BAD BYTE", 2);   /* invalid UTF-8: byte by byte */
    expect_norm("", "", 0);
    expect_norm(" \t\n ", "", 0);
    expect_norm("123", "", 3);
}

/* Counts under each policy for the same text. */
static void test_policies(void)
{
    const char *text = "It's 5 o'clock, caf\xC3\xA9!";
    char buf[64];
    ds_transcript_stats st;
    int skip;

    memset(&st, 0, sizeof st);
    snprintf(buf, sizeof buf, "%s", text);
    T_CHECK(ds_transcript_normalize(buf, DS_UNKNOWN_DROP_CHAR, "a.txt:1", &st, &skip) == DS_OK &&
                !skip && strcmp(buf, "IT'S O'CLOCK CAF") == 0, "drop-char: '%s'", buf);
    T_CHECK(st.count['5'] == 1 && st.count[','] == 1 && st.count['!'] == 1 &&
                st.count[0xC3] == 1 && st.count[0xA9] == 0 && st.dropped_chars == 4 &&
                st.skipped_utterances == 0, "drop-char counts: dropped %ld", st.dropped_chars);

    memset(&st, 0, sizeof st);
    snprintf(buf, sizeof buf, "%s", text);
    skip = 0;
    T_CHECK(ds_transcript_normalize(buf, DS_UNKNOWN_SKIP_UTTERANCE, "a.txt:2", &st, &skip) ==
                    DS_OK && skip == 1, "skip-utterance: skip %d", skip);
    T_CHECK(st.count['5'] == 1 && st.count[0xC3] == 1 && st.dropped_chars == 0 &&
                st.skipped_utterances == 1, "skip-utterance counts: skipped %ld",
            st.skipped_utterances);
    snprintf(buf, sizeof buf, "all fine here");
    T_CHECK(ds_transcript_normalize(buf, DS_UNKNOWN_SKIP_UTTERANCE, "a.txt:3", &st, &skip) ==
                    DS_OK && skip == 0 && st.skipped_utterances == 1, "clean text skipped");

    snprintf(buf, sizeof buf, "%s", text);
    ds_status_clear_error();
    ds_status s = ds_transcript_normalize(buf, DS_UNKNOWN_ERROR, "train.csv:17", NULL, &skip);
    const char *msg = ds_status_last_error();
    T_CHECK(s == DS_ERR_ARG && strstr(msg, "train.csv:17") && strstr(msg, "'5'"),
            "error names source and character: %s", msg);
    snprintf(buf, sizeof buf, "caf\xC3\xA9");
    ds_status_clear_error();
    s = ds_transcript_normalize(buf, DS_UNKNOWN_ERROR, NULL, NULL, &skip);
    msg = ds_status_last_error();
    T_CHECK(s == DS_ERR_ARG && strstr(msg, "\xC3\xA9") && strstr(msg, "U+00E9"),
            "error shows the UTF-8 character: %s", msg);
    snprintf(buf, sizeof buf, "tab\x01");
    ds_status_clear_error();
    s = ds_transcript_normalize(buf, DS_UNKNOWN_ERROR, "x", NULL, &skip);
    T_CHECK(s == DS_ERR_ARG && strstr(ds_status_last_error(), "\\x01"), "control byte: %s",
            ds_status_last_error());
    snprintf(buf, sizeof buf, "Clean text");
    T_CHECK(ds_transcript_normalize(buf, DS_UNKNOWN_ERROR, "x", NULL, &skip) == DS_OK &&
                skip == 0 && strcmp(buf, "CLEAN TEXT") == 0, "error policy on clean text");
}

static void test_parse(void)
{
    const char *names[] = {"drop-char", "skip-utterance", "error"};
    for (int i = 0; i < 3; i++) {
        ds_transcript_policy p = (ds_transcript_policy)-1;
        T_CHECK(ds_transcript_policy_parse(names[i], &p) == DS_OK && (int)p == i &&
                    strcmp(ds_transcript_policy_name(p), names[i]) == 0, "parse %s", names[i]);
    }
    ds_transcript_policy p;
    ds_status_clear_error();
    T_CHECK(ds_transcript_policy_parse("drop", &p) == DS_ERR_ARG && strstr(ds_status_last_error(), "drop"),
            "bad policy: %s", ds_status_last_error());
}

/* Merged statistics and the report's lines. */
static void test_report(void)
{
    ds_transcript_stats a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    char t1[] = "one, two; 3", t2[] = "caf\xC3\xA9\x01";
    int skip;
    T_CHECK(ds_transcript_normalize(t1, DS_UNKNOWN_DROP_CHAR, "s", &a, &skip) == DS_OK,
            "first");
    T_CHECK(ds_transcript_normalize(t2, DS_UNKNOWN_SKIP_UTTERANCE, "s", &b, &skip) == DS_OK,
            "second");
    ds_transcript_stats_merge(&a, &b);
    T_CHECK(a.count[','] == 1 && a.count[';'] == 1 && a.count['3'] == 1 && a.count[0xC3] == 1 &&
                a.count[0x01] == 1 && a.dropped_chars == 3 && a.skipped_utterances == 1,
            "merge");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    T_CHECK(f != NULL, "open_memstream");
    if (!f)
        return;
    ds_transcript_stats_report(&a, f);
    T_CHECK(fclose(f) == 0, "closing the memstream");
    const char *want[] = {"',' ", "';' ", "'3' ", "\\xC3 ", "\\x01 ", "dropped 3 characters",
                          "skipped 1 utterances"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        T_CHECK(text && strstr(text, want[i]), "report lacks \"%s\":\n%s", want[i], text);
    printf("%s", text ? text : "");
    free(text);

    memset(&b, 0, sizeof b);
    text = NULL;
    f = open_memstream(&text, &len);
    if (f) {
        ds_transcript_stats_report(&b, f);
        T_CHECK(fclose(f) == 0 && len == 0, "report of nothing printed %zu bytes", len);
    }
    free(text);
}

int main(void)
{
    test_normalize();
    test_policies();
    test_parse();
    test_report();
    return t_finish("test_transcript");
}
