/* gpu_peak.c - a GPU's dense peak rate from its architecture, SM count and
 * clock; see gpu_peak.h.
 *
 * Peak = SMs x clock x dense FLOP per clock per SM (an FMA counts 2). The
 * per-SM rates are NVIDIA's architecture whitepapers' and check against the
 * datasheets (tests/unit/test_gpu_peak.c, within 1%):
 *   A100 (sm_80, 108 SMs, boost 1410 MHz): FP64 tensor 19.5, FP32 19.5,
 *     TF32 156, FP16/BF16 312 TFLOP/s dense;
 *   H100 SXM (sm_90, 132 SMs): FP64 tensor 67 and FP32 67 at the 1980 MHz
 *     boost clock; TF32 494.7 and FP16/BF16 989.4 dense at 1830 MHz, the
 *     boost clock the H100 whitepaper gives for tensor-core work (the
 *     datasheet's sparse figures are twice these). A Hopper part named in
 *     tensor_clocks below gets that clock for its tensor figures; any other
 *     gets its maximum SM clock, which overstates them (said in how).
 * What a GPU sustains is lower still: power and clocks fall under a long
 * tensor-core load (an H100 SXM runs bf16 GEMMs at about 800 TFLOP/s). */
#include "gpu_peak.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int major, minor;
    const char *family;
    /* dense FLOP per clock per SM */
    double fp64, fp32, tf32, fp16, bf16;
    int fp64_tensor;   /* DGEMM runs on FP64 tensor cores (DMMA) */
    const char *note;  /* said after the figure, or NULL */
} arch_rate;

static const arch_rate arch_rates[] = {
    /* GA100: 64 FP32 lanes, 4 tensor cores of 256 FP16 FMA/clk (TF32 a
     * half of it), FP64 DMMA at 64 FMA/clk */
    {8, 0, "Ampere GA100", 128, 128, 1024, 2048, 2048, 1, NULL},
    /* GA10x: 128 FP32 lanes, 2 FP64 units; tensor rates of the professional
     * parts (A40, A10, RTX A6000); GeForce halves them with FP32 accumulation */
    {8, 6, "Ampere GA10x", 4, 256, 512, 1024, 1024, 0, NULL},
    /* AD10x: as GA10x (L4, L40S, RTX 6000 Ada); GeForce and L40 halve them
     * with FP32 accumulation */
    {8, 9, "Ada AD10x", 4, 256, 512, 1024, 1024, 0, NULL},
    /* GH100: 128 FP32 lanes, 4 tensor cores of twice GA100's rate, FP64 DMMA
     * at 128 FMA/clk */
    {9, 0, "Hopper GH100", 256, 256, 2048, 4096, 4096, 1, NULL},
    /* GB100/GB200: twice Hopper's 16-bit and TF32 tensor rate per SM; FP64 at
     * 64 FMA/clk (tensor and vector alike). From the B200 datasheet's ratios
     * (2.25 PFLOP/s dense FP16 at 148 SMs); not yet checked on a device. */
    {10, 0, "Blackwell GB100", 128, 256, 4096, 8192, 8192, 0, "sm_100 rates not yet checked on a device"},
};

/* Hopper parts whose datasheet tensor figures assume a boost clock below the
 * maximum SM clock (H100 whitepaper, table of GPU boost clocks for tensor
 * core operations). Matched by SM count and maximum clock (within 10 MHz). */
static const struct {
    int major, minor, sms;
    double max_mhz, tensor_mhz;
    const char *part;
} tensor_clocks[] = {
    {9, 0, 132, 1980, 1830, "H100/H200 SXM"},
    {9, 0, 114, 1755, 1620, "H100 PCIe"},
};

/* The GA10x/AD10x parts whose FP16/BF16/TF32 tensor rate with FP32
 * accumulation is half the professional parts'. */
static int half_rate_tensor(const ds_gpu_desc *d)
{
    if (!(d->major == 8 && (d->minor == 6 || d->minor == 9)) || !d->name)
        return 0;
    const size_t n = strlen(d->name);
    return strstr(d->name, "GeForce") != NULL || (n >= 3 && strcmp(d->name + n - 3, "L40") == 0);
}

double ds_gpu_peak_flops(const ds_gpu_desc *d, ds_dtype t, int tf32, char *how, size_t how_size)
{
    const char *name = d->name && *d->name ? d->name : "GPU";
    const arch_rate *a = NULL;
    for (size_t i = 0; i < sizeof arch_rates / sizeof *arch_rates; i++)
        if (arch_rates[i].major == d->major && arch_rates[i].minor == d->minor)
            a = &arch_rates[i];
    if (!a || d->sms <= 0 || d->max_clock_mhz <= 0) {
        snprintf(how, how_size, "%s (sm_%d%d, %d SMs, %.0f MHz): no peak known for this "
                 "architecture", name, d->major, d->minor, d->sms, d->max_clock_mhz);
        return 0;
    }
    double rate;
    const char *unit;
    int tensor = 1;
    switch (t) {
    case DS_F64:
        rate = a->fp64;
        unit = a->fp64_tensor ? "FP64 tensor (DMMA)" : "FP64 units";
        tensor = 0;   /* at the full boost clock either way */
        break;
    case DS_F32:
        if (tf32) {
            rate = a->tf32;
            unit = "TF32 tensor";
        } else {
            rate = a->fp32;
            unit = "FP32 FMA on CUDA cores (no TF32)";
            tensor = 0;
        }
        break;
    case DS_F16:
        rate = a->fp16;
        unit = "FP16 tensor, FP32 accumulation";
        break;
    case DS_BF16:
        rate = a->bf16;
        unit = "BF16 tensor, FP32 accumulation";
        break;
    default:
        snprintf(how, how_size, "no matrix products in %s", ds_dtype_name(t));
        return 0;
    }
    const int half = tensor && half_rate_tensor(d);
    if (half)
        rate /= 2;
    double mhz = d->max_clock_mhz;
    char clock_note[160] = "";
    if (tensor && d->major == 9) {
        const char *part = NULL;
        for (size_t i = 0; i < sizeof tensor_clocks / sizeof *tensor_clocks; i++)
            if (tensor_clocks[i].major == d->major && tensor_clocks[i].minor == d->minor &&
                tensor_clocks[i].sms == d->sms && d->max_clock_mhz > tensor_clocks[i].max_mhz - 10 &&
                d->max_clock_mhz < tensor_clocks[i].max_mhz + 10) {
                part = tensor_clocks[i].part;
                mhz = tensor_clocks[i].tensor_mhz;
            }
        if (part)
            snprintf(clock_note, sizeof clock_note, "; the %s datasheet's tensor boost clock, max SM "
                     "clock %.0f MHz", part, d->max_clock_mhz);
        else
            snprintf(clock_note, sizeof clock_note, "; the max SM clock: this part's datasheet "
                     "tensor clock is not in the table, so the figure may be high");
    }
    snprintf(how, how_size, "%s: %d SMs x %.0f MHz x %.0f FLOP/clk/SM dense %s (%s%s%s%s%s)", name,
             d->sms, mhz, rate, unit, a->family, half ? "; half rate with FP32 accumulation on this part" : "",
             clock_note, a->note ? "; " : "", a->note ? a->note : "");
    return d->sms * mhz * 1e6 * rate;
}
