/* cli_pytorch.c - `dstrain export --pytorch` (a checkpoint as a PyTorch
 * state_dict in deepspeech.pytorch's DeepSpeech layout) and `dstrain import
 * --pytorch` (such a state_dict as a checkpoint). The file format is
 * pytorch/pt_file.h, the names and shapes pytorch/pt_layout.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "flags.h"
#include "convert.h"
#include "pt_layout.h"
#include "feature.h"
#include "file.h"
#include "pt_file.h"

enum { O_PYTORCH = 256, O_MODEL, O_CONFIG, O_PRECISION };

/* ---- shared ---- */

/* The fewest input frames that leave an output frame: a model sized for
 * moving weights only. */
static ds_model_limits small_limits(const ds_model_cfg *cfg)
{
    int t = 16;
    while (t < (1 << 24) && ds_model_config_out_frames(cfg, t) < 1)
        t *= 2;
    return (ds_model_limits){.batch = 1, .frames = t, .label_len = 1};
}

static ds_status cpu_model(const ds_model_cfg *cfg, ds_dtype dt, ds_ctx **ctx, ds_model **m)
{
    const ds_backend *be = ds_backend_get("cpu");
    const ds_model_limits lim = small_limits(cfg);
    *ctx = NULL;
    *m = NULL;
    DS_TRY(be->ctx_create(0, NULL, ctx));
    return ds_model_create(cfg, be, *ctx, dt, &lim, m);
}

/* Host copies of m's parameters [param_count] and statistics [bn_stats_count]. */
static ds_status host_buffers(ds_model *m, double **params, double **stats)
{
    *params = calloc(ds_model_param_count(m) + 1, sizeof **params);
    *stats = calloc(ds_model_bn_stats_count(m) + 1, sizeof **stats);
    if (!*params || !*stats)
        return DS_FAIL(DS_ERR_MEM, "host copy of %zu parameters", ds_model_param_count(m));
    return DS_OK;
}

static double *slot_of(const ds_pt_entry *e, double *params, double *stats)
{
    return (e->which == DS_BN_STATS ? stats : params) + e->src->offset;
}

/* ---- export ---- */

static void print_notes(const ds_model_cfg *cfg)
{
    char buf[4096];
    if (ds_pt_stock_notes(cfg, buf, sizeof buf) == 0)
        return;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
        fprintf(stderr, "dstrain export: note: %s\n", line);
}

/* Entry e of the model's host copies into d, as dt (the counter: int64 step). */
static ds_status export_entry(const ds_pt_entry *e, double *params, double *stats, long step,
                              ds_dtype dt, double *tmp, ds_pt_dict *d)
{
    void *data;
    if (e->kind == DS_PT_COUNTER) {
        DS_TRY(ds_pt_dict_add(d, e->key, DS_I64, 0, e->dims, &data));
        *(int64_t *)data = step;
        return DS_OK;
    }
    DS_TRY(ds_pt_dict_add(d, e->key, dt, e->rank, e->dims, &data));
    ds_pt_to_torch(e, slot_of(e, params, stats), tmp);
    return ds_convert(dt, data, DS_F64, tmp, e->count);
}

