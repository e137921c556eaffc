/* audio.c - audio files read with libsndfile; see audio.h. */
#include "audio.h"

#include <errno.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>

/* Frames read per sf_readf_float call, and the first buffer's size in
 * frames (a minute at 16 kHz; longer files grow it by doubling). */
#define DS_AUDIO_CHUNK 65536
#define DS_AUDIO_INITIAL (1 << 20)

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A RIFF WAVE file whose data chunk claims more bytes than the file holds
 * is truncated: libsndfile reads what is there and says nothing, so the
 * chunk headers are read here (size: the file's bytes). Other formats, and
 * a data size of 0xFFFFFFFF (a stream's "unknown"), pass. */
static ds_status check_wav_length(const char *path, off_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return DS_FAIL(DS_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char h[12], c[8], fmt[16];
    ds_status st = DS_OK;
    uint32_t rate = 0, align = 0;
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4))
        goto done;
    for (off_t at = 12; at + 8 <= size;) {
        if (fseeko(f, at, SEEK_SET) != 0 || fread(c, 1, sizeof c, f) != sizeof c)
            break;
        const uint32_t n = le32(c + 4);
        if (!memcmp(c, "fmt ", 4) && n >= sizeof fmt && fread(fmt, 1, sizeof fmt, f) == sizeof fmt) {
            rate = le32(fmt + 4);
            align = (uint32_t)fmt[12] | (uint32_t)fmt[13] << 8;
        }
        if (!memcmp(c, "data", 4)) {
            const off_t have = size - (at + 8);
            if (n != UINT32_MAX && (off_t)n > have) {
                char secs[96] = "";
                if (rate && align)
                    snprintf(secs, sizeof secs, " (%.2f s; %.3f s present)",
                             (double)n / align / rate, (double)have / align / rate);
                st = DS_FAIL(DS_ERR_IO, "%s: truncated: its header says %lu bytes of audio, the "
                             "file holds %lld%s", path, (unsigned long)n, (long long)have, secs);
            }
            break;
        }
        at += 8 + (off_t)n + (n & 1);
    }
done:
    fclose(f);
    return st;
}

/* Opens path for reading; a missing file gets the system's reason rather
 * than libsndfile's generic one. */
static ds_status open_sound(const char *path, SNDFILE **sf, SF_INFO *info)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: not a regular file", path);
    DS_TRY(check_wav_length(path, sb.st_size));
    memset(info, 0, sizeof *info);   /* format 0: libsndfile detects it */
    *sf = sf_open(path, SFM_READ, info);
    if (!*sf)
        return DS_FAIL(DS_ERR_IO, "%s: not a readable audio file: %s", path, sf_strerror(NULL));
    return DS_OK;
}

/* The header's promises: the expected rate and at least one channel. The
 * length may be unknown (SF_COUNT_MAX: a FLAC whose STREAMINFO gives no
 * sample count); a known length of 0 is an empty file. */
static ds_status check_info(const char *path, const SF_INFO *info, int expect_rate)
{
    if (info->samplerate != expect_rate)
        return DS_FAIL(DS_ERR_IO,
                       "%s: sample rate %d Hz, expected %d; convert with: sox %s -r %d OUT.flac",
                       path, info->samplerate, expect_rate, path, expect_rate);
    if (info->channels < 1)
        return DS_FAIL(DS_ERR_IO, "%s: %d channels", path, info->channels);
    if (info->frames <= 0)
        return DS_FAIL(DS_ERR_IO, "%s: empty audio (0 samples)", path);
    return DS_OK;
}

/* Makes room for cap frames of channels samples in *buf. */
static ds_status reserve(const char *path, float **buf, sf_count_t cap, int channels)
{
    if ((uint64_t)cap > SIZE_MAX / sizeof(float) / (uint64_t)channels)
        return DS_FAIL(DS_ERR_IO, "%s: too long (%lld frames)", path, (long long)cap);
    float *b = realloc(*buf, (size_t)cap * (size_t)channels * sizeof *b);
    if (!b)
        return DS_FAIL(DS_ERR_MEM, "%s: %lld frames of %d channels", path, (long long)cap,
                       channels);
    *buf = b;
    return DS_OK;
}

