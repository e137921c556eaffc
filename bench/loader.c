/* bench/loader.c - data-loader throughput, no model: `bench_loader`.
 *
 * Every rank opens the same feature file, builds the same sampler over all of
 * its utterances (ranks = the MPI size, --batch per rank) and, each epoch,
 * starts the loader for its rank and drains it as fast as it can. The
 * batches are not copied anywhere (no host-to-device copy): this is what the
 * loader thread alone can produce, on a file that is probably in the page
 * cache after the first run.
 *
 * Output (rank 0), in the nccl-tests manner: '#' header lines, a column line
 * and a units line, one row per rank, a total row, '#' summary lines.
 *   utts, batches, frames  what the rank's loader delivered (frames: real
 *                          frames, without padding)
 *   time                   the rank's wall-clock, loader start to stop, all
 *                          epochs (total row: the slowest rank)
 *   utt/s, batch/s         per rank; total row: the sums over the slowest
 *                          rank's time (the job's aggregate)
 *   audio                  seconds of audio delivered per second (frames x
 *                          window stride)
 *   batchMB/s              float32 batch data delivered: utterances x padded
 *                          frames x n_features x 4 bytes, MB = 10^6 bytes
 *   diskMB/s               feature bytes read from the file: real frames x
 *                          n_features x 2 (float16) or 4 (float32)
 *   x_utt, x_audio         headroom: the loader's rate over the assumed
 *                          consumer's (total row: over ranks x the assumed
 *                          rate, one GPU per rank)
 *   read/feat, disk/feat   read amplification: bytes the process read
 *                          (/proc/self/io rchar, page cache or disk) and bytes
 *                          from the block device (read_bytes), each over the
 *                          feature bytes delivered (diskMB/s's bytes)
 *
 * --cold evicts the file from the page cache (posix_fadvise DONTNEED, no
 * root needed for clean pages) before each epoch; --make writes a
 * LibriSpeech-length file to run on (bench/results/amd-epyc-zen5-avx512-2core/loader/README.md).
 *
 * The consumer is an ASSUMPTION, not a measurement: by default DeepSpeech2
 * (the ds2 preset) training on one H100 at 250 utterances/s of LibriSpeech,
 * whose utterances last 12.3 s on average (--gpu-utt-per-s,
 * --gpu-utt-seconds). Short utterances (the mini corpus) inflate x_utt; x_audio
 * compares seconds of audio and is the fairer of the two there. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "flags.h"
#include "dataset.h"
#include "h5_lock.h"
#include "feature.h"
#include "loader.h"
#include "rng.h"
#include "sampler.h"
#include "world.h"

#define PROG "bench_loader"

typedef struct {
    const char *data, *make;
    long utterances;
    int batch, epochs, depth, threads, spec_augment, cold;
    ds_norm norm;
    const char *norm_name;
    uint64_t seed;
    double gpu_utt_per_s, gpu_utt_seconds;
} bench_opts;

/* One rank's measurement, gathered as doubles (exact below 2^53). */
enum { M_UTTS, M_BATCHES, M_FRAMES, M_PADDED, M_DISK_BYTES, M_SECONDS, M_RCHAR, M_READ_BYTES,
       M_CPU, M_COUNT };

static int g_rank = 0;

/* ---- options (flags.h): parsed by every rank alike, said by rank 0 ---- */

#define STR_(x) #x
#define STR(x) STR_(x)

enum { O_DATA = 256, O_BATCH, O_EPOCHS, O_NORM, O_AUG, O_DEPTH, O_THREADS, O_COLD, O_SEED, O_GPU,
       O_GPU_S, O_MAKE, O_UTTS };

