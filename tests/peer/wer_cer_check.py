#!/usr/bin/env python3
"""wer_cer_reference: dstrain's WER / CER counts against an independent
Levenshtein written here from the definition.

    wer_cer_check.py --check PATH/score_pairs_check [--break VARIANT]

Definitions (src/decode.h, as deepspeech.pytorch):
  words      the runs of non-space characters of a transcript (split on ' ',
             empty pieces dropped: runs of spaces, leading and trailing
             spaces make no words);
  characters every character of the transcript except ' ' (apostrophes are
             characters);
  edits      Levenshtein distance, unit cost insert / delete / substitute,
             between the reference's and the hypothesis' tokens;
  corpus WER = sum of word edits / sum of reference words,
  corpus CER = sum of char edits / sum of non-space reference characters.

Empty references (the C code's choice, src/score.h ds_score_wer/_cer): a pair
whose reference has no words (or no characters) adds its hypothesis' length
to the edits and 0 to the count; the corpus rate is edits / count when the
count is > 0 and 0 when the whole corpus has no reference tokens, insertions
or not (deepspeech.pytorch would divide by zero there, jiwer refuses empty
references). This check expects exactly that.

The pairs: hand-written edge cases (empty hypothesis, empty reference, both
empty, only spaces, repeated / leading / trailing spaces, apostrophes), long
pairs (~200 words, beyond dstrain's 1024-character stack buffers, and at the
boundary), and random pairs from a fixed seed over a tiny alphabet so edits
are frequent. score_pairs_check (tests/peer/score_pairs_check.c) scores them
with ds_decode_word_edits / ds_decode_char_edits; every pair's edits and reference counts
must match exactly, and so must the corpus totals and rates (printed %.17g,
the same IEEE division on both sides).

The check must be able to fail: after a passing comparison it re-scores the
same C output against deliberately wrong references (CER counting spaces,
words split at apostrophes, substitution costing 2, words split on every
space); each must be reported as a disagreement, or the test fails.
--break VARIANT runs the whole comparison against one wrong reference
instead (it must then exit 1).

If jiwer is importable, corpus WER is also compared with jiwer.wer on the
pairs with a non-empty reference and hypothesis; otherwise a note is printed.
"""
import argparse
import random
import subprocess
import sys

SEED = 20240607


# ---- the independent reference -------------------------------------------