/* Reads every frame into the malloc'd *buf [*got][channels]. A file that
 * announces its length must deliver all of it (fewer frames mean a
 * truncated or corrupt file); one of unknown length is read to its end. The
 * buffer grows as frames arrive, so a header claiming an absurd length
 * fails as truncated instead of allocating it up front. */
static ds_status read_frames(const char *path, SNDFILE *sf, const SF_INFO *info,
                             sf_count_t max_frames, float **buf, sf_count_t *got)
{
    int known = info->frames != SF_COUNT_MAX;
    sf_count_t limit = info->frames;   /* SF_COUNT_MAX when unknown */
    if (!known && max_frames > 0)      /* one frame past the limit tells it was passed */
        limit = max_frames + 1;
    sf_count_t cap = limit < DS_AUDIO_INITIAL ? limit : DS_AUDIO_INITIAL;
    *got = 0;
    DS_TRY(reserve(path, buf, cap, info->channels));
    for (;;) {
        if (*got == cap) {
            if (cap == limit)
                break;
            cap = cap > limit / 2 ? limit : 2 * cap;
            DS_TRY(reserve(path, buf, cap, info->channels));
        }
        sf_count_t want = cap - *got < DS_AUDIO_CHUNK ? cap - *got : DS_AUDIO_CHUNK;
        sf_count_t r = sf_readf_float(sf, *buf + *got * info->channels, want);
        if (r <= 0)
            break;
        *got += r;
    }
    int err = sf_error(sf);
    if (err != SF_ERR_NO_ERROR)
        return DS_FAIL(DS_ERR_IO, "%s: read error after %lld frames: %s", path, (long long)*got,
                       sf_error_number(err));
    if (!known && max_frames > 0 && *got > max_frames)
        return DS_FAIL(DS_ERR_IO, "%s: longer than %.0f s of audio (its length is not in its "
                       "header); raise --max-duration or split the file", path,
                       (double)max_frames / info->samplerate);
    if (known && *got < info->frames)
        return DS_FAIL(DS_ERR_IO, "%s: truncated: %lld of %lld frames readable", path,
                       (long long)*got, (long long)info->frames);
    if (*got == 0)
        return DS_FAIL(DS_ERR_IO, "%s: empty audio (0 samples)", path);
    return DS_OK;
}

/* Averages interleaved buf [n][channels] into its first n entries, in place:
 * entry i is written after all entries it is read from. */
static void downmix(float *buf, long n, int channels)
{
    if (channels == 1)
        return;
    for (long i = 0; i < n; i++) {
        double s = 0;
        for (int c = 0; c < channels; c++)
            s += buf[i * channels + c];
        buf[i] = (float)(s / channels);
    }
}

ds_status ds_audio_read(const char *path, int expect_rate, float **samples, long *n)
{
    return ds_audio_read_max(path, expect_rate, 0, samples, n);
}

ds_status ds_audio_read_max(const char *path, int expect_rate, double max_s, float **samples,
                            long *n)
{
    *samples = NULL;
    *n = 0;
    SNDFILE *sf = NULL;
    SF_INFO info;
    DS_TRY(open_sound(path, &sf, &info));
    float *buf = NULL;
    sf_count_t got = 0;
    ds_status st;
    int close_err;
    DS_TRY_GOTO(st, check_info(path, &info, expect_rate), out);
    const sf_count_t max_frames = max_s > 0 ? (sf_count_t)(max_s * expect_rate) : 0;
    if (max_frames > 0 && info.frames != SF_COUNT_MAX && info.frames > max_frames) {
        st = DS_FAIL(DS_ERR_IO, "%s: %.1f s of audio, longer than --max-duration %.0f s; raise "
                     "it or split the file", path, (double)info.frames / expect_rate, max_s);
        goto out;
    }
    DS_TRY_GOTO(st, read_frames(path, sf, &info, max_frames, &buf, &got), out);
    downmix(buf, (long)got, info.channels);
out:
    close_err = sf_close(sf);
    if (close_err != 0 && st == DS_OK)
        st = DS_FAIL(DS_ERR_IO, "%s: closing: %s", path, sf_error_number(close_err));
    if (st != DS_OK) {
        free(buf);
        return st;
    }
    /* Keep only the mono part; a failed shrink leaves the larger block valid. */
    float *mono = realloc(buf, (size_t)got * sizeof *buf);
    *samples = mono ? mono : buf;
    *n = (long)got;
    return DS_OK;
}