static const ds_flag loader_flags[] = {
    DS_FLAG_SECTION("what is read"),
    DS_FLAG_ARG(O_DATA, "data", "FILE.h5", NULL, "feature file (dstrain prep)"),
    DS_FLAG_ARG(O_BATCH, "batch", "B", "16", "utterances per rank and batch"),
    DS_FLAG_ARG(O_EPOCHS, "epochs", "E", "1", "epochs"),
    DS_FLAG_ARG(O_NORM, "norm", "N", "utterance", "utterance, global or none"),
    DS_FLAG_SWITCH(O_AUG, "spec-augment", "SpecAugment as `dstrain train --spec-augment`"),
    DS_FLAG_ARG(O_SEED, "seed", "S", "1", "sampler and augmentation seed"),
    DS_FLAG_SECTION("the loader"),
    DS_FLAG_ARG(O_DEPTH, "depth", "D", STR(DS_LOADER_DEFAULT_DEPTH) ", the loader's",
                "batch buffers per loader, >= 2"),
    DS_FLAG_ARG(O_THREADS, "threads", "N", STR(DS_LOADER_DEFAULT_THREADS) ", the loader's",
                "reader threads per loader"),
    DS_FLAG_SWITCH(O_COLD, "cold",
                   "evict FILE.h5 from the page cache (posix_fadvise DONTNEED) before each epoch: "
                   "reads come from the disk"),
    DS_FLAG_SECTION("the assumed consumer"),
    DS_FLAG_ARG(O_GPU, "gpu-utt-per-s", "R",
                "250: ds2 on one H100, an assumption, not a measurement",
                "ASSUMED consumer rate of one GPU, utterances/s"),
    DS_FLAG_ARG(O_GPU_S, "gpu-utt-seconds", "S", "12.3, LibriSpeech",
                "mean utterance duration at that rate"),
    DS_FLAG_SECTION("instead: a file to run on"),
    DS_FLAG_ARG(O_MAKE, "make", "OUT.h5", NULL,
                "write a float16 feature file of 161 features per frame with LibriSpeech's "
                "utterance lengths (mostly 12-17 s; random values) through dstrain's writer, and "
                "exit"),
    DS_FLAG_ARG(O_UTTS, "utterances", "N", "4000", "utterances for --make"),
    DS_FLAG_END};

static const ds_flag_cmd loader_cmd = {
    .name = PROG, .program = PROG,
    .usage = "[mpiexec -np N] " PROG " --data FILE.h5 [options]\n"
             PROG " --make OUT.h5 [--utterances N] [--seed S]",
    .about = "Drains the data loader of every rank (no model) and reports its rates.",
    .flags = loader_flags,
    .notes = "read/feat: bytes the process read (/proc/self/io rchar: page cache or disk) per byte "
             "of features delivered; disk/feat: bytes read from the block device (read_bytes), the "
             "same per byte of features. Both count the loader's whole run after the file was "
             "opened."};

/* 0: run; 1: --help done; 2: bad usage (said). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const char *const norms[] = {"utterance", "global", "none", NULL};
    *o = (bench_opts){.batch = 16, .epochs = 1, .norm = DS_NORM_UTTERANCE, .utterances = 4000,
                      .norm_name = "utterance", .seed = 1, .gpu_utt_per_s = 250,
                      .gpu_utt_seconds = 12.3};
    ds_flags fl;
    int c, bad = 0, k;
    long v = 0;
    if ((c = ds_flags_begin(&fl, &loader_cmd, argc, argv)) != DS_FLAGS_GO)
        return c == 0 ? 1 : 2;
    while (!bad && (c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_DATA: o->data = optarg; break;
        case O_BATCH: bad = ds_flags_int(&fl, 1, 1 << 20, &v); o->batch = (int)v; break;
        case O_EPOCHS: bad = ds_flags_int(&fl, 1, 1 << 20, &v); o->epochs = (int)v; break;
        case O_DEPTH: bad = ds_flags_int(&fl, 2, 1024, &v); o->depth = (int)v; break;
        case O_THREADS: bad = ds_flags_int(&fl, 1, 256, &v); o->threads = (int)v; break;
        case O_COLD: o->cold = 1; break;
        case O_MAKE: o->make = optarg; break;
        case O_UTTS: bad = ds_flags_int(&fl, 1, 1L << 30, &o->utterances); break;
        case O_SEED: bad = ds_flags_int(&fl, 0, LONG_MAX, &v); o->seed = (uint64_t)v; break;
        case O_AUG: o->spec_augment = 1; break;
        case O_GPU: bad = ds_flags_num(&fl, 1e-6, 1e9, &o->gpu_utt_per_s); break;
        case O_GPU_S: bad = ds_flags_num(&fl, 1e-6, 1e9, &o->gpu_utt_seconds); break;
        case O_NORM:
            if (!(bad = ds_flags_choice(&fl, norms, &k))) {
                o->norm_name = norms[k];
                bad = ds_feature_norm_parse(norms[k], &o->norm) != DS_OK;
            }
            break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if ((c = ds_flags_done(&fl, bad, argc, argv)) != 0)
        return c;
    if (!o->data && !o->make)
        return ds_flags_error(&fl, "--data FILE.h5 is required (or --make OUT.h5)");
    return 0;
}

/* ---- errors: every message names the program, the rank and the file ---- */

