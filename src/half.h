/* half.h - IEEE binary16 (F16) and bfloat16 (BF16) <-> float and double on
 * the host, as uint16_t bit patterns: the float16 feature file, staging
 * buffers for FP16/BF16 runs, and the CPU backend's rounding emulation.
 *
 * Every narrowing rounds once, to nearest with ties to even, as IEEE 754
 * says: subnormals are exact, values past the largest finite number by half
 * an ulp or more become +-Inf, a NaN stays a NaN (quiet), +-0 and +-Inf keep
 * their sign. From double the rounding is direct, never through float: going
 * through float can round twice (1 + 2^-11 + 2^-40 -> float 1 + 2^-11, a tie,
 * -> 1.0; the nearest half is 1 + 2^-10). Widening is exact. */
#ifndef DS_HALF_H
#define DS_HALF_H

#include <stddef.h>
#include <stdint.h>

uint16_t ds_half_f16_from_f32(float f);
uint16_t ds_half_f16_from_f64(double d);
float ds_half_f32_from_f16(uint16_t h);

uint16_t ds_half_bf16_from_f32(float f);
uint16_t ds_half_bf16_from_f64(double d);
float ds_half_f32_from_bf16(uint16_t h);

/* Whole arrays: dst [n] = src [n] (the feature file, ds_convert). */
void ds_half_f16_from_f32_n(uint16_t *dst, const float *src, size_t n);
void ds_half_f32_from_f16_n(float *dst, const uint16_t *src, size_t n);
void ds_half_bf16_from_f32_n(uint16_t *dst, const float *src, size_t n);
void ds_half_f32_from_bf16_n(float *dst, const uint16_t *src, size_t n);

#endif
