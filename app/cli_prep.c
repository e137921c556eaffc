/* cli_prep.c - `dstrain prep`: a corpus to one HDF5 feature file. Under
 * mpiexec every rank scans the corpus (the same sorted list), takes a
 * contiguous share, writes OUT.part-R; rank 0 merges the parts in order. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audio.h"
#include "cli.h"
#include "flags.h"
#include "dataset_verify.h"
#include "file.h"
#include "file_input.h"
#include "prep.h"

enum { O_OUT = 256, O_FEATURES, O_N_MELS, O_N_MFCC, O_DTYPE, O_ON_UNKNOWN, O_THREADS, O_QUIET,
       O_VERIFY, O_MAX_DURATION };

static const ds_flag prep_flags[] = {
    DS_FLAG_OPERAND("librispeech ROOT",
                    "a LibriSpeech split: `SPEAKER/CHAPTER/*.flac` and `*.trans.txt` below ROOT"),
    DS_FLAG_OPERAND("manifest FILE.csv", "lines `audio_path,transcript` (paths relative to the CSV)"),
    DS_FLAG_ARG(O_OUT, "out", "FILE.h5", NULL,
                "the feature file to write (staged beside it, replacing it only once complete)"),
    DS_FLAG_ARG(O_FEATURES, "features", "F", "log-spectrogram, 161 bins",
                "log-spectrogram | log-mel | mfcc"),
    DS_FLAG_ARG(O_N_MELS, "n-mels", "N", "80", "mel bands for log-mel"),
    DS_FLAG_ARG(O_N_MFCC, "n-mfcc", "N", "26", "MFCC coefficients"),
    DS_FLAG_ARG(O_DTYPE, "dtype", "T", "float16", "float16 | float32 on disk"),
    DS_FLAG_ARG(O_ON_UNKNOWN, "on-unknown", "P", "drop-char",
                "characters outside the alphabet: drop-char | skip-utterance | error"),
    DS_FLAG_ARG(O_THREADS, "threads", "N", "the host's cores over its ranks",
                "worker threads per rank"),
    DS_FLAG_ARG(O_MAX_DURATION, "max-duration", "S", "300",
                "audio longer than S seconds is refused, named, before its memory is taken "
                "(LibriSpeech's longest utterance: 35 s); 0: no limit"),
    DS_FLAG_SWITCH(O_QUIET, "quiet", "no progress output"),
    DS_FLAG_ARG(O_VERIFY, "verify", "FILE.h5", NULL,
                "prepare nothing: read every dataset of FILE.h5 in full (checksums), check every "
                "value and the index; exit 0 when valid, 1 naming the first problem"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_prep_cmd = {
    .name = "prep",
    .run = ds_cli_prep,
    .summary = "LibriSpeech or a CSV manifest -> HDF5 feature file",
    .usage = "dstrain prep librispeech ROOT --out FILE.h5 [options]\n"
             "dstrain prep manifest FILE.csv --out FILE.h5 [options]\n"
             "mpiexec -np N dstrain prep ...    (ranks share the work; one file results)\n"
             "dstrain prep --verify FILE.h5     (checks a feature file end to end)",
    .flags = prep_flags,
    .notes = "Audio must be at 16 kHz (convert with sox); unreadable audio, empty transcripts and "
             "non-finite features are skipped and counted."};

typedef struct {
    const char *kind, *source, *out;
    const char *verify;   /* --verify FILE: only that */
    ds_prep_opts o;
} prep_args;

