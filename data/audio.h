/* audio.h - reading audio files with libsndfile (FLAC, WAV, OGG, ...). */
#ifndef DS_AUDIO_H
#define DS_AUDIO_H

#include "status.h"

/* Reads path as mono float samples (channels averaged) into a malloc'd
 * *samples [*n]. Integer formats (16-bit FLAC, PCM WAV) are scaled to
 * [-1, 1); float-format files are passed through as stored. The file's rate
 * must equal expect_rate: dstrain does not resample (the error says how to
 * convert with sox). A missing, unreadable, non-audio, empty (0 samples) or
 * truncated file (fewer frames readable than its header announces) fails
 * with DS_ERR_IO and a message naming the file; on failure *samples is NULL
 * and *n 0. */
ds_status ds_audio_read(const char *path, int expect_rate, float **samples, long *n);

/* ds_audio_read, refusing (DS_ERR_IO, naming the file and its length)
 * audio longer than max_s seconds (0: no limit) before its memory is
 * taken, or as soon as a file of unknown length passes it. */
ds_status ds_audio_read_max(const char *path, int expect_rate, double max_s, float **samples,
                            long *n);

/* The default --max-duration of prep and transcribe, in seconds: far past
 * LibriSpeech's longest utterance (35 s), far short of what an hour of
 * audio would take in memory. */
#define DS_AUDIO_MAX_DURATION_S 300.0

#endif
