/* bench_report.h - benchmark results as JSON objects, and the table, JSON
 * file and CSV made from them (bench_report.c). */
#ifndef DS_BENCH_REPORT_H
#define DS_BENCH_REPORT_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "bench.h"

/* One configuration's result: model, device, precision, mode, batch,
 * ranks, status, samples_per_s (median) and its mean and 95% interval,
 * step_ms, audio_s_per_s, FLOPs, peak memory, layers, kernels, config. */
cJSON *ds_bench_result_json(const ds_bench_cfg *c, const ds_bench_result *r);
/* Sets peak_flop_per_s (per device), peak_source and peak_fraction of o. */
void ds_bench_set_peak(cJSON *o, double peak, const char *how);
/* Host, CPU, threads, the device, library versions, git revision, command, date. */
cJSON *ds_bench_env_json(int argc, char **argv, const char *device);

/* Bytes of one rank's host name and CPU model in ds_bench_env_add_nodes. */
#define DS_BENCH_HOST 64
#define DS_BENCH_CPU 128
/* This machine's CPU model ("model name" of /proc/cpuinfo; "" if none). */
void ds_bench_cpu_model(char *out, size_t size);
/* env.nodes: one object per distinct host of hosts [n][DS_BENCH_HOST]
 * (every rank's), in the order of its first rank, with that rank's CPU
 * model (cpus [n][DS_BENCH_CPU]) and its ranks; env.node_count. */
void ds_bench_env_add_nodes(cJSON *env, const char *hosts, const char *cpus, int n);
const char *ds_bench_precision_name(ds_dtype t);

void ds_bench_table_head(FILE *f);
void ds_bench_table_row(FILE *f, const cJSON *o);
/* The per-layer (and per-kernel) breakdown of o, when it has one. */
void ds_bench_print_layers(FILE *f, const cJSON *o);
ds_status ds_bench_write_csv(const char *path, const cJSON *results);
ds_status ds_bench_write_json(const char *path, const cJSON *doc);

#endif