static void ds_error(const bench_opts *o, const char *call, ds_status st)
{
    fprintf(stderr, PROG ": rank %d: %s: %s failed: %s: %s\n", g_rank, o->data ? o->data : "-",
            call, ds_status_name(st), ds_status_last_error());
}

/* An MPI failure leaves the ranks unable to agree: end the job. */
static void mpi_failed(ds_world *w) __attribute__((noreturn));
static void mpi_failed(ds_world *w)
{
    char why[1100];
    snprintf(why, sizeof why, PROG ": %s", ds_status_last_error());
    ds_world_abort(w, why);
}

static void mpi_check(ds_world *w, int rc, const char *call)
{
    if (ds_world_check(rc, call) != DS_OK)
        mpi_failed(w);
}

/* 1 when every rank's ok is 1. */
static int all_ok(ds_world *w, int ok)
{
    int n = ok != 0;
    if (ds_world_allreduce_sum(w, &n, 1, MPI_INT, "MPI_Allreduce(ok)") != DS_OK)
        mpi_failed(w);
    return n == w->size;
}

/* ---- a LibriSpeech-length file (--make) ---- */

#define MAKE_MAX_FRAMES 1700   /* 17 s: dstrain bench --length-dist librispeech's limit */

/* LibriSpeech-like seconds as data/synthetic.c draws them (85% near 14 s,
 * 15% spread over 1.5-12 s), drawn again until the length fits. */
static int draw_librispeech_frames(ds_rng *r)
{
    for (int tries = 0; tries < 64; tries++) {
        double s = ds_rng_uniform(r) < 0.85 ? 14.0 + 1.6 * ds_rng_normal(r)
                                            : 1.5 + 10.5 * ds_rng_uniform(r);
        int t = (int)(s * 100);
        if (t >= 16 && t <= MAKE_MAX_FRAMES)
            return t;
    }
    return MAKE_MAX_FRAMES;
}

/* x [count] log1p-magnitude-like values in [0, 8), labels [n] in 1..28:
 * random, the loader's cost does not depend on them. */
static void random_utterance(ds_rng *r, float *x, size_t count, uint8_t *labels, int n)
{
    for (size_t k = 0; k < count; k++)
        x[k] = (float)(ds_rng_next(r) >> 40) * (8.0f / 16777216.0f);
    for (int k = 0; k < n; k++)
        labels[k] = (uint8_t)(1 + ds_rng_next(r) % 28);
}

/* o->utterances utterances into o->make through dstrain's writer (its chunk
 * layout), float16, the default 161 log-spectrogram features. */
static int make_file(const bench_opts *o)
{
    const ds_feature_cfg feat = ds_feature_defaults();
    const int f = ds_feature_dim(&feat), max_labels = MAKE_MAX_FRAMES / 8;
    float *x = malloc((size_t)MAKE_MAX_FRAMES * f * sizeof *x);   /* [frames][f] */
    uint8_t labels[MAKE_MAX_FRAMES / 8];
    ds_dataset_writer *w = NULL;
    ds_status st = x ? ds_dataset_writer_create(o->make, &feat, DS_F16, &w) : DS_ERR_MEM;
    ds_rng r;
    ds_rng_seed(&r, o->seed);
    for (long i = 0; st == DS_OK && i < o->utterances; i++) {
        const int t = draw_librispeech_frames(&r);
        const int n = t / 10 < max_labels ? t / 10 : max_labels;
        char id[64];
        snprintf(id, sizeof id, "bench-%ld", i);
        random_utterance(&r, x, (size_t)t * f, labels, n);
        st = ds_dataset_writer_add(w, id, "", labels, n, x, t);
    }
    if (st == DS_OK)
        st = ds_dataset_writer_close(w);
    else
        ds_dataset_writer_abort(w);
    free(x);
    if (st != DS_OK) {
        fprintf(stderr, PROG ": %s: making the file failed: %s\n", o->make,
                x ? ds_status_last_error() : "out of memory");
        return 0;
    }
    printf("# " PROG ": wrote %s: %ld utterances, LibriSpeech lengths, float16, %d features\n",
           o->make, o->utterances, f);
    return 1;
}