static int parse_prep(int argc, char **argv, prep_args *a)
{
    memset(a, 0, sizeof *a);
    a->o.feat = ds_feature_defaults();
    a->o.dtype = DS_F16;
    a->o.progress = isatty(2) ? 1 : 0;
    a->o.max_duration_s = DS_AUDIO_MAX_DURATION_S;
    int c;
    double v;
    ds_flags fl;
    if ((c = ds_flags_begin(&fl, &ds_cli_prep_cmd, argc, argv)) != DS_FLAGS_GO)
        return c == 0 ? 1 : c;   /* --help: done */
    while ((c = ds_flags_next(&fl)) != -1) {
        ds_status st = DS_OK;
        switch (c) {
        case O_OUT: a->out = optarg; break;
        case O_FEATURES: st = ds_feature_type_parse(optarg, &a->o.feat.type); break;
        case O_N_MELS:
            if (ds_cli_count("prep", "n-mels", optarg, 1, 512, &v))
                return 2;
            a->o.feat.n_mels = (int)v;
            break;
        case O_N_MFCC:
            if (ds_cli_count("prep", "n-mfcc", optarg, 1, 512, &v))
                return 2;
            a->o.feat.n_mfcc = (int)v;
            break;
        case O_DTYPE:
            if (!strcmp(optarg, "float16")) a->o.dtype = DS_F16;
            else if (!strcmp(optarg, "float32")) a->o.dtype = DS_F32;
            else st = DS_FAIL(DS_ERR_ARG, "--dtype %s: expected float16 or float32", optarg);
            break;
        case O_ON_UNKNOWN: st = ds_transcript_policy_parse(optarg, &a->o.on_unknown); break;
        case O_THREADS:
            if (ds_cli_count("prep", "threads", optarg, 1, 4096, &v))
                return 2;
            a->o.threads = (int)v;
            break;
        case O_MAX_DURATION:
            if (ds_cli_num("prep", "max-duration", optarg, 0, 1e7, &v))
                return 2;
            a->o.max_duration_s = v;
            break;
        case O_QUIET: a->o.progress = -1; break;
        case O_VERIFY: a->verify = optarg; break;
        default: return ds_flags_unhandled(&fl, c);
        }
        if (st != DS_OK) {
            fprintf(stderr, "dstrain prep: %s\n", ds_status_last_error());
            return 2;
        }
    }
    if (a->verify && (argc > optind || a->out)) {
        fprintf(stderr, "dstrain prep: --verify %s takes no corpus and no --out\n", a->verify);
        return 2;
    }
    if (a->verify)
        return 0;
    if (argc == 1) {   /* dstrain prep alone */
        ds_flags_help(stderr, &ds_cli_prep_cmd);
        return 2;
    }
    if (argc - optind != 2 || !a->out) {
        fprintf(stderr, "dstrain prep: need librispeech ROOT or manifest FILE.csv, and --out "
                        "FILE.h5 (dstrain prep --help)\n");
        return 2;
    }
    a->kind = argv[optind];
    a->source = argv[optind + 1];
    if (strcmp(a->kind, "librispeech") && strcmp(a->kind, "manifest")) {
        fprintf(stderr, "dstrain prep: \"%s\": expected librispeech or manifest\n", a->kind);
        return 2;
    }
    return 0;
}

/* The counts; written: whether --out now holds them. */
static void report(const prep_args *a, const ds_prep_list *l, const ds_prep_stats *s, int written)
{
    if (written)
        printf("prep: wrote %ld utterances (%.2f h) to %s\n", s->written, s->seconds / 3600, a->out);
    printf("prep: skipped %ld transcript lines without audio, %ld audio files without a transcript, "
           "%ld bad lines, %ld unreadable or unusable audio, %ld empty or rejected transcripts, "
           "%ld with non-finite features\n",
           l->missing_audio, l->audio_without_text, l->bad_lines, s->bad_audio, s->bad_text,
           s->non_finite);
    ds_transcript_stats_report(&s->unknown, stdout);
}

