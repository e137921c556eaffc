/* test_audio.c - ds_audio_read on real files written with libsndfile into a
 * temporary directory: FLAC and WAV read back exactly, stereo averaged, and
 * every bad input an error naming the file. */
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audio.h"
#include "testutil.h"

#define SR 16000
#define MAX_FILES 32

static char dir[64];
static char made[MAX_FILES][128];   /* files to remove at the end */
static int n_made;

/* dir/name into buf [128], remembered for clean-up. */
static const char *path_of(const char *name, char *buf)
{
    snprintf(buf, 128, "%s/%s", dir, name);
    if (n_made < MAX_FILES)
        snprintf(made[n_made++], 128, "%s", buf);
    return buf;
}

/* Writes interleaved 16-bit samples pcm [frames][channels] in format fmt. */
static int write_pcm16(const char *path, int fmt, int rate, int channels, const short *pcm,
                       long frames)
{
    SF_INFO info = {.samplerate = rate, .channels = channels, .format = fmt | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    if (!sf) {
        fprintf(stderr, "%s: %s\n", path, sf_strerror(NULL));
        return 0;
    }
    int ok = sf_writef_short(sf, pcm, frames) == frames;
    return sf_close(sf) == 0 && ok;
}

/* Random 16-bit samples [n], never -32768 so that averages stay symmetric. */
static short *random_pcm(uint64_t seed, long n)
{
    ds_rng r;
    ds_rng_seed(&r, seed);
    short *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (long i = 0; p && i < n; i++)
        p[i] = (short)ds_rng_int(&r, -32767, 32767);
    return p;
}

/* Reading back a mono 16-bit file gives pcm / 32768 exactly. */
static void test_mono(const char *name, int fmt)
{
    char p[128];
    long n = 16001;
    short *pcm = random_pcm(1, n);
    T_CHECK(pcm && write_pcm16(path_of(name, p), fmt, SR, 1, pcm, n), "writing %s", name);
    float *x = NULL;
    long got = 0;
    ds_status_clear_error();
    ds_status st = ds_audio_read(p, SR, &x, &got);
    T_CHECK(st == DS_OK && got == n, "%s: %s, %ld samples", name, ds_status_last_error(), got);
    long bad = 0;
    for (long i = 0; st == DS_OK && i < n; i++)
        bad += x[i] != (float)(pcm[i] / 32768.0);
    T_CHECK(bad == 0, "%s: %ld samples differ", name, bad);
    free(pcm);
    free(x);
}

/* A float WAV holds arbitrary floats; they come back bit for bit. */
static void test_float_wav(void)
{
    char p[128];
    float v[1000];
    ds_rng r;
    ds_rng_seed(&r, 4);
    for (int i = 0; i < 1000; i++)
        v[i] = (float)ds_rng_range(&r, -1, 1);
    SF_INFO info = {.samplerate = SR, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_FLOAT};
    SNDFILE *sf = sf_open(path_of("float.wav", p), SFM_WRITE, &info);
    int ok = sf && sf_writef_float(sf, v, 1000) == 1000;
    T_CHECK(sf && sf_close(sf) == 0 && ok, "writing float.wav");
    float *x = NULL;
    long n = 0;
    T_CHECK(ds_audio_read(p, SR, &x, &n) == DS_OK && n == 1000 && memcmp(x, v, sizeof v) == 0,
            "float.wav: %s", ds_status_last_error());
    free(x);
}

static void test_stereo(void)
{
    char p[128];
    long n = 4000;
    short *pcm = random_pcm(2, 2 * n);
    T_CHECK(pcm && write_pcm16(path_of("stereo.flac", p), SF_FORMAT_FLAC, SR, 2, pcm, n),
            "writing stereo.flac");
    float *x = NULL;
    long got = 0;
    ds_status st = ds_audio_read(p, SR, &x, &got);
    T_CHECK(st == DS_OK && got == n, "stereo: %s, %ld frames", ds_status_last_error(), got);
    double worst = 0;
    for (long i = 0; st == DS_OK && i < n; i++) {
        double want = (pcm[2 * i] / 32768.0 + pcm[2 * i + 1] / 32768.0) / 2;
        worst = fmax(worst, fabs(x[i] - want));
    }
    T_CHECK(worst <= 3e-8, "stereo average off by %.3g", worst);
    free(pcm);
    free(x);
}

/* p must fail with DS_ERR_IO, a message naming the file and holding each
 * of words [] (NULL-terminated; may be NULL), and leave no samples. */
static void expect_error(const char *what, const char *p, const char *const *words)
{
    float *x = (float *)&x;   /* must become NULL */
    long n = -1;
    ds_status_clear_error();
    ds_status st = ds_audio_read(p, SR, &x, &n);
    const char *msg = ds_status_last_error();
    T_CHECK(st == DS_ERR_IO, "%s: status %s (%s)", what, ds_status_name(st), msg);
    T_CHECK(strstr(msg, p) != NULL, "%s: message does not name the file: %s", what, msg);
    for (int i = 0; words && words[i]; i++)
        T_CHECK(strstr(msg, words[i]) != NULL, "%s: message lacks '%s': %s", what, words[i], msg);
    T_CHECK(x == NULL && n == 0, "%s: output not cleared", what);
    printf("  %s -> %s\n", what, msg);
    if (st == DS_OK)
        free(x);
}

static void test_missing_and_not_audio(void)
{
    char p[128];
    expect_error("missing file", path_of("missing.flac", p), NULL);
    FILE *f = fopen(path_of("text.flac", p), "w");
    T_CHECK(f && fputs("this is not audio, just some text in a file\n", f) >= 0 && fclose(f) == 0,
            "writing text.flac");
    expect_error("text renamed .flac", p, NULL);
    f = fopen(path_of("zero_bytes.wav", p), "w");
    T_CHECK(f && fclose(f) == 0, "writing zero_bytes.wav");
    expect_error("0-byte file", p, NULL);
    expect_error("a directory", dir, NULL);
}

/* A FLAC cut to half its bytes announces more frames than it holds. */
static void test_truncated(void)
{
    char p[128];
    long n = 3 * SR;
    short *pcm = random_pcm(3, n);
    T_CHECK(pcm && write_pcm16(path_of("truncated.flac", p), SF_FORMAT_FLAC, SR, 1, pcm, n),
            "writing truncated.flac");
    struct stat sb;
    T_CHECK(stat(p, &sb) == 0 && truncate(p, sb.st_size / 2) == 0, "truncating %s", p);
    expect_error("FLAC cut in half", p, NULL);
    free(pcm);
}

/* Writes bytes [n] to path. */
static int write_bytes(const char *path, const unsigned char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, n, f) == n;
    return f && fclose(f) == 0 && ok;
}