/* ---- read counters and the page cache ---- */

/* The process's rchar (bytes read by read/pread: page cache or disk) and
 * read_bytes (bytes fetched from the block device) from /proc/self/io, all
 * threads together; -1 where unknown (no task I/O accounting). */
static void read_io(double *rchar, double *read_bytes)
{
    *rchar = *read_bytes = -1;
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return;
    char key[64];
    unsigned long long v;
    while (fscanf(f, "%63[^:]: %llu\n", key, &v) == 2) {
        if (strcmp(key, "rchar") == 0)
            *rchar = (double)v;
        else if (strcmp(key, "read_bytes") == 0)
            *read_bytes = (double)v;
    }
    fclose(f);
}

/* CPU seconds (user + system) the process has used, all threads. */
static double cpu_seconds(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0)
        return 0;
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec
           + (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

/* Drops path's clean pages from the page cache (no root needed). */
static int evict(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, PROG ": rank %d: %s: open for --cold: %s\n", g_rank, path, strerror(errno));
        return 0;
    }
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc) {
        fprintf(stderr, PROG ": rank %d: %s: posix_fadvise(DONTNEED): %s\n", g_rank, path,
                strerror(rc));
        return 0;
    }
    return 1;
}

/* ---- the measurement ---- */

typedef struct {
    ds_dataset *d;
    ds_sampler *s;
    int max_frames, max_labels;
    double frames_total;   /* of the file, for its mean utterance length */
} bench_data;

static int open_data(const bench_opts *o, int ranks, bench_data *b)
{
    ds_status st = ds_dataset_open(o->data, &b->d);
    if (st != DS_OK) {
        ds_error(o, "ds_dataset_open", st);
        return 0;
    }
    const ds_dataset *d = b->d;
    long *utts = malloc((size_t)d->n * sizeof *utts);
    int *frames = malloc((size_t)d->n * sizeof *frames);
    if (!utts || !frames) {
        fprintf(stderr, PROG ": rank %d: %s: out of memory for the index of %ld utterances\n",
                g_rank, o->data, d->n);
        free(utts);
        free(frames);
        return 0;
    }
    for (long i = 0; i < d->n; i++) {
        utts[i] = i;
        frames[i] = d->frames[i];
        b->frames_total += d->frames[i];
        b->max_frames = d->frames[i] > b->max_frames ? d->frames[i] : b->max_frames;
        b->max_labels = d->label_length[i] > b->max_labels ? d->label_length[i] : b->max_labels;
    }
    st = ds_sampler_create(utts, frames, d->n, o->batch, ranks, o->seed, &b->s);
    free(utts);
    free(frames);
    if (st != DS_OK) {
        ds_error(o, "ds_sampler_create", st);
        return 0;
    }
    return 1;
}