def levenshtein(a, b):
    """Edit distance between sequences a and b: the full dynamic-programming
    table d[i][j] = distance between a[:i] and b[:j]."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i                      # delete all of a[:i]
    for j in range(len(b) + 1):
        d[0][j] = j                      # insert all of b[:j]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            substitute = d[i - 1][j - 1] + (0 if a[i - 1] == b[j - 1] else 1)
            delete = d[i - 1][j] + 1
            insert = d[i][j - 1] + 1
            d[i][j] = min(substitute, delete, insert)
    return d[len(a)][len(b)]


def words(s):
    return [w for w in s.split(" ") if w != ""]


def chars(s):
    return [c for c in s if c != " "]


def rate(edits, count):
    """Corpus rate with dstrain's convention for a corpus with no reference
    tokens (see the module docstring)."""
    return edits / count if count > 0 else 0.0


def score_pair(ref, hyp, variant=None):
    """(word edits, reference words, char edits, reference characters)."""
    wsplit, csplit, lev = words, chars, levenshtein
    if variant == "cer-counts-spaces":
        csplit = list
    elif variant == "apostrophe-splits-words":
        wsplit = lambda s: words(s.replace("'", " "))
    elif variant == "substitution-costs-2":
        lev = levenshtein_sub2
    elif variant == "split-every-space":
        wsplit = lambda s: s.split(" ")
    elif variant is not None:
        raise SystemExit("unknown variant %r" % variant)
    rw, hw, rc, hc = wsplit(ref), wsplit(hyp), csplit(ref), csplit(hyp)
    return (lev(rw, hw), len(rw), lev(rc, hc), len(rc))


def levenshtein_sub2(a, b):
    """A deliberately wrong distance (a substitution costs 2) for the self-check."""
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j - 1] + (0 if a[i - 1] == b[j - 1] else 2),
                          d[i - 1][j] + 1, d[i][j - 1] + 1)
    return d[len(a)][len(b)]


VARIANTS = ["cer-counts-spaces", "apostrophe-splits-words", "substitution-costs-2",
            "split-every-space"]


# ---- the pairs ---------------------------------------------------------------

EDGE = [
    ("", ""),                                   # both empty
    ("THE CAT SAT", ""),                        # empty hypothesis
    ("", "THE CAT"),                            # empty reference
    ("   ", ""),                                # reference of spaces only
    ("", "   "),
    ("  ", " "),
    ("   ", "A  B"),
    ("THE  CAT", "THE CAT"),                    # repeated spaces
    ("THE CAT", "THE    CAT"),
    ("  THE CAT  ", "THE CAT"),                 # leading / trailing spaces
    (" A", "A "),
    ("THE CAT SAT", " THE  CAT   SIT "),
    ("DON'T STOP", "DONT STOP"),                # apostrophes
    ("IT'S", "ITS"),
    ("'", ""),
    ("' '", "''"),
    ("ROCK 'N' ROLL", "ROCK N ROLL"),
    ("O'NEIL'S", "O'NEILS'"),
    ("KITTEN", "SITTING"),
    ("THE CAT", "THECAT"),                      # merged words: chars agree
    ("ABC", "CBA"),
    ("A B C D", "B C D E"),
    ("A", "A"),
    ("A B A B A", "B A B A B"),
]

VOCAB = ["THE", "A", "OF", "AND", "TO", "IN", "IT'S", "DON'T", "HE", "SHE", "WAS",
         "SAID", "THAT", "HIS", "HER", "WOULD", "COULD", "MISTER", "O'CLOCK",
         "BEFORE", "NOTHING", "EVERYTHING", "PEOPLE", "I", "NEVERTHELESS",
         "UNDERSTANDING", "EXTRAORDINARY"]


def mutate(tokens, rng, p, pool):
    """Substitutes, deletes and inserts tokens with probability p each."""
    out = []
    for t in tokens:
        r = rng.random()
        if r < p:
            out.append(rng.choice(pool))        # substitution (maybe equal)
        elif r < 2 * p:
            pass                                # deletion
        else:
            out.append(t)
        if rng.random() < p:
            out.append(rng.choice(pool))        # insertion
    return out


def spaced(ws, rng):
    """Joins words with runs of 1-3 spaces and sometimes outer spaces."""
    s = ""
    for k, w in enumerate(ws):
        s += (" " * rng.randint(1, 3) if k else "") + w
    if rng.random() < 0.3:
        s = " " * rng.randint(1, 2) + s
    if rng.random() < 0.3:
        s += " " * rng.randint(1, 2)
    return s


def text_of_length(n, rng):
    """A transcript of exactly n characters (words of VOCAB, single spaces)."""
    s = ""
    while len(s) < n:
        s += (" " if s else "") + rng.choice(VOCAB)
    s = s[:n]
    return s[:-1] + "X" if s.endswith(" ") else s


def make_pairs():
    rng = random.Random(SEED)
    pairs = list(EDGE) + [(h, r) for r, h in EDGE if r != h]    # and swapped
    # Long pairs: ~200 words (> 1024 characters, dstrain's heap path).
    ref_words = [rng.choice(VOCAB) for _ in range(200)]
    long_ref = " ".join(ref_words)
    long_hyp = " ".join(mutate(ref_words, rng, 0.1, VOCAB))
    assert len(long_ref) > 1024, len(long_ref)
    pairs += [(long_ref, long_hyp), (long_ref, ""), ("", long_hyp), ("A", long_ref),
              (long_ref, "A"), (spaced(ref_words, rng), long_ref)]
    # Transcripts at the 1024-character boundary of the stack buffers.
    for n_ref, n_hyp in [(1024, 1024), (1025, 1024), (1024, 1025), (1025, 1025), (1023, 1)]:
        r = text_of_length(n_ref, rng)
        h = " ".join(mutate(words(r), rng, 0.1, VOCAB))
        h = (h + " " * n_hyp)[:n_hyp] if len(h) < n_hyp else text_of_length(n_hyp, rng)
        pairs.append((r, h))
    # Random pairs over a tiny alphabet (words of A, B and ', any spacing):
    # half derived from the reference by edits, half independent.
    for _ in range(600):
        n = rng.randint(0, 24)
        ref = "".join(rng.choice("AB' ") for _ in range(n))
        if rng.random() < 0.5:
            hyp = "".join(mutate(list(ref), rng, 0.15, "AB' "))
        else:
            hyp = "".join(rng.choice("AB' ") for _ in range(rng.randint(0, 24)))
        pairs.append((ref, hyp))
    # Random word-level pairs (frequent word edits, random spacing).
    for _ in range(200):
        ws = [rng.choice(["A", "B", "AB", "A'", "BA"]) for _ in range(rng.randint(0, 12))]
        hs = mutate(ws, rng, 0.2, ["A", "B", "AB", "A'", "BA"])
        pairs.append((spaced(ws, rng), spaced(hs, rng)))
    for r, h in pairs:
        assert "\t" not in r + h and "\n" not in r + h
    return pairs


# ---- the comparison --------------------------------------------------------

def run_c(check, pairs):
    """score_pairs_check's per-pair tuples and its totals line."""
    text = "".join("%s\t%s\n" % p for p in pairs)
    out = subprocess.run([check], input=text, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("score_pairs_check failed (%d): %s" % (out.returncode, out.stderr))
    got, total = [], None
    for line in out.stdout.splitlines():
        f = line.split()
        if f[0] == "pair":
            got.append(tuple(int(x) for x in f[1:]))
        elif f[0] == "total":
            total = tuple(int(x) for x in f[1:5]) + (float(f[5]), float(f[6]))
    if len(got) != len(pairs) or total is None:
        raise SystemExit("score_pairs_check printed %d pairs for %d (total %r)"
                         % (len(got), len(pairs), total))
    return got, total


def expected_total(scores):
    we = sum(s[0] for s in scores)
    nw = sum(s[1] for s in scores)
    ce = sum(s[2] for s in scores)
    nc = sum(s[3] for s in scores)
    return (we, nw, ce, nc, rate(we, nw), rate(ce, nc))


def short(s, n=60):
    return repr(s if len(s) <= n else s[:n] + "...(%d chars)" % len(s))


def compare(pairs, got, total, variant=None, quiet=False):
    """Number of disagreements (pairs plus the totals line)."""
    want = [score_pair(r, h, variant) for r, h in pairs]
    bad = 0
    for (r, h), g, w in zip(pairs, got, want):
        if g != w:
            bad += 1
            if not quiet and bad <= 20:
                print("MISMATCH ref=%s hyp=%s: dstrain (word edits, words, char edits, "
                      "chars) %s, reference %s" % (short(r), short(h), g, w))
    wt = expected_total(want)
    if total != wt:
        bad += 1
        if not quiet:
            print("MISMATCH corpus totals (word edits, words, char edits, chars, WER, CER): "
                  "dstrain %s, reference %s" % (total, wt))
    return bad


def check_corpus(check, name, pairs, variant=None, want_rates=None):
    """Scores pairs as one corpus; returns the number of disagreements."""
    got, total = run_c(check, pairs)
    bad = compare(pairs, got, total, variant)
    if want_rates is not None and total[4:] != want_rates:
        print("MISMATCH %s: dstrain rates (WER, CER) %s, want %s" % (name, total[4:], want_rates))
        bad += 1
    print("%-28s %4d pairs: word edits %d / %d words, char edits %d / %d chars, "
          "WER %.6f CER %.6f: %s" % (name, len(pairs), total[0], total[1], total[2], total[3],
                                      total[4], total[5], "ok" if not bad else "%d BAD" % bad))
    return bad, got, total


def check_jiwer(pairs, got):
    try:
        import jiwer
    except ImportError:
        print("note: jiwer is not importable; WER is not compared with jiwer.wer")
        return 0
    sel = [(p, g) for p, g in zip(pairs, got) if words(p[0]) and words(p[1])]
    refs = [" ".join(words(r)) for (r, h), _ in sel]
    hyps = [" ".join(words(h)) for (r, h), _ in sel]
    ours = sum(g[0] for _, g in sel) / sum(g[1] for _, g in sel)
    theirs = jiwer.wer(refs, hyps)
    ok = abs(ours - theirs) <= 1e-12
    print("jiwer %s: WER over %d pairs with words on both sides: dstrain %.15f, jiwer %.15f: %s"
          % (getattr(jiwer, "__version__", "?"), len(sel), ours, theirs, "ok" if ok else "BAD"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", required=True, help="the score_pairs_check program")
    ap.add_argument("--break", dest="variant", choices=VARIANTS,
                    help="compare against a deliberately wrong reference (must fail)")
    a = ap.parse_args()

    # The reference itself, on textbook values.
    assert levenshtein("KITTEN", "SITTING") == 3 and levenshtein("", "ABC") == 3
    assert levenshtein(["A", "B"], ["A", "B"]) == 0 and levenshtein("FLAW", "LAWN") == 2
    assert score_pair("  THE  CAT ", "THE HAT") == (1, 2, 1, 6)

    pairs = make_pairs()
    bad, got, total = check_corpus(a.check, "all pairs", pairs, a.variant)
    # Corpora that pin the empty-reference convention: no reference tokens at
    # all gives rate 0 (even with insertions); an empty pair adds nothing.
    b, _, _ = check_corpus(a.check, "empty references only", [("", "A B"), ("   ", " C ")],
                           a.variant, want_rates=(0.0, 0.0))
    bad += b
    b, _, _ = check_corpus(a.check, "both empty only", [("", ""), (" ", "  ")], a.variant,
                           want_rates=(0.0, 0.0))
    bad += b
    b, _, _ = check_corpus(a.check, "empty reference + one word", [("", "A B"), ("CAT", "CAT")],
                           a.variant, want_rates=(2 / 1, 2 / 3))
    bad += b
    b, _, _ = check_corpus(a.check, "no pairs", [], a.variant, want_rates=(0.0, 0.0))
    bad += b
    bad += check_jiwer(pairs, got)

    if a.variant is None:
        # The comparison must be able to fail: every wrong reference must
        # disagree with dstrain's output somewhere.
        for v in VARIANTS:
            n = compare(pairs, got, total, v, quiet=True)
            print("self-check: wrong reference %-24s %s" %
                  (v, "detected (%d disagreements)" % n if n else "NOT DETECTED"))
            if n == 0:
                bad += 1
    n_edit = sum(1 for g in got if g[0] or g[2])
    print("%d pairs, %d with edits; %s" % (len(pairs), n_edit,
                                           "PASS" if bad == 0 else "FAIL (%d)" % bad))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
