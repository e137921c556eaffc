/* prep.h - corpus (LibriSpeech tree or CSV manifest) to an HDF5 feature file. */
#ifndef DS_PREP_H
#define DS_PREP_H

#include "dataset.h"
#include "featurizer.h"
#include "transcript.h"

typedef struct {
    char *id, *audio, *text;    /* utterance id, audio path, raw transcript */
} ds_prep_item;

typedef struct {
    ds_prep_item *items;        /* sorted by id: the same order on every rank */
    long n, cap;
    long missing_audio;         /* transcript lines whose audio file is absent */
    long audio_without_text;    /* audio files no transcript line names */
    long bad_lines;             /* unparsable transcript or manifest lines */
    char **text_files;          /* transcript files read (*.trans.txt, a manifest's .txt fields) */
    long n_text_files, text_files_cap;
} ds_prep_list;

/* SPEAKER/CHAPTER/SPEAKER-CHAPTER-NNNN.flac with SPEAKER-CHAPTER.trans.txt,
 * found anywhere below root. */
ds_status ds_prep_scan_librispeech(const char *root, ds_prep_list *out);
/* Lines "audio_path,transcript" (an optional header line is skipped; the
 * Mozilla DeepSpeech form "wav_filename,wav_filesize,transcript" and a
 * transcript given as the path of a .txt file are accepted). Relative audio
 * paths are relative to the manifest's directory. */
ds_status ds_prep_scan_manifest(const char *csv, ds_prep_list *out);
void ds_prep_list_free(ds_prep_list *l);

typedef struct {
    ds_feature_cfg feat;
    ds_dtype dtype;             /* DS_F16 or DS_F32 on disk */
    ds_transcript_policy on_unknown;
    int threads;
    int progress;               /* 1: progress bar, 0: plain lines, -1: quiet */
    double max_duration_s;      /* longer audio is refused (0: no limit) */
} ds_prep_opts;

typedef struct {
    long written;
    long bad_audio;             /* unreadable, truncated, empty, wrong rate, too short */
    long bad_text;              /* empty after normalisation, or skipped for unknown characters */
    long non_finite;            /* NaN or Inf in the features */
    double seconds;             /* audio written */
    ds_transcript_stats unknown;
} ds_prep_stats;

/* Items [begin, end) of l into the feature file out. */
ds_status ds_prep_run(const ds_prep_list *l, long begin, long end, const char *out,
                      const ds_prep_opts *o, ds_prep_stats *st);

#endif