/* Drains o->epochs epochs of rank's loader into m [M_COUNT]; 0 on failure. */
static int drain(const bench_opts *o, const bench_data *b, int rank, double *m)
{
    const ds_dataset *d = b->d;
    const double disk_row = (double)d->n_features * (double)ds_dtype_size(d->feature_dtype);
    ds_loader_cfg lc = {.data = b->d, .sampler = b->s, .rank = rank, .batch = o->batch,
                        .max_frames = b->max_frames, .max_labels = b->max_labels,
                        .norm = o->norm, .seed = o->seed, .depth = o->depth,
                        .threads = o->threads};
    if (o->spec_augment)
        lc.aug = (ds_specaug){2, 27, 2, 40};   /* dstrain train --spec-augment */
    double seconds = 0, rc0, rb0, rc1, rb1;
    for (int e = 0; e < o->epochs; e++) {
        lc.epoch = e;
        if (o->cold && !evict(o->data))
            return 0;
        read_io(&rc0, &rb0);
        const double t0 = MPI_Wtime(), c0 = cpu_seconds();
        ds_loader *l = NULL;
        ds_status st = ds_loader_start(&lc, &l);
        if (st != DS_OK) {
            ds_error(o, "ds_loader_start", st);
            return 0;
        }
        const ds_batch *bt;
        while ((st = ds_loader_next(l, &bt)) == DS_OK && bt) {
            double real = 0;
            for (int j = 0; j < bt->n; j++)
                real += bt->lengths[j];
            m[M_UTTS] += bt->n;
            m[M_BATCHES] += 1;
            m[M_FRAMES] += real;
            m[M_PADDED] += (double)bt->n * bt->t;
            m[M_DISK_BYTES] += real * disk_row;
        }
        ds_loader_stop(l);
        seconds += MPI_Wtime() - t0;
        m[M_CPU] += cpu_seconds() - c0;
        read_io(&rc1, &rb1);
        m[M_RCHAR] = rc0 < 0 || m[M_RCHAR] < 0 ? -1 : m[M_RCHAR] + rc1 - rc0;
        m[M_READ_BYTES] = rb0 < 0 || m[M_READ_BYTES] < 0 ? -1 : m[M_READ_BYTES] + rb1 - rb0;
        if (st != DS_OK) {
            ds_error(o, "ds_loader_next", st);
            return 0;
        }
    }
    m[M_SECONDS] = seconds;   /* the loaders' time, not the evictions' */
    return 1;
}

/* ---- the report (rank 0) ---- */

typedef struct {
    double utt_s, batch_s, audio_s, batch_mb_s, disk_mb_s, x_utt, x_audio;
    double read_x, disk_x;   /* bytes read (rchar, read_bytes) per feature byte; -1 unknown */
} rates;

/* m over seconds; consumers: GPUs the rates are compared with. */
static rates rates_of(const bench_opts *o, const ds_dataset *d, const double *m, double seconds,
                      int consumers)
{
    rates r = {0};
    if (!(seconds > 0))
        return r;
    const double gpu_utt = o->gpu_utt_per_s * consumers;
    const double gpu_audio = gpu_utt * o->gpu_utt_seconds;
    r.utt_s = m[M_UTTS] / seconds;
    r.batch_s = m[M_BATCHES] / seconds;
    r.audio_s = m[M_FRAMES] * d->feat.window_stride_s / seconds;
    r.batch_mb_s = m[M_PADDED] * d->n_features * 4.0 / seconds / 1e6;
    r.disk_mb_s = m[M_DISK_BYTES] / seconds / 1e6;
    r.x_utt = r.utt_s / gpu_utt;
    r.x_audio = r.audio_s / gpu_audio;
    r.read_x = m[M_RCHAR] >= 0 && m[M_DISK_BYTES] > 0 ? m[M_RCHAR] / m[M_DISK_BYTES] : -1;
    r.disk_x = m[M_READ_BYTES] >= 0 && m[M_DISK_BYTES] > 0 ? m[M_READ_BYTES] / m[M_DISK_BYTES] : -1;
    return r;
}

static void print_row(const char *label, const double *m, double seconds, const rates *r)
{
    printf("%6s %9.0f %8.0f %11.0f %8.3f %9.1f %8.2f %8.1f %10.1f %9.1f %8.2f %8.2f %9.3f %9.3f\n",
           label, m[M_UTTS], m[M_BATCHES], m[M_FRAMES], seconds, r->utt_s, r->batch_s, r->audio_s,
           r->batch_mb_s, r->disk_mb_s, r->x_utt, r->x_audio, r->read_x, r->disk_x);
}

