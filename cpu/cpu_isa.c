/* cpu_isa.c - choosing the instruction set of the CPU ops (cpu_isa.h). The
 * tables exist where CMake built them (DS_CPU_HAVE_AVX512, _AVX2, _BASELINE,
 * _NEON); what the host runs is asked of the CPU (x86-64: the compiler's
 * cpuid model, which also checks the OS saves the wide registers). */
#include "cpu_isa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[DS_ISA_COUNT] = {"baseline", "avx2", "avx512", "neon"};

/* The tables of each set: float32 and float64 (NULL where not built). */
#ifdef DS_CPU_HAVE_AVX512
extern const ds_ops ds_cpu_ops_f32_avx512, ds_cpu_ops_f64_avx512;
#endif
#ifdef DS_CPU_HAVE_AVX2
extern const ds_ops ds_cpu_ops_f32_avx2, ds_cpu_ops_f64_avx2;
#endif
#ifdef DS_CPU_HAVE_BASELINE
extern const ds_ops ds_cpu_ops_f32_baseline, ds_cpu_ops_f64_baseline;
#endif
#ifdef DS_CPU_HAVE_NEON
extern const ds_ops ds_cpu_ops_f32_neon, ds_cpu_ops_f64_neon;
#endif

static const ds_ops *const tables[DS_ISA_COUNT][2] = {
#ifdef DS_CPU_HAVE_BASELINE
    [DS_ISA_BASELINE] = {&ds_cpu_ops_f32_baseline, &ds_cpu_ops_f64_baseline},
#endif
#ifdef DS_CPU_HAVE_AVX2
    [DS_ISA_AVX2] = {&ds_cpu_ops_f32_avx2, &ds_cpu_ops_f64_avx2},
#endif
#ifdef DS_CPU_HAVE_AVX512
    [DS_ISA_AVX512] = {&ds_cpu_ops_f32_avx512, &ds_cpu_ops_f64_avx512},
#endif
#ifdef DS_CPU_HAVE_NEON
    [DS_ISA_NEON] = {&ds_cpu_ops_f32_neon, &ds_cpu_ops_f64_neon},
#endif
};

/* widest first: what auto picks */
static const ds_cpu_isa by_width[] = {DS_ISA_AVX512, DS_ISA_AVX2, DS_ISA_NEON, DS_ISA_BASELINE};

const char *ds_cpu_isa_name(ds_cpu_isa isa)
{
    return isa >= 0 && isa < DS_ISA_COUNT ? names[isa] : "?";
}

/* Whether this build has the set. */
static int built(ds_cpu_isa isa) { return isa >= 0 && isa < DS_ISA_COUNT && tables[isa][0]; }

/* Whether this build has the set and this host can run it. */
static int host_runs(ds_cpu_isa isa)
{
    if (!built(isa))
        return 0;
    switch (isa) {
#if defined(__x86_64__)
    case DS_ISA_AVX512:   /* what -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma allow */
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    case DS_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    case DS_ISA_NEON:       /* aarch64's baseline: built only there */
    case DS_ISA_BASELINE:
        return 1;
    default:
        return 0;
    }
}

/* The verdict, made once. */
static struct {
    pthread_once_t once;
    ds_cpu_isa isa;
    ds_status st;
    char why[160];
    char err[512];
} sel = {.once = PTHREAD_ONCE_INIT};

static void list_runs(char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof by_width / sizeof *by_width; k++)
        if (host_runs(by_width[k]) && at < size)
            at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? " " : "", names[by_width[k]]);
}

static void choose(void)
{
    const char *want = getenv("DSTRAIN_CPU_ISA");
    char runs[64];
    list_runs(runs, sizeof runs);
    sel.st = DS_OK;
    /* the widest the host runs: the choice, and the tables behind a refusal */
    for (size_t k = 0; k < sizeof by_width / sizeof *by_width; k++)
        if (host_runs(by_width[k])) {
            sel.isa = by_width[k];
            break;
        }
    snprintf(sel.why, sizeof sel.why, "auto: the widest this CPU runs");
    if (!want || !*want || !strcmp(want, "auto"))
        return;
    /* aarch64's baseline is its NEON */
    const char *as = !strcmp(want, "baseline") && built(DS_ISA_NEON) ? "neon" : want;
    for (int i = 0; i < DS_ISA_COUNT; i++) {
        if (strcmp(as, names[i]))
            continue;
        if (!built(i)) {
            snprintf(sel.err, sizeof sel.err,
                     "DSTRAIN_CPU_ISA=%s: this build has no %s kernels (they are built on another "
                     "architecture); this CPU runs: %s (or unset DSTRAIN_CPU_ISA)", want, want, runs);
            sel.st = DS_ERR_UNSUPPORTED;
        } else if (!host_runs(i)) {
            snprintf(sel.err, sizeof sel.err,
                     "DSTRAIN_CPU_ISA=%s: the %s kernels need instructions this CPU lacks; this "
                     "CPU runs: %s (or unset DSTRAIN_CPU_ISA)", want, want, runs);
            sel.st = DS_ERR_UNSUPPORTED;
        } else {
            sel.isa = i;
            snprintf(sel.why, sizeof sel.why, "forced: DSTRAIN_CPU_ISA=%s", want);
        }
        return;
    }
    snprintf(sel.err, sizeof sel.err,
             "DSTRAIN_CPU_ISA=%s: not an instruction set; use auto, avx512, avx2, baseline or neon "
             "(this CPU runs: %s)", want, runs);
    sel.st = DS_ERR_ARG;
}

ds_status ds_cpu_isa_select(void)
{
    pthread_once(&sel.once, choose);
    return sel.st == DS_OK ? DS_OK : DS_FAIL(sel.st, "%s", sel.err);
}

ds_cpu_isa ds_cpu_isa_chosen(void)
{
    pthread_once(&sel.once, choose);
    return sel.isa;
}

void ds_cpu_isa_describe(char *buf, size_t size)
{
    char runs[64];
    pthread_once(&sel.once, choose);
    list_runs(runs, sizeof runs);
    if (sel.st != DS_OK)
        snprintf(buf, size, "refused: %s", sel.err);
    else
        snprintf(buf, size, "%s (%s); this CPU runs %s", names[sel.isa], sel.why, runs);
}

const ds_ops *ds_cpu_isa_ops(ds_dtype t)
{
    const ds_ops *const *tab = tables[ds_cpu_isa_chosen()];
    switch (t) {
    case DS_F32: return tab[0];
    case DS_F64: return tab[1];
    default: return NULL;
    }
}
