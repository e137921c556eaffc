/* cli_prep.c - `dstrain prep`: a corpus to one HDF5 feature file. Under
 * mpiexec every rank scans the corpus (the same sorted list), takes a
 * contiguous share, writes OUT.part-R; rank 0 merges the parts in order. */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dataset_verify.h"
#include "fileutil.h"
#include "prep.h"

static void prep_usage(FILE *f)
{
    fprintf(f,
        "usage: dstrain prep librispeech ROOT --out FILE.h5 [options]\n"
        "       dstrain prep manifest FILE.csv --out FILE.h5 [options]\n"
        "       mpiexec -np N dstrain prep ...    (ranks share the work; one file results)\n"
        "       dstrain prep --verify FILE.h5     (checks a feature file end to end)\n"
        "\n"
        "  librispeech ROOT     a LibriSpeech split: SPEAKER/CHAPTER/*.flac + *.trans.txt below ROOT\n"
        "  manifest FILE.csv    lines audio_path,transcript (paths relative to the CSV)\n"
        "  --out FILE.h5        the feature file to write\n"
        "  --features F         log-spectrogram (default, 161 bins) | log-mel | mfcc\n"
        "  --n-mels N           mel bands for log-mel (default 80)\n"
        "  --n-mfcc N           MFCC coefficients (default 26)\n"
        "  --dtype T            float16 (default) | float32 on disk\n"
        "  --on-unknown P       characters outside the alphabet: drop-char (default) |\n"
        "                       skip-utterance | error\n"
        "  --threads N          worker threads per rank (default: the cores, shared among ranks)\n"
        "  --quiet              no progress output\n"
        "  --verify FILE.h5     prepare nothing: read every dataset of FILE.h5 in full\n"
        "                       (checksums), check every value and the index; exit 0 when\n"
        "                       valid, 1 naming the first problem\n"
        "  --help               this text\n"
        "\n"
        "Audio must be at 16 kHz (convert with sox); unreadable audio, empty transcripts and\n"
        "non-finite features are skipped and counted.\n");
}

typedef struct {
    const char *kind, *source, *out;
    const char *verify;   /* --verify FILE: only that */
    ds_prep_opts o;
} prep_args;

static int parse_prep(int argc, char **argv, prep_args *a)
{
    static const struct option lo[] = {
        {"out", 1, 0, 'o'}, {"features", 1, 0, 'f'}, {"n-mels", 1, 0, 'm'}, {"n-mfcc", 1, 0, 'c'},
        {"dtype", 1, 0, 'd'}, {"on-unknown", 1, 0, 'u'}, {"threads", 1, 0, 't'},
        {"quiet", 0, 0, 'q'}, {"verify", 1, 0, 'v'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->o.feat = ds_feature_defaults();
    a->o.dtype = DS_F16;
    a->o.progress = isatty(2) ? 1 : 0;
    int c;
    double v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        ds_status st = DS_OK;
        switch (c) {
        case 'o': a->out = optarg; break;
        case 'f': st = ds_feature_type_parse(optarg, &a->o.feat.type); break;
        case 'm':
            if (ds_cli_num("prep", "n-mels", optarg, 1, 512, &v))
                return 2;
            a->o.feat.n_mels = (int)v;
            break;
        case 'c':
            if (ds_cli_num("prep", "n-mfcc", optarg, 1, 512, &v))
                return 2;
            a->o.feat.n_mfcc = (int)v;
            break;
        case 'd':
            if (!strcmp(optarg, "float16")) a->o.dtype = DS_F16;
            else if (!strcmp(optarg, "float32")) a->o.dtype = DS_F32;
            else st = DS_FAIL(DS_ERR_ARG, "--dtype %s: expected float16 or float32", optarg);
            break;
        case 'u': st = ds_unknown_policy_parse(optarg, &a->o.on_unknown); break;
        case 't':
            if (ds_cli_num("prep", "threads", optarg, 1, 4096, &v))
                return 2;
            a->o.threads = (int)v;
            break;
        case 'q': a->o.progress = -1; break;
        case 'v': a->verify = optarg; break;
        case 'h': prep_usage(stdout); return 1;
        default: prep_usage(stderr); return 2;
        }
        if (st != DS_OK) {
            fprintf(stderr, "dstrain prep: %s\n", ds_last_error());
            return 2;
        }
    }
    if (a->verify && (argc > optind || a->out)) {
        fprintf(stderr, "dstrain prep: --verify %s takes no corpus and no --out\n", a->verify);
        return 2;
    }
    if (a->verify)
        return 0;
    if (argc - optind != 2 || !a->out) {
        prep_usage(stderr);
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
    ds_unknown_report(&s->unknown, stdout);
}

/* Sums the counters of every rank into rank 0's. */
static void reduce_stats(ds_prep_stats *s)
{
    long v[4] = {s->written, s->bad_audio, s->bad_text, s->non_finite}, sum[4];
    double sec = s->seconds;
    MPI_Reduce(v, sum, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sec, &s->seconds, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    ds_unknown_stats u;
    MPI_Reduce(&s->unknown, &u, (int)(sizeof u / sizeof(long)), MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    s->written = sum[0];
    s->bad_audio = sum[1];
    s->bad_text = sum[2];
    s->non_finite = sum[3];
    s->unknown = u;
}

static ds_status run_prep(prep_args *a, int rank, int size)
{
    ds_prep_list l;
    ds_prep_stats s;
    char part[1200], stage[1200];
    /* The result is staged beside --out and replaces it only once complete
     * and not empty: a failed prep never destroys a good feature file. */
    snprintf(stage, sizeof stage, "%s.new", a->out);
    DS_TRY(!strcmp(a->kind, "librispeech") ? ds_prep_scan_librispeech(a->source, &l)
                                           : ds_prep_scan_manifest(a->source, &l));
    if (a->o.threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN) / size;
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
    ds_verify_summary s;
    ds_status st = ds_dataset_verify(a->verify, a->o.progress < 0 ? NULL : stderr, &s);
    if (st != DS_OK)
        return ds_cli_fail("prep", st);
    ds_verify_print(a->verify, &s, stdout);
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
    int provided, rank = 0, size = 1;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dstrain prep: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0 && a.o.progress > 0)
        a.o.progress = -1;
    ds_status st = run_prep(&a, rank, size);
    rc = st == DS_OK ? 0 : ds_cli_fail("prep", st);
    MPI_Finalize();
    return rc;
}