/* all [ranks][M_COUNT], sum [M_COUNT] over ranks, slowest: the longest time. */
static void report(const bench_opts *o, const bench_data *b, int ranks, const double *all,
                   const double *sum, double slowest)
{
    const ds_dataset *d = b->d;
    const double stride = d->feat.window_stride_s;
    const double mean_s = d->n ? b->frames_total * stride / (double)d->n : 0;
    double load[3] = {0, 0, 0};
    int n_load = getloadavg(load, 3);
    printf("# " PROG ": %s: %ld utterances, %.2f h, mean %.2f s, longest %d frames; %d %s features, "
           "%s on disk\n", d->path, d->n, b->frames_total * stride / 3600, mean_s, b->max_frames,
           d->n_features, ds_feature_type_name(d->feat.type), ds_dtype_name(d->feature_dtype));
    char h5[160];
    printf("# ranks %d, batch %d per rank, epochs %d, norm %s, SpecAugment %s, depth %d, "
           "threads %d, %s, seed %llu\n", ranks, o->batch, o->epochs, o->norm_name,
           o->spec_augment ? "on" : "off", o->depth ? o->depth : DS_LOADER_DEFAULT_DEPTH,
           o->threads ? o->threads : DS_LOADER_DEFAULT_THREADS,
           o->cold ? "cold (file evicted before each epoch)" : "warm (page cache as found)",
           (unsigned long long)o->seed);
    printf("# %s\n", ds_h5_thread_mode(h5, sizeof h5));
    if (n_load == 3)
        printf("# %ld cores online, load average %.2f %.2f %.2f (at the end of the run)\n",
               sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    else
        printf("# %ld cores online, load average unknown\n", sysconf(_SC_NPROCESSORS_ONLN));
    printf("#\n");
    printf("#%5s %9s %8s %11s %8s %9s %8s %8s %10s %9s %8s %8s %9s %9s\n", "rank", "utts",
           "batches", "frames", "time", "utt/s", "batch/s", "audio", "batchMB/s", "diskMB/s",
           "x_utt", "x_audio", "read/feat", "disk/feat");
    printf("#%5s %9s %8s %11s %8s %9s %8s %8s %10s %9s %8s %8s %9s %9s\n", "", "(count)",
           "(count)", "(count)", "(s)", "(1/s)", "(1/s)", "(s/s)", "(MB/s)", "(MB/s)", "(x)", "(x)",
           "(x)", "(x)");
    double min_x_utt = INFINITY, min_x_audio = INFINITY;
    int idle = 0;   /* ranks the sampler gave nothing: left out of the minimum */
    for (int r = 0; r < ranks; r++) {
        const double *m = all + (size_t)r * M_COUNT;
        rates x = rates_of(o, d, m, m[M_SECONDS], 1);
        char label[16];
        snprintf(label, sizeof label, "%d", r);
        print_row(label, m, m[M_SECONDS], &x);
        if (m[M_UTTS] == 0) {
            idle++;
            continue;
        }
        min_x_utt = fmin(min_x_utt, x.x_utt);
        min_x_audio = fmin(min_x_audio, x.x_audio);
    }
    rates t = rates_of(o, d, sum, slowest, ranks);
    print_row("total", sum, slowest, &t);
    printf("#\n");
    printf("# batchMB/s: float32 batches delivered (utterances x padded frames x %d x 4 B); "
           "diskMB/s: %s rows read (real frames x %d x %zu B); MB = 10^6 B\n",
           d->n_features, ds_dtype_name(d->feature_dtype), d->n_features,
           ds_dtype_size(d->feature_dtype));
    printf("# total: counts summed over ranks, time of the slowest rank, rates = sums / that time\n");
    printf("# read/feat: bytes the process read (rchar) per feature byte delivered; disk/feat: bytes "
           "from the block device (read_bytes) per feature byte; -1: not accounted here\n");
    printf("# assumed consumer (an ASSUMPTION, not a measurement): DeepSpeech2 (ds2 preset) training "
           "on one H100 per rank at %g utterances/s of LibriSpeech (mean %g s) = %g s of audio/s "
           "(--gpu-utt-per-s, --gpu-utt-seconds)\n",
           o->gpu_utt_per_s, o->gpu_utt_seconds, o->gpu_utt_per_s * o->gpu_utt_seconds);
    printf("# headroom = loader rate / assumed rate: x_utt by utterances, x_audio by seconds "
           "of audio (this file's mean is %.2f s, so x_audio is the fairer one)\n", mean_s);
    for (int r = 0; r < ranks; r++) {
        const double *m = all + (size_t)r * M_COUNT;
        printf("# rank %d: %.2f CPU s (user + system, all its threads) in %.2f s: %.0f%% of one "
               "core; %.0f utterances per CPU second\n", r, m[M_CPU], m[M_SECONDS],
               m[M_SECONDS] > 0 ? 100 * m[M_CPU] / m[M_SECONDS] : 0,
               m[M_CPU] > 0 ? m[M_UTTS] / m[M_CPU] : 0);
    }
    if (idle)
        printf("# %d rank(s) got no utterance (%ld utterances, %d ranks x batch %d): left out of "
               "the slowest rank's headroom\n", idle, d->n, ranks, o->batch);
    if (idle < ranks)
        printf("# slowest rank's headroom: %.2fx by utterances, %.2fx by audio -> at the assumed "
               "rate the loader %s\n", min_x_utt, min_x_audio,
               min_x_audio >= 1 ? "keeps up with the GPU" : "would starve the GPU");
}

int main(int argc, char **argv)
{
    ds_world w;   /* no GPU, no watchdog: the loader's waits are its own */
    ds_status st = ds_world_init(&w, 0, 0);
    if (st != DS_OK) {
        fprintf(stderr, PROG ": ds_world_init failed: %s: %s\n", ds_status_name(st),
                ds_status_last_error());
        ds_world_finalize(&w);
        return 1;
    }
    g_rank = w.rank;
    const int ranks = w.size;

    bench_opts o;
    ds_flags_quiet(g_rank != 0);
    int rc = parse_args(argc, argv, &o);   /* the same on every rank */
    ds_flags_quiet(0);
    if (rc) {
        ds_world_finalize(&w);
        return rc == 1 ? 0 : 2;
    }
    if (o.make) {   /* rank 0 writes; the others wait */
        int made = all_ok(&w, g_rank != 0 || make_file(&o));
        ds_world_finalize(&w);
        return made ? 0 : 1;
    }

    bench_data b = {0};
    double m[M_COUNT] = {0}, sum[M_COUNT] = {0}, slowest = 0, *all = NULL;
    int ok = open_data(&o, ranks, &b);
    if (g_rank == 0 && !(all = calloc((size_t)ranks * M_COUNT, sizeof *all))) {
        fprintf(stderr, PROG ": rank 0: %s: out of memory for %d ranks' results\n", o.data, ranks);
        ok = 0;
    }
    if (all_ok(&w, ok)) {
        mpi_check(&w, MPI_Barrier(w.comm), "MPI_Barrier");   /* start together */
        ok = drain(&o, &b, g_rank, m);
        if (all_ok(&w, ok)) {
            mpi_check(&w, MPI_Gather(m, M_COUNT, MPI_DOUBLE, all, M_COUNT, MPI_DOUBLE, 0, w.comm),
                      "MPI_Gather");
            mpi_check(&w, MPI_Reduce(m, sum, M_COUNT, MPI_DOUBLE, MPI_SUM, 0, w.comm),
                      "MPI_Reduce(sum)");
            mpi_check(&w, MPI_Reduce(&m[M_SECONDS], &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, w.comm),
                      "MPI_Reduce(max)");
            if (g_rank == 0)
                report(&o, &b, ranks, all, sum, slowest);
        } else {
            ok = 0;
        }
    } else {
        ok = 0;
    }
    if (!ok && g_rank == 0)
        fprintf(stderr, PROG ": %s: failed (see the messages above)\n", o.data);
    free(all);
    ds_sampler_destroy(b.s);
    ds_dataset_close(b.d);
    if (fflush(stdout) != 0) {
        fprintf(stderr, PROG ": rank %d: writing the report: %s\n", g_rank, strerror(errno));
        ok = 0;
    }
    ds_world_finalize(&w);
    return ok ? 0 : 1;
}