/* A FLAC's STREAMINFO (always the first block) gives the sample count in
 * the low 4 bits of byte 21 and bytes 22..25; 0 there means "unknown". */
static void clear_flac_length(unsigned char *flac)
{
    flac[21] &= 0xF0;
    memset(flac + 22, 0, 4);
}

/* Empty files: a 0-frame WAV, and a FLAC that is only its STREAMINFO (as
 * sox writes for empty audio; libsndfile writes 0 bytes for it). */
static void test_empty(void)
{
    char p[128];
    short none = 0;
    const char *const words[] = {"0 samples", NULL};
    T_CHECK(write_pcm16(path_of("empty.wav", p), SF_FORMAT_WAV, SR, 1, &none, 0),
            "writing empty.wav");
    expect_error("empty WAV", p, words);
    unsigned char flac[42] = {'f', 'L', 'a', 'C', 0x80, 0, 0, 34,     /* last block, 34 bytes */
                              0x10, 0, 0x10, 0, 0, 0, 0, 0, 0, 0,   /* block and frame sizes */
                              0x03, 0xE8, 0x00, 0xF0};              /* 16000 Hz, mono, 16-bit */
    clear_flac_length(flac);
    T_CHECK(write_bytes(path_of("empty.flac", p), flac, sizeof flac), "writing empty.flac");
    expect_error("empty FLAC", p, words);
}

/* A FLAC whose header has no sample count is read to its end. */
static void test_unknown_length(void)
{
    char p[128];
    long n = 70001;   /* more than one read chunk */
    short *pcm = random_pcm(6, n);
    T_CHECK(pcm && write_pcm16(path_of("no_length.flac", p), SF_FORMAT_FLAC, SR, 1, pcm, n),
            "writing no_length.flac");
    unsigned char head[26];
    FILE *f = fopen(p, "r+b");
    int ok = f && fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, "fLaC", 4) == 0;
    clear_flac_length(head);
    ok = ok && fseek(f, 0, SEEK_SET) == 0 && fwrite(head, 1, sizeof head, f) == sizeof head;
    T_CHECK(f && fclose(f) == 0 && ok, "patching %s", p);
    float *x = NULL;
    long got = 0;
    ds_status st = ds_audio_read(p, SR, &x, &got);
    T_CHECK(st == DS_OK && got == n, "no length: %s, %ld samples", ds_status_last_error(), got);
    long bad = 0;
    for (long i = 0; st == DS_OK && i < n; i++)
        bad += x[i] != (float)(pcm[i] / 32768.0);
    T_CHECK(bad == 0, "no length: %ld samples differ", bad);
    free(pcm);
    free(x);
}

static void test_wrong_rate(void)
{
    char p[128];
    short *pcm = random_pcm(5, 4410);
    T_CHECK(pcm && write_pcm16(path_of("cd_rate.flac", p), SF_FORMAT_FLAC, 44100, 1, pcm, 4410),
            "writing cd_rate.flac");
    expect_error("44.1 kHz", p, (const char *[]){"44100", "16000", "sox", NULL});
    free(pcm);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_audio_XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    test_mono("mono.flac", SF_FORMAT_FLAC);
    test_mono("mono.wav", SF_FORMAT_WAV);
    test_float_wav();
    test_stereo();
    test_missing_and_not_audio();
    test_truncated();
    test_empty();
    test_unknown_length();
    test_wrong_rate();
    for (int i = 0; i < n_made; i++)
        unlink(made[i]);   /* missing.flac never existed: ignore its failure */
    T_CHECK(rmdir(dir) == 0, "removing %s", dir);
    return t_finish("test_audio");
}
