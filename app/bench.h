/* bench.h - `dstrain bench`: training steps timed per configuration (batch,
 * precision, mode), with what the model computes (FLOPs), what it holds
 * (memory) and where the time goes (layers; kernels on the GPU). */
#ifndef DS_BENCH_H
#define DS_BENCH_H

#include <stdio.h>

#include "synthetic.h"
#include "train.h"

typedef enum { DS_BENCH_TRAIN, DS_BENCH_FORWARD } ds_bench_mode;
typedef enum { DS_PROFILE_NONE, DS_PROFILE_LAYERS, DS_PROFILE_KERNELS } ds_bench_profile;

/* One configuration. run holds the model, device, precision, batch (per
 * rank), seed, data (train_path NULL: synthetic), ranks and compute options. */
typedef struct {
    ds_train_opts run;
    ds_bench_mode mode;
    int warmup, steps;            /* warmup >= 1: it starts the clock */
    ds_length_dist dist;          /* synthetic lengths */
    ds_bench_profile profile;     /* kernels also times the layers */
    const char *trace_path;       /* --profile: Chrome/Perfetto trace; NULL none */
    int measure_peak;             /* ask the backend for its peak FLOP/s */
} ds_bench_cfg;

#define DS_BENCH_LAYERS 96
#define DS_BENCH_PHASES 16
#define DS_BENCH_KERNELS 64

/* A layer's (ms[0] forward, ms[1] backward) or a phase's (ms[0]) time,
 * the mean per timed step. */
typedef struct {
    char name[48];
    double ms[2];
} ds_bench_time;

typedef struct {
    ds_status status;             /* DS_OK; DS_ERR_MEM: did not fit; else failed */
    char error[512];
    int ranks, global_batch;
    int n_steps;
    double *step_ms;              /* [n_steps] rank 0's timed steps (wall clock) */
    double frames_per_step;       /* input frames of the global batch, mean over timed steps */
    double pad_share;             /* of the frames rank 0's batches hold (padded to a batch's
                                   * longest, or a bucket), the share that is padding; mean */
    double audio_s;               /* seconds of audio in the timed steps, all ranks */
    double flops_per_step;        /* model FLOPs of the global batch (ds_bench_flops), mean */
    double host_enqueue_ms;       /* the host's time to queue one step (train: the stepper's
                                   * launch, upload included; forward: the passes up to the
                                   * loss's read), mean per timed step, whether or not the
                                   * device was busy meanwhile. A synchronous backend (the
                                   * CPU) computes while it queues: there it is the work. */
    double main_cpu_ms;           /* the main thread's CPU time per timed step */
    long kernel_launches;         /* kernels launched in the timed steps (--profile kernels,
                                   * every stream of the process); -1: not counted */
    double kernel_ms;             /* their summed time; -1: not measured */
    size_t mem_bytes;             /* backend memory held after the timed steps: the run's peak,
                                   * as nothing is allocated after start-up */
    double peak_flops;            /* per device; 0: not measured */
    char peak_how[160];
    ds_bench_time layers[DS_BENCH_LAYERS];
    int n_layers;
    ds_bench_time phases[DS_BENCH_PHASES];
    int n_phases;
    ds_kernel_stat kernels[DS_BENCH_KERNELS];
    int n_kernels;
    int graphs_on;                /* --cuda-graphs captured steps (train mode, one rank) */
    ds_step_graph_stats graphs;   /* their counts over the whole run, warm-up included */
    ds_choice *choices;           /* [n_choices] the backend's start-up choices (the GPU's
                                   * convolution algorithms; none on the CPU) */
    int n_choices;
} ds_bench_result;

/* Runs c and fills res (free with ds_bench_result_free). A configuration
 * that does not fit returns DS_OK with res->status DS_ERR_MEM; other
 * failures are returned. Collective under MPI. */
ds_status ds_bench_run(const ds_bench_cfg *c, ds_bench_result *res);
void ds_bench_result_free(ds_bench_result *res);

/* Model FLOPs of one step on utterances of lengths [n] input frames (real
 * frames only, padding excluded): conv 2*co*ho*wo*ci*kh*kw per utterance,
 * recurrent 2*G*H*(in+H) per frame and direction, linear 2*in*out per frame
 * (FC layers before the RNN included); backward twice forward, except the
 * first layer on the features, conv or FC (weight gradient only). */
double ds_bench_flops(const ds_model_cfg *cfg, const int *lengths, int n, ds_bench_mode mode);

/* Statistics of x [n] (n >= 1): median, mean and the 95% confidence
 * interval of the mean (Student's t). */
typedef struct {
    double median, mean, lo, hi;
} ds_bench_stats;
ds_bench_stats ds_bench_stats_of(const double *x, int n);

#endif
