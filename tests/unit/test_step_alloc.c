/* test_step_alloc.c - after its first step a training run allocates nothing,
 * on the heap or in the backend, and a step never makes the host wait for a
 * read from the backend.
 *
 * Heap allocations are counted by interposing malloc and its relatives in
 * this executable (glibc's __libc_* entry points do the work), except those
 * a library makes inside its own call, which are its business, not
 * dstrain's: OpenBLAS (on some CPUs its threaded GEMM takes a scratch buffer
 * from malloc when its own pool is busy) and NVIDIA's driver, cuDNN,
 * cuBLAS(Lt), NCCL and CUPTI (vendor(), below). Which library asked is read
 * from the call stack: the first frame outside the C and C++ runtimes. A
 * step that does allocate prints where from. Backend
 * allocations and blocking reads by the backend's counters. Two whole runs
 * of `ds_train` (printing the batch CER, logging every step) differ only in
 * their number of steps: if anything were allocated per step, the longer run
 * would count more. Then single steps are launched by hand, of a model of
 * each family (tiny, jasper-small, ds1-small), and each must leave both counters, the blocking-read counter and the algorithm searches
 * (cuDNN's Find, start-up only) unchanged.
 *
 * usage: test_step_alloc [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepper.h"
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

/* Where a failing step's allocations come from: while `recording`, each
 * counted allocation's call stack is kept (static storage: the recorder
 * itself must not allocate), and report_sources() prints them grouped by the
 * library that called malloc and the nearest dstrain function above it. */
enum { REC_MAX = 4096, REC_DEPTH = 24 };
static void *rec_stack[REC_MAX][REC_DEPTH];
static int rec_depth[REC_MAX];
static atomic_int rec_n;
static atomic_int recording;
static __thread int in_hook;

static const char *base_name(const char *path)
{
    const char *b = path ? strrchr(path, '/') : NULL;
    return b ? b + 1 : path ? path : "?";
}

static int starts_with_any(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(s, list[i], strlen(list[i])) == 0)
            return 1;
    return 0;
}

/* Whether a frame lies in the C or C++ runtime (not who asked). */
static int in_runtime(const char *lib)
{
    static const char *const rt[] = {"libc.so", "libstdc++", "libgcc_s", "ld-linux", "libm.so"};
    return starts_with_any(lib, rt, sizeof rt / sizeof *rt);
}

/* NVIDIA's driver and libraries allocate host memory inside their own calls
 * (on an H100 with cuDNN 9.14, about 1,200 a step of the tiny model: most in
 * libcuda under cudnnRNNBackwardData, tens in libcudnn_graph per convolution
 * and RNN call); that is theirs, as OpenBLAS's scratch is. */
static int vendor(const char *lib)
{
    static const char *const v[] = {"libcuda.so", "libcudnn", "libcublas", "libnccl",
                                    "libcupti", "libnvrtc", "libnvJitLink", "libcudart"};
    return starts_with_any(lib, v, sizeof v / sizeof *v);
}

static atomic_long vendor_allocs;

/* The library that asked for an allocation: the first frame of stack (which
 * starts at malloc's caller) outside the runtimes; NULL when that frame is
 * dstrain's. */
static const char *asking_library(void *const *stack, int depth)
{
    static Dl_info self;
    if (!self.dli_fbase)
        dladdr((void *)asking_library, &self);
    for (int d = 0; d < depth; d++) {
        Dl_info di;
        if (!dladdr(stack[d], &di))
            continue;
        if (di.dli_fbase == self.dli_fbase)
            return NULL;
        const char *b = base_name(di.dli_fname);
        if (!in_runtime(b))
            return b;
    }
    return NULL;
}

/* Counts an allocation unless OpenBLAS's code or NVIDIA's asked for it. */
static void count(void *caller)
{
    uintptr_t at = (uintptr_t)caller;
    if (in_hook || (at >= blas_lo && at < blas_hi))
        return;
    in_hook = 1;   /* backtrace and dladdr may allocate: not counted */
    void *frames[REC_DEPTH];
    const int all = backtrace(frames, REC_DEPTH);
    /* the stack from malloc's caller on: the hooks may or may not have
     * frames of their own (inlining), so find the caller's return address */
    int from = 0;
    while (from < all && frames[from] != caller)
        from++;
    if (from == all)
        from = 0;
    void *const *stack = frames + from;
    const int depth = all - from;
    const char *lib = asking_library(stack, depth);
    in_hook = 0;
    if (lib && vendor(lib)) {
        atomic_fetch_add(&vendor_allocs, 1);
        return;
    }
    atomic_fetch_add(&heap_allocs, 1);
    if (atomic_load(&recording)) {
        const int k = atomic_fetch_add(&rec_n, 1);
        if (k < REC_MAX) {
            memcpy(rec_stack[k], stack, (size_t)depth * sizeof *stack);
            rec_depth[k] = depth;
        }
    }
}

typedef struct {
    char lib[48], fn[80];
    int count;
} source;