static ds_status run_export(const char *ckpt, const char *out)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_pt_dict d = {0};
    double *params = NULL, *stats = NULL, *tmp = NULL;
    ds_pt_entry *e = calloc(DS_PT_MAX_ENTRIES, sizeof *e);
    int n = 0;
    ds_status st;
    if (!e)
        return DS_FAIL(DS_ERR_MEM, "export table");
    DS_TRY_GOTO(st, ds_checkpoint_read_config(ckpt, &cfg, &dt, &info), done);
    const ds_model_limits lim = small_limits(&cfg);
    DS_TRY_GOTO(st, ds_cli_checkpoint_model(ckpt, &lim, &ctx, &m, &info), done);
    DS_TRY_GOTO(st, ds_pt_layout(m, e, &n), done);
    print_notes(&cfg);
    DS_TRY_GOTO(st, host_buffers(m, &params, &stats), done);
    DS_TRY_GOTO(st, ds_model_get(m, DS_PARAMS, params), done);
    DS_TRY_GOTO(st, ds_model_get(m, DS_BN_STATS, stats), done);
    size_t most = 1;
    for (int i = 0; i < n; i++)
        most = e[i].count > most ? e[i].count : most;
    if (!(tmp = malloc(most * sizeof *tmp))) {
        st = DS_FAIL(DS_ERR_MEM, "a tensor of %zu elements", most);
        goto done;
    }
    /* the master copy's type: float32, or float64 from an fp64 run */
    const ds_dtype out_dt = ds_model_roles(m).master;
    for (int i = 0; i < n; i++)
        DS_TRY_GOTO(st, export_entry(&e[i], params, stats, info.step, out_dt, tmp, &d), done);
    DS_TRY_GOTO(st, ds_pt_save(out, &d), done);
    printf("%s: model %s (%zu parameters, step %ld) -> %s: %d tensors, %s, %s\n", ckpt,
           cfg.name, ds_model_param_count(m), info.step, out, d.n,
           ds_pt_dtype_name(out_dt),
           ds_pt_own_names(&cfg) ? "dstrain's tensor names (bench/pytorch_ds2.py's twins load them)"
                                 : "deepspeech.pytorch DeepSpeech layout");
done:
    free(tmp);
    free(params);
    free(stats);
    free(e);
    ds_pt_dict_free(&d);
    ds_cli_free_model(ctx, m);
    return st;
}

