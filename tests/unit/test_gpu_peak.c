/* test_gpu_peak.c - the CUDA backend's peak_flops arithmetic (cuda/gpu_peak.c),
 * on the host: no GPU needed. Each product's figures are NVIDIA's datasheet
 * dense peaks (no sparsity), which the table must give within 1% from the
 * SM count and maximum clock the device reports:
 *   A100 SXM4 (sm_80, 108 SMs, 1410 MHz): FP64 tensor 19.5, FP32 19.5, TF32 156, FP16/BF16 312;
 *   H100 SXM5 (sm_90, 132 SMs, 1980 MHz): FP64 tensor 67, FP32 67, TF32 494.7, FP16/BF16 989.4
 *     (the tensor figures at the 1830 MHz tensor boost clock);
 *   H100 PCIe (sm_90, 114 SMs, 1755 MHz): FP64 tensor 51, FP32 51, TF32 378, FP16/BF16 756
 *     (tensor figures at 1620 MHz);
 *   A10 (sm_86, 72 SMs, 1695 MHz): FP32 31.2, TF32 62.5, FP16/BF16 125.
 * Then: the how text names SMs, clock and rate; an unknown architecture and
 * a dtype without matrix products give 0 with a reason; a Hopper part the
 * clock table lacks falls back to its max clock and says so. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu_peak.h"
#include "testutil.h"

typedef struct {
    ds_dtype t;
    int tf32;
    double tflops;
} want;

static void check_product(const ds_gpu_desc *d, const want *w, int n)
{
    for (int i = 0; i < n; i++) {
        char how[400];
        const double got = ds_gpu_peak_flops(d, w[i].t, w[i].tf32, how, sizeof how) / 1e12;
        printf("%-24s %-5s%s %8.1f TFLOP/s (datasheet %.1f): %s\n", d->name, ds_dtype_name(w[i].t),
               w[i].tf32 ? "+tf32" : "     ", got, w[i].tflops, how);
        T_CHECK(fabs(got / w[i].tflops - 1) <= 0.01, "%s %s%s: %.2f TFLOP/s, datasheet %.2f", d->name,
                ds_dtype_name(w[i].t), w[i].tf32 ? " (tf32)" : "", got, w[i].tflops);
    }
}

int main(void)
{
    const ds_gpu_desc a100 = {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410};
    const want a100_w[] = {{DS_F64, 0, 19.5}, {DS_F32, 0, 19.5}, {DS_F32, 1, 156},
                           {DS_F16, 0, 312},  {DS_BF16, 0, 312}};
    check_product(&a100, a100_w, 5);

    const ds_gpu_desc h100 = {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980};
    const want h100_w[] = {{DS_F64, 0, 67}, {DS_F32, 0, 67}, {DS_F32, 1, 494.7},
                           {DS_F16, 0, 989.4}, {DS_BF16, 0, 989.4}};
    check_product(&h100, h100_w, 5);

    const ds_gpu_desc h100_pcie = {"NVIDIA H100 PCIe", 9, 0, 114, 1755};
    const want pcie_w[] = {{DS_F64, 0, 51}, {DS_F32, 0, 51}, {DS_F32, 1, 378},
                           {DS_F16, 0, 756}, {DS_BF16, 0, 756}};
    check_product(&h100_pcie, pcie_w, 5);

    const ds_gpu_desc a10 = {"NVIDIA A10", 8, 6, 72, 1695};
    const want a10_w[] = {{DS_F32, 0, 31.2}, {DS_F32, 1, 62.5}, {DS_F16, 0, 125}, {DS_BF16, 0, 125}};
    check_product(&a10, a10_w, 4);

    char how[400];
    ds_gpu_peak_flops(&h100, DS_F16, 0, how, sizeof how);
    T_CHECK(strstr(how, "132 SMs") && strstr(how, "1830 MHz") && strstr(how, "4096 FLOP/clk/SM") &&
                strstr(how, "1980 MHz"),
            "H100 FP16 how: %s", how);
    ds_gpu_peak_flops(&h100, DS_F64, 0, how, sizeof how);
    T_CHECK(strstr(how, "1980 MHz") && strstr(how, "FP64 tensor"), "H100 FP64 how: %s", how);

    const ds_gpu_desc turing = {"Tesla T4", 7, 5, 40, 1590};
    T_CHECK(ds_gpu_peak_flops(&turing, DS_F16, 0, how, sizeof how) == 0 && strstr(how, "no peak known"),
            "sm_75: %s", how);
    T_CHECK(ds_gpu_peak_flops(&h100, DS_I32, 0, how, sizeof how) == 0 && strstr(how, "no matrix products"),
            "int32: %s", how);
    const ds_gpu_desc nvl = {"NVIDIA H100 NVL", 9, 0, 132, 1785};
    const double nvl16 = ds_gpu_peak_flops(&nvl, DS_BF16, 0, how, sizeof how);
    T_CHECK(fabs(nvl16 - 132 * 1785e6 * 4096) < 1e9 && strstr(how, "may be high"),
            "a Hopper part without a tensor clock: %.1f TFLOP/s, %s", nvl16 / 1e12, how);
    const ds_gpu_desc rtx = {"NVIDIA GeForce RTX 3090", 8, 6, 82, 1695};
    const double rtx16 = ds_gpu_peak_flops(&rtx, DS_F16, 0, how, sizeof how);
    T_CHECK(fabs(rtx16 / 71e12 - 1) < 0.02 && strstr(how, "half rate"),
            "GeForce RTX 3090 FP16 with FP32 accumulation: %.1f TFLOP/s (71), %s", rtx16 / 1e12, how);
    return t_finish("test_gpu_peak");
}