static void report_sources(void)
{
    static source src[256];
    int ns = 0;
    Dl_info self;
    dladdr((void *)report_sources, &self);
    const int n = atomic_load(&rec_n) < REC_MAX ? atomic_load(&rec_n) : REC_MAX;
    for (int k = 0; k < n; k++) {
        const char *lib = "(dstrain)", *fn = "(no dstrain frame)";
        char fnbuf[80];
        int lib_found = 0;
        for (int d = 0; d < rec_depth[k]; d++) {   /* from malloc's caller */
            Dl_info di;
            if (!dladdr(rec_stack[k][d], &di))
                continue;
            const char *b = base_name(di.dli_fname);
            if (!lib_found && !in_runtime(b) && di.dli_fbase != self.dli_fbase) {
                lib = b;
                lib_found = 1;
            }
            if (di.dli_fbase == self.dli_fbase) {   /* the nearest dstrain function */
                if (di.dli_sname)
                    fn = di.dli_sname;
                else {
                    snprintf(fnbuf, sizeof fnbuf, "+0x%lx",
                             (unsigned long)((uintptr_t)rec_stack[k][d] - (uintptr_t)di.dli_fbase));
                    fn = fnbuf;
                }
                break;
            }
        }
        int i = 0;
        while (i < ns && !(strncmp(src[i].lib, lib, sizeof src[i].lib - 1) == 0 &&
                           strncmp(src[i].fn, fn, sizeof src[i].fn - 1) == 0))
            i++;
        if (i == ns) {
            if (ns == (int)(sizeof src / sizeof *src))
                continue;
            snprintf(src[ns].lib, sizeof src[ns].lib, "%s", lib);
            snprintf(src[ns].fn, sizeof src[ns].fn, "%s", fn);
            src[ns++].count = 0;
        }
        src[i].count++;
    }
    for (int a = 0; a < ns; a++)   /* most first */
        for (int b = a + 1; b < ns; b++)
            if (src[b].count > src[a].count) {
                source t = src[a];
                src[a] = src[b];
                src[b] = t;
            }
    printf("  where the step's %d recorded allocations come from (calling library, dstrain "
           "function):\n", n);
    for (int a = 0; a < ns && a < 30; a++)
        printf("  %6d  %-40s %s\n", src[a].count, src[a].lib, src[a].fn);
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

/* Single steps of preset's model by hand: nothing allocated, nothing read
 * back, no algorithm searched, inside the step. Returns 0, or (T_OK) the
 * test's exit status where a call failed. */
static int single_steps(const char *preset)
{
    ds_ctx *ctx;
    ds_model_cfg cfg;
    T_OK(ds_config_preset(preset, &cfg));
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
        const long h0 = atomic_load(&heap_allocs), v0 = atomic_load(&vendor_allocs);
        atomic_store(&rec_n, 0);
        atomic_store(&recording, 1);
        T_OK(ds_stepper_launch(s, &bt, 1e-4));
        atomic_store(&recording, 0);
        const long h1 = atomic_load(&heap_allocs), v1 = atomic_load(&vendor_allocs);
        be->counters(ctx, &c1);
        ds_step_out out;
        T_OK(ds_stepper_collect(s, &out));
        printf("%s step %d: loss %.4f |g| %.3f; inside the step: %ld heap, %ld backend allocations, "
               "%ld blocking reads (and %ld heap allocations inside NVIDIA's calls)\n", preset, k + 1,
               out.loss, out.opt.grad_norm, h1 - h0, c1.allocs - c0.allocs,
               c1.to_host - c0.to_host, v1 - v0);
        T_CHECK(h1 == h0, "%s step %d allocated %ld times on the heap", preset, k + 1, h1 - h0);
        if (h1 != h0 && k < 2)
            report_sources();
        T_CHECK(c1.allocs == c0.allocs, "%s step %d allocated in the backend", preset, k + 1);
        T_CHECK(c1.to_host == c0.to_host, "%s step %d made %ld blocking reads", preset, k + 1, c1.to_host - c0.to_host);
        T_CHECK(c1.searches == c0.searches, "%s step %d made %ld algorithm searches", preset, k + 1,
                c1.searches - c0.searches);
        T_CHECK(out.loss > 0 && out.opt.grad_norm > 0 && out.opt.steps == k + 1,
                "%s step %d: loss %g, norm %g, %ld updates", preset, k + 1, out.loss, out.opt.grad_norm, out.opt.steps);
    }
    ds_batch_free(&bt);
    ds_stepper_destroy(s);
    ds_optim_destroy(o);
    ds_model_destroy(m);
    be->ctx_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    dl_iterate_phdr(note_blas, NULL);
    {   /* backtrace's first call loads libgcc_s: before anything is counted */
        void *warm_bt[4];
        backtrace(warm_bt, 4);
    }
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

    /* single steps by hand, a model of each family */
    static const char *const presets[] = {"tiny", "jasper-small", "ds1-small"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const int rc = single_steps(presets[i]);
        if (rc)
            return rc;
    }
    return t_finish("test_step_alloc");
}