static const ds_flag export_flags[] = {
    DS_FLAG_OPERAND("CHECKPOINT.h5", "the checkpoint (`dstrain train`, `dstrain import`)"),
    DS_FLAG_OPERAND("OUT.pt", "the state_dict to write (replaced when it exists)"),
    DS_FLAG_SWITCH(O_PYTORCH, "pytorch",
                   "write a PyTorch state_dict (torch.save format); the one format so far, "
                   "and required"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_export_cmd = {
    .name = "export",
    .run = ds_cli_export,
    .summary = "a checkpoint as a PyTorch state_dict for deepspeech.pytorch",
    .usage = "dstrain export --pytorch CHECKPOINT.h5 OUT.pt",
    .about = "Writes the checkpoint's weights and BatchNorm statistics as a PyTorch "
             "state_dict (torch.save's zip format; torch.load reads it, with weights_only=True "
             "too) keyed and shaped as deepspeech.pytorch's DeepSpeech model "
             "(SeanNaren/deepspeech.pytorch): `conv.seq_module.0.weight`, ..., "
             "`rnns.0.rnn.weight_ih_l0`, ..., `fc.0.module.1.weight`. Conv weights are turned "
             "from [out][in][time][freq] to [out][in][freq][time], the lookahead weight "
             "gains its Conv1d axis, num_batches_tracked is the checkpoint's step; tensors are "
             "float32 (float64 from an fp64 checkpoint). Load it with "
             "`model.load_state_dict(torch.load(\"OUT.pt\"))`.",
    .flags = export_flags,
    .notes = "Presets: ds2 is deepspeech.pytorch's default DeepSpeech exactly "
             "(BiDirectionalConfig: lstm, hidden 1024, 5 layers, bidirectional; 161 "
             "features, 29 labels) and exports without a note. small (two convolutions of "
             "16 channels) and tiny (one convolution) export with the same naming and a note "
             "on stderr: stock deepspeech.pytorch builds exactly two convolutions of 32 "
             "channels, so its conv stack must be changed to match before loading them. "
             "ds2-large and ds2-medium have hidden FC layers (fc_hidden), for which "
             "deepspeech.pytorch has no place: their export is refused."};

int ds_cli_export(int argc, char **argv)
{
    ds_flags fl;
    int c, pytorch = 0;
    if ((c = ds_flags_begin(&fl, &ds_cli_export_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_PYTORCH: pytorch = 1; break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if (!pytorch) {
        fprintf(stderr, "dstrain export: name the format: --pytorch (the one so far)\n");
        return 2;
    }
    if (argc - optind != 2) {
        fprintf(stderr, "dstrain export: need CHECKPOINT.h5 and OUT.pt (see dstrain export --help)\n");
        return 2;
    }
    const char *in_what[] = {"checkpoint"}, *in[] = {argv[optind]};
    ds_status st = ds_file_refuse_output_over_input("export", "state_dict", argv[optind + 1], in_what, in, 1);
    if (st == DS_OK)
        st = run_export(argv[optind], argv[optind + 1]);
    return st == DS_OK ? 0 : ds_cli_fail("export", st);
}

/* ---- import ---- */

static int is_float(ds_dtype t) { return t == DS_F32 || t == DS_F64 || t == DS_F16 || t == DS_BF16; }

/* Prints every key of d the model's entries e [n] lack or need otherwise;
 * returns how many. */
static int report_mismatches(const char *in, const char *model, const ds_pt_entry *e, int n,
                             const ds_pt_dict *d)
{
    char a[96], b[96];
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const ds_pt_tensor *t = ds_pt_dict_find(d, e[i].key);
        if (!t) {
            if (e[i].kind != DS_PT_COUNTER) {   /* a counter carries nothing the model needs */
                fprintf(stderr, "dstrain import: %s: missing key %s (model %s needs %s)\n", in,
                        e[i].key, model, ds_pt_shape_str(e[i].dims, e[i].rank, a, sizeof a));
                bad++;
            }
            continue;
        }
        int same = t->rank == e[i].rank;
        for (int k = 0; same && k < t->rank; k++)
            same = t->dims[k] == e[i].dims[k];
        if (!same) {
            fprintf(stderr, "dstrain import: %s: key %s has shape %s, model %s needs %s\n", in,
                    e[i].key, ds_pt_shape_str(t->dims, t->rank, a, sizeof a), model,
                    ds_pt_shape_str(e[i].dims, e[i].rank, b, sizeof b));
            bad++;
        } else if (e[i].kind == DS_PT_COUNTER ? is_float(t->dt) : !is_float(t->dt)) {
            fprintf(stderr, "dstrain import: %s: key %s is %s, %s\n", in, e[i].key,
                    ds_pt_dtype_name(t->dt),
                    e[i].kind == DS_PT_COUNTER ? "a counter needs an integer type"
                                               : "a float32, float64, float16 or bfloat16 "
                                                 "tensor is needed");
            bad++;
        }
    }
    for (int k = 0; k < d->n; k++) {
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = !strcmp(d->t[k].key, e[i].key);
        if (!known) {
            fprintf(stderr, "dstrain import: %s: unexpected key %s (shape %s): model %s has no "
                            "such tensor\n", in, d->t[k].key,
                    ds_pt_shape_str(d->t[k].dims, d->t[k].rank, a, sizeof a), model);
            bad++;
        }
    }
    return bad;
}

static int64_t counter_value(const ds_pt_tensor *t)
{
    switch (t->dt) {
    case DS_I64: return *(const int64_t *)t->data;
    case DS_I32: return *(const int32_t *)t->data;
    case DS_U8: return *(const uint8_t *)t->data;
    default: return 0;
    }
}

/* Tensor t (entry e) into the model's host copies, checked finite (and
 * running variances positive). */
static ds_status import_entry(const char *in, const ds_pt_entry *e, const ds_pt_tensor *t,
                              double *params, double *stats, double *tmp)
{
    char what[1200];
    snprintf(what, sizeof what, "%s: key %s", in, e->key);
    DS_TRY(ds_convert(DS_F64, tmp, t->dt, t->data, e->count));
    DS_TRY(ds_checkpoint_check_state_values(what, tmp, e->count, strstr(e->key, "running_var") != NULL));
    ds_pt_from_torch(e, tmp, slot_of(e, params, stats));
    return DS_OK;
}

/* Fills m from d (matched by report_mismatches); *step the largest counter. */
static ds_status fill_model(const char *in, ds_model *m, const ds_pt_entry *e, int n,
                            const ds_pt_dict *d, long *step)
{
    double *params = NULL, *stats = NULL, *tmp = NULL;
    size_t most = 1;
    for (int i = 0; i < n; i++)
        most = e[i].count > most ? e[i].count : most;
    ds_status st;
    DS_TRY_GOTO(st, host_buffers(m, &params, &stats), out);
    if (!(tmp = malloc(most * sizeof *tmp))) {
        st = DS_FAIL(DS_ERR_MEM, "a tensor of %zu elements", most);
        goto out;
    }
    *step = 0;
    for (int i = 0; i < n; i++) {
        const ds_pt_tensor *t = ds_pt_dict_find(d, e[i].key);
        if (e[i].kind == DS_PT_COUNTER) {
            if (t && counter_value(t) > *step)
                *step = (long)counter_value(t);
            continue;
        }
        DS_TRY_GOTO(st, import_entry(in, &e[i], t, params, stats, tmp), out);
    }
    DS_TRY_GOTO(st, ds_model_put(m, DS_PARAMS, params), out);
    st = ds_model_put(m, DS_BN_STATS, stats);
out:
    free(params);
    free(stats);
    free(tmp);
    return st;
}

static ds_status run_import(const char *in, const char *out, const ds_model_cfg *cfg, ds_dtype dt)
{
    ds_pt_dict d = {0};
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_pt_entry *e = calloc(DS_PT_MAX_ENTRIES, sizeof *e);
    int n = 0, wrapped = 0;
    long step = 0;
    ds_status st;
    if (!e)
        return DS_FAIL(DS_ERR_MEM, "import table");
    DS_TRY_GOTO(st, cpu_model(cfg, dt, &ctx, &m), done);
    DS_TRY_GOTO(st, ds_pt_layout(m, e, &n), done);
    /* shapes first: only a file that fits the model has its storages read */
    DS_TRY_GOTO(st, ds_pt_load(in, 1, &d, &wrapped), done);
    const int bad = report_mismatches(in, cfg->name, e, n, &d);
    if (bad) {
        st = DS_FAIL(DS_ERR_ARG, "%s: %d key%s not fit model %s (each named above); "
                                 "--model or --config chooses the model", in, bad,
                     bad == 1 ? " does" : "s do", cfg->name);
        goto done;
    }
    ds_pt_dict_free(&d);
    DS_TRY_GOTO(st, ds_pt_load(in, 0, &d, &wrapped), done);
    DS_TRY_GOTO(st, fill_model(in, m, e, n, &d, &step), done);
    ds_ckpt_info info = {.step = step, .feat = ds_feature_defaults(), .norm = DS_NORM_UTTERANCE};
    /* the file holds weights only: the inputs are deepspeech.pytorch's; for
     * DS1's graph MFCC of the model's width, as DS1 takes; for the
     * convolution-only families (Jasper, Wav2Letter+) log-mel of its width */
    const int own = ds_pt_own_names(cfg);
    const char *assumed = "deepspeech.pytorch's";
    if (own && !cfg->rnn_layers && cfg->n_conv) {
        info.feat.type = DS_FEAT_LOGMEL;
        info.feat.n_mels = cfg->n_features;
        assumed = "assumed for Jasper and Wav2Letter+";
    } else if (own && cfg->n_features <= DS_MFCC_N_MELS) {
        info.feat.type = DS_FEAT_MFCC;
        info.feat.n_mfcc = cfg->n_features;
        assumed = "assumed for DS1";
    }
    DS_TRY_GOTO(st, ds_checkpoint_save(out, m, NULL, &info), done);
    printf("%s: %d tensors%s -> %s: model %s, %zu parameters, %s, step %ld; inputs as "
           "%s: %s, %d features, per-utterance normalisation\n", in, d.n,
           wrapped ? " (its \"state_dict\" entry)" : "", out, cfg->name, ds_model_param_count(m),
           ds_dtype_name(dt), step, assumed,
           ds_feature_type_name(info.feat.type), ds_feature_dim(&info.feat));
    if (ds_feature_dim(&info.feat) != cfg->n_features)
        fprintf(stderr, "dstrain import: note: model %s takes %d features, not the %d of "
                        "the features recorded in %s: eval on a feature "
                        "file of %d works, transcribe does not\n", cfg->name, cfg->n_features,
                ds_feature_dim(&info.feat), out, cfg->n_features);
done:
    free(e);
    ds_pt_dict_free(&d);
    ds_cli_free_model(ctx, m);
    return st;
}

static const ds_flag import_flags[] = {
    DS_FLAG_OPERAND("IN.pt", "a torch.save file of a deepspeech.pytorch DeepSpeech state_dict"),
    DS_FLAG_OPERAND("OUT.h5", "the checkpoint to write"),
    DS_FLAG_SWITCH(O_PYTORCH, "pytorch", "read a PyTorch state_dict; the one format so far, "
                                         "and required"),
    DS_FLAG_ARG(O_MODEL, "model", "PRESET", "ds2",
                "the model the state_dict is of: a preset (ds2 is deepspeech.pytorch's "
                "default DeepSpeech)"),
    DS_FLAG_ARG(O_CONFIG, "config", "FILE", NULL, "the model as a config JSON instead"),
    DS_FLAG_ARG(O_PRECISION, "precision", "P", "fp32",
                "fp32 | fp64 | fp16 | bf16: the checkpoint's precision, for eval and transcribe"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_import_cmd = {
    .name = "import",
    .run = ds_cli_import,
    .summary = "a deepspeech.pytorch state_dict as a checkpoint",
    .usage = "dstrain import --pytorch IN.pt OUT.h5 [--model PRESET | --config FILE] [--precision P]",
    .about = "Reads a PyTorch state_dict of deepspeech.pytorch's DeepSpeech model "
             "(torch.save(model.state_dict(), F): bare, or the \"state_dict\" entry of a dict "
             "whose other entries are plain values, as in a PyTorch Lightning checkpoint "
             "without objects of other classes) and writes a checkpoint of the model "
             "--model or --config names (default ds2) with its weights and BatchNorm "
             "statistics, no optimizer state: `dstrain eval`, `transcribe` and `info` take "
             "it. float32, float64, float16 and bfloat16 tensors are converted. Every key "
             "missing, unexpected or of the wrong shape is named; values must be finite. "
             "The checkpoint's step is the largest num_batches_tracked; its inputs are "
             "deepspeech.pytorch's (161-bin log spectrogram of 20 ms Hamming windows every "
             "10 ms, normalised per utterance).",
    .flags = import_flags,
    .notes = "For a Lightning .ckpt whose hyper_parameters hold objects (OmegaConf configs), "
             "extract the state_dict first: `torch.save(torch.load(\"x.ckpt\")[\"state_dict\"], "
             "\"x.pt\")`."};

int ds_cli_import(int argc, char **argv)
{
    ds_flags fl;
    const char *preset = NULL, *config = NULL;
    ds_dtype dt = DS_F32;
    int c, pytorch = 0;
    if ((c = ds_flags_begin(&fl, &ds_cli_import_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_PYTORCH: pytorch = 1; break;
        case O_MODEL: preset = optarg; break;
        case O_CONFIG: config = optarg; break;
        case O_PRECISION:
            if (ds_cli_precision("import", "precision", optarg, &dt))
                return 2;
            break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if (!pytorch) {
        fprintf(stderr, "dstrain import: name the format: --pytorch (the one so far)\n");
        return 2;
    }
    if (argc - optind != 2) {
        fprintf(stderr, "dstrain import: need IN.pt and OUT.h5 (see dstrain import --help)\n");
        return 2;
    }
    if (preset && config) {
        fprintf(stderr, "dstrain import: --model and --config both name the model: give one\n");
        return 2;
    }
    ds_model_cfg cfg;
    if (ds_cli_load_model("import", config ? NULL : preset ? preset : "ds2", config, &cfg))
        return 1;
    const char *in_what[] = {"state_dict", "model config (--config)"}, *in[] = {argv[optind], config};
    ds_status st = ds_file_refuse_output_over_input("import", "checkpoint", argv[optind + 1], in_what, in, 2);
    if (st == DS_OK)
        st = run_import(argv[optind], argv[optind + 1], &cfg, dt);
    return st == DS_OK ? 0 : ds_cli_fail("import", st);
}
