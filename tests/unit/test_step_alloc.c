/* test_step_alloc.c - after its first step a training run allocates nothing,
 * on the heap or in the backend, and a step never makes the host wait for a
 * read from the backend.
 *
 * Heap allocations are counted by interposing malloc and its relatives in
 * this executable (glibc's __libc_* entry points do the work), except those
 * OpenBLAS makes itself: on some CPUs its threaded GEMM takes a scratch
 * buffer from malloc when its own pool is busy, which is the library's
 * business, not dstrain's. Backend
 * allocations and blocking reads by the backend's counters. Two whole runs
 * of `ds_train` (printing the batch CER, logging every step) differ only in
 * their number of steps: if anything were allocated per step, the longer run
 * would count more. Then single steps are launched by hand and each must
 * leave both counters, the blocking-read counter and the algorithm searches
 * (cuDNN's Find, start-up only) unchanged.
 *
 * usage: test_step_alloc [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step.h"
#include "synthetic.h"
#include "testutil.h"
#include "train.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_long heap_allocs;

/* OpenBLAS's loaded address range, found once before anything is counted. */
static uintptr_t blas_lo, blas_hi;

static int note_blas(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libopenblas"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!blas_lo || lo < blas_lo)
            blas_lo = lo;
        if (hi > blas_hi)
            blas_hi = hi;
    }
    return 1;
}

/* Counts an allocation unless OpenBLAS's code asked for it. */
static void count(void *caller)
{
    uintptr_t at = (uintptr_t)caller;
    if (!(at >= blas_lo && at < blas_hi))
        atomic_fetch_add(&heap_allocs, 1);
}

void *malloc(size_t n)
{
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    count(__builtin_return_address(0));
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    count(__builtin_return_address(0));
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    count(__builtin_return_address(0));
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12;   /* ENOMEM */
}

static const ds_backend *be;

typedef struct {
    long heap, backend;
} counts;

static counts now(void)
{
    ds_backend_counters c;
    be->counters(NULL, &c);
    return (counts){atomic_load(&heap_allocs), c.allocs};
}

/* A whole run of steps steps; returns what it allocated. */
static counts run(long steps, ds_status *st)
{
    ds_train_opts o = {.device = be->name, .precision = DS_F32, .batch = 4, .steps = steps, .seed = 3,
                       .optim = ds_optim_defaults(), .log_path = "/dev/null", .print_every = 2,
                       .synthetic_utts = 1024, .max_frames = 120, .bucket_mb = 25};
    *st = ds_config_preset("tiny", &o.model);
    ds_train_result res;
    counts before = now();
    if (*st == DS_OK)
        *st = ds_train(&o, &res);
    counts after = now();
    return (counts){after.heap - before.heap, after.backend - before.backend};
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    dl_iterate_phdr(note_blas, NULL);
    T_CHECK(blas_hi > blas_lo, "OpenBLAS's code was not found among the loaded objects");
    ds_status st;
    counts warm = run(2, &st);   /* first-use costs of the libraries, once */
    T_OK(st);
    counts a = run(4, &st);
    T_OK(st);
    counts b = run(16, &st);
    T_OK(st);
    printf("whole runs: 4 steps %ld heap + %ld backend allocations, 16 steps %ld + %ld (warm-up %ld + %ld)\n",
           a.heap, a.backend, b.heap, b.backend, warm.heap, warm.backend);
    T_CHECK(a.heap == b.heap, "heap allocations grow with the steps: %ld for 4, %ld for 16", a.heap, b.heap);
    T_CHECK(a.backend == b.backend, "backend allocations grow with the steps: %ld for 4, %ld for 16",
            a.backend, b.backend);

    /* single steps by hand: nothing allocated, nothing read back, inside the step */
    ds_ctx *ctx;
    ds_model_cfg cfg;
    T_OK(ds_config_preset("tiny", &cfg));
    T_OK(be->ctx_create(0, NULL, &ctx));
    const ds_model_limits lim = {.batch = 4, .frames = 120, .label_len = ds_synthetic_max_labels(&cfg, 120)};
    ds_model *m;
    ds_optim *o;
    ds_stepper *s;
    ds_batch bt;
    ds_rng rng;
    ds_rng_seed(&rng, 5);
    const ds_optim_cfg oc = ds_optim_defaults();
    T_OK(ds_model_create(&cfg, be, ctx, DS_F32, &lim, &m));
    T_OK(ds_model_init_params(m, 1));
    T_OK(ds_model_optim_create(m, &oc, &o));
    T_OK(ds_stepper_create(m, o, NULL, &s));
    T_OK(ds_batch_alloc(&bt, 4, 120, cfg.n_features, 4 * lim.label_len));
    for (int k = 0; k < 6; k++) {
        T_OK(ds_synthetic_batch(&rng, &cfg, 4, 120, &bt));
        ds_backend_counters c0, c1;
        be->counters(ctx, &c0);
        const long h0 = atomic_load(&heap_allocs);
        T_OK(ds_stepper_launch(s, &bt, 1e-4));
        const long h1 = atomic_load(&heap_allocs);
        be->counters(ctx, &c1);
        ds_step_out out;
        T_OK(ds_stepper_collect(s, &out));
        printf("step %d: loss %.4f |g| %.3f; inside the step: %ld heap, %ld backend allocations, "
               "%ld blocking reads\n", k + 1, out.loss, out.opt.grad_norm, h1 - h0,
               c1.allocs - c0.allocs, c1.to_host - c0.to_host);
        T_CHECK(h1 == h0, "step %d allocated %ld times on the heap", k + 1, h1 - h0);
        T_CHECK(c1.allocs == c0.allocs, "step %d allocated in the backend", k + 1);
        T_CHECK(c1.to_host == c0.to_host, "step %d made %ld blocking reads", k + 1, c1.to_host - c0.to_host);
        T_CHECK(c1.searches == c0.searches, "step %d made %ld algorithm searches", k + 1,
                c1.searches - c0.searches);
        T_CHECK(out.loss > 0 && out.opt.grad_norm > 0 && out.opt.steps == k + 1,
                "step %d: loss %g, norm %g, %ld updates", k + 1, out.loss, out.opt.grad_norm, out.opt.steps);
    }
    ds_batch_free(&bt);
    ds_stepper_destroy(s);
    ds_optim_destroy(o);
    ds_model_destroy(m);
    be->ctx_destroy(ctx);
    return t_finish("test_step_alloc");
}