/* Sums the counters of every rank into rank 0's. */
static void reduce_stats(ds_prep_stats *s)
{
    long v[4] = {s->written, s->bad_audio, s->bad_text, s->non_finite}, sum[4];
    double sec = s->seconds;
    MPI_Reduce(v, sum, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sec, &s->seconds, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    ds_transcript_stats u;
    MPI_Reduce(&s->unknown, &u, (int)(sizeof u / sizeof(long)), MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    s->written = sum[0];
    s->bad_audio = sum[1];
    s->bad_text = sum[2];
    s->non_finite = sum[3];
    s->unknown = u;
}

static const char *audio_of(const void *list, long k)
{
    return ((const ds_prep_list *)list)->items[k].audio;
}

static const char *text_file_of(const void *list, long k)
{
    return ((const ds_prep_list *)list)->text_files[k];
}

/* rank of size ranks, local of them on this host */
static ds_status run_prep(prep_args *a, int rank, int size, int local)
{
    ds_prep_list l;
    ds_prep_stats s;
    char part[1200], stage[1200];
    /* The result is staged beside --out and replaces it only once complete
     * and not empty: a failed prep never destroys a good feature file. The
     * stage's name is new and random (the writer reaches it by rename). */
    const char *in_what[] = {"source"}, *in[] = {a->source};
    DS_TRY(ds_file_refuse_output_over_input("prep", "feature file (--out)", a->out, in_what, in, 1));
    DS_TRY(ds_file_tmp_name(a->out, "feature file", stage, sizeof stage));
    DS_TRY(!strcmp(a->kind, "librispeech") ? ds_prep_scan_librispeech(a->source, &l)
                                           : ds_prep_scan_manifest(a->source, &l));
    /* --out is none of the audio files either, whatever name it is given by */
    ds_status over = ds_file_refuse_output_over_each("prep", "feature file (--out)", a->out,
                                                     "audio file", audio_of, &l, l.n);
    if (over == DS_OK)
        over = ds_file_refuse_output_over_each("prep", "feature file (--out)", a->out,
                                               "transcript file", text_file_of, &l, l.n_text_files);
    if (over != DS_OK) {
        ds_prep_list_free(&l);
        return over;
    }
    if (a->o.threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN) / local;
        a->o.threads = cores > 0 ? (int)cores : 1;
    }
    const long begin = l.n * rank / size, end = l.n * (rank + 1) / size;
    if (size > 1)
        snprintf(part, sizeof part, "%s.part-%d", a->out, rank);
    ds_status st = ds_prep_run(&l, begin, end, size > 1 ? part : stage, &a->o, &s);
    int ok = st == DS_OK, all_ok = ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (size > 1 && all_ok && rank == 0) {
        const char **parts = malloc((size_t)size * sizeof *parts);
        char (*names)[1200] = malloc((size_t)size * sizeof *names);
        for (int r = 0; parts && names && r < size; r++) {
            snprintf(names[r], sizeof names[r], "%s.part-%d", a->out, r);
            parts[r] = names[r];
        }
        st = parts && names ? ds_dataset_merge(parts, size, stage) : DS_FAIL(DS_ERR_MEM, "parts");
        for (int r = 0; parts && names && r < size; r++)
            unlink(names[r]);
        free(parts);
        free(names);
    }
    reduce_stats(&s);
    if (st == DS_OK && !all_ok)
        st = DS_FAIL(DS_ERR_IO, "prep failed on another rank");
    if (st == DS_OK && rank == 0) {
        if (s.written == 0)
            st = DS_FAIL(DS_ERR_IO, "%s: no utterance could be prepared (%s left as it was)",
                         a->source, a->out);
        else
            st = ds_file_commit(stage, a->out);
        report(a, &l, &s, st == DS_OK);
    }
    if (rank == 0 && st != DS_OK)
        unlink(stage);
    ds_prep_list_free(&l);
    return st;
}

/* --verify FILE: the whole file read and checked (dataset_verify.h). */
static int verify(const prep_args *a)
{
    ds_dataset_verify_summary s;
    ds_status st = ds_dataset_verify(a->verify, a->o.progress < 0 ? NULL : stderr, &s);
    if (st != DS_OK)
        return ds_cli_fail("prep", st);
    ds_dataset_verify_print(a->verify, &s, stdout);
    return 0;
}

int ds_cli_prep(int argc, char **argv)
{
    prep_args a;
    int rc = parse_prep(argc, argv, &a);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (a.verify)
        return verify(&a);
    /* Prep writes its feature file through HDF5 on disk. When a write of it
     * fails (a full disk), HDF5 1.10 cannot close it: its close fails, frees
     * the file and keeps its ID, and HDF5's own clean-up at exit then
     * crashes on that ID (SIGSEGV after the error was reported). The writer
     * closes every file itself and prep commits its output before it
     * returns, so HDF5 is left nothing to do at exit. */
    if (H5dont_atexit() < 0)   /* HDF5 1.10 refuses only a second call */
        fprintf(stderr, "dstrain prep: warning: H5dont_atexit failed: a failed write may end "
                        "in a crash at exit\n");
    int provided, rank = 0, size = 1;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dstrain prep: MPI_Init_thread failed\n");
        return 1;
    }
    /* the ranks on this host share its cores (--threads' default) */
    MPI_Comm node = MPI_COMM_NULL;
    int local = 1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS ||
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) !=
            MPI_SUCCESS ||
        MPI_Comm_size(node, &local) != MPI_SUCCESS) {
        fprintf(stderr, "dstrain prep: MPI_Comm_rank, MPI_Comm_size or MPI_Comm_split_type failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    MPI_Comm_free(&node);
    if (rank != 0 && a.o.progress > 0)
        a.o.progress = -1;
    ds_status st = run_prep(&a, rank, size, local);
    rc = st == DS_OK ? 0 : ds_cli_fail("prep", st);
    MPI_Finalize();
    return rc;
}
