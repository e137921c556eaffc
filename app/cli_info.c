/* cli_info.c - `dstrain info`: model presets and configs, feature files
 * (described, then verified end to end) and checkpoints. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "cli.h"
#include "flags.h"
#include "dataset.h"
#include "dataset_verify.h"
#include "model.h"
#include "pt_file.h"

static const ds_flag info_flags[] = {
    DS_FLAG_OPERAND("(none)", "every preset and its parameter count"),
    DS_FLAG_OPERAND("PRESET | CONFIG.json", "its layers and parameter count"),
    DS_FLAG_OPERAND("FEATURES.h5",
                    "utterances, hours, features, labels, length histogram; then the whole file "
                    "verified as by `dstrain prep --verify`"),
    DS_FLAG_OPERAND("CHECKPOINT.h5",
                    "its model, step, epoch, features and resume state; then every tensor read "
                    "back and checked (checksums, finite values)"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_info_cmd = {
    .name = "info",
    .run = ds_cli_info,
    .summary = "presets, a model config, a feature file or a checkpoint",
    .usage = "dstrain info [PRESET | CONFIG.json | FEATURES.h5 | CHECKPOINT.h5]",
    .flags = info_flags};

static void describe(const ds_model_cfg *c)
{
    printf("model %s: %zu parameters\n", c->name, ds_model_config_param_count(c));
    printf("  input: %d features per 10 ms frame\n", c->n_features);
    int f = c->n_features, ch = 1;
    for (int i = 0; i < c->n_conv; i++) {
        const ds_conv_cfg *k = &c->conv[i];
        int fo = (f + 2 * k->pad_freq - k->kernel_freq) / k->stride_freq + 1;
        printf("  conv[%d]: %d -> %d channels, kernel %dx%d (time x freq), stride %dx%d, "
               "padding %dx%d, %d -> %d bins", i, ch, k->channels, k->kernel_time, k->kernel_freq,
               k->stride_time, k->stride_freq, k->pad_time, k->pad_freq, f, fo);
        if (k->dilation_time > 1)
            printf(", dilation %d", k->dilation_time);
        if (k->no_bias)
            printf(", no bias");
        int src[DS_MAX_RES];
        const int n_res = ds_config_residual_sources(c, i, src);
        printf(", BatchNorm");
        for (int r = 0; r < n_res; r++)
            printf("%s conv[%d]'s output", r ? "," : ", + 1x1 conv and BatchNorm of", src[r]);
        printf(", %s", k->relu ? "ReLU" : "Hardtanh(0,20)");
        if (k->dropout > 0)
            printf(", dropout %g", k->dropout);
        if (k->block)
            printf(" (block %d)", k->block);
        printf("\n");
        f = fo;
        ch = k->channels;
    }
    int width = ch * f;
    if (c->context) {
        width = (2 * c->context + 1) * c->n_features;
        printf("  context: %d frames each side stacked with each frame, %d inputs\n", c->context,
               width);
    }
    char drop[48] = "";
    if (c->dropout > 0)
        snprintf(drop, sizeof drop, ", dropout %g", c->dropout);
    for (int k = 0; k < c->n_fc_pre; k++) {
        printf("  fc_pre[%d]: %d -> %d, Hardtanh(0,20)%s\n", k, width, c->fc_pre[k], drop);
        width = c->fc_pre[k];
    }
    if (c->rnn_layers) {
        printf("  rnn: %d x %s%s %d (input %d)%s\n", c->rnn_layers, c->bidirectional ? "bi-" : "",
               ds_config_cell_name(c->cell), c->hidden, width,
               c->bidirectional ? ", directions summed" : "");
        width = c->hidden;
    }
    if (!c->bidirectional && c->lookahead)
        printf("  lookahead: context %d, Hardtanh(0,20)\n", c->lookahead);
    for (int k = 0; k < c->n_fc; k++)
        printf("  fc_hidden[%d]: %d, Hardtanh(0,20)%s\n", k, c->fc_hidden[k], drop);
    if (c->n_fc)
        width = c->fc_hidden[c->n_fc - 1];
    printf("  output: %sFC %d to %d classes (%s), CTC\n", c->out_bn ? "BatchNorm, " : "", width,
           c->n_classes, c->out_bias ? "with bias" : "no bias");
}

/* A feature file or a checkpoint, told apart by the format attribute. */
static int info_h5(const char *path)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info ck;
    ds_dataset *d;
    ds_status st = ds_checkpoint_read_config(path, &cfg, &dt, &ck);
    if (st == DS_OK) {
        printf("checkpoint %s: step %ld, epoch %d, %s, features %s (%d), normalisation %s\n", path,
               ck.step, ck.epoch, ds_dtype_name(dt), ds_feature_type_name(ck.feat.type),
               ds_feature_dim(&ck.feat), ds_feature_norm_name(ck.norm));
        describe(&cfg);
        /* end to end: every dataset read (HDF5 checks its checksum) and its values checked */
        const ds_model_limits lim = {.batch = 1, .frames = 64, .label_len = 8};
        ds_ctx *ctx;
        ds_model *m;
        st = ds_cli_checkpoint_model(path, &lim, &ctx, &m, &ck);
        int slots = -1;
        if (st == DS_OK)
            st = ds_checkpoint_check_optim(path, m, &slots);
        ds_cli_free_model(ctx, m);
        if (st != DS_OK)
            return ds_cli_fail("info", st);
        if (ck.has_resume)
            printf("  resume: epoch %d at global batch %ld, %d optimizer slot%s, written by "
                   "dstrain %s\n", ck.next_epoch, ck.next_batch, slots, slots == 1 ? "" : "s",
                   ck.version);
        else
            printf("  no resume state (written by dstrain %s): evaluates and transcribes only\n",
                   ck.version);
        printf("verified: every parameter, BatchNorm statistic%s read back, checksums match, "
               "values finite\n", slots >= 0 ? " and optimizer tensor" : "");
        return 0;
    }
    ds_status_clear_error();
    ds_dataset_verify_summary vs;
    st = ds_dataset_open(path, &d);
    if (st != DS_OK) {
        /* nothing to describe: the verification names the first problem
         * most precisely (missing, not HDF5, truncated, which dataset) */
        ds_status_clear_error();
        st = ds_dataset_verify(path, NULL, &vs);
        if (st == DS_OK)
            st = DS_FAIL(DS_ERR_IO, "%s: could not be opened, then verified: did it change?", path);
        return ds_cli_fail("info", st);
    }
    ds_dataset_describe(d, stdout);
    ds_dataset_close(d);
    fflush(stdout);   /* the description before any progress on stderr */
    st = ds_dataset_verify(path, stderr, &vs);
    if (st != DS_OK)
        return ds_cli_fail("info", st);
    ds_dataset_verify_print(path, &vs, stdout);
    return 0;
}

/* path opens with a zip's local header ("PK\3\4"): torch.save's format. */
static int is_zip(const char *path)
{
    struct stat sb;
    unsigned char m[4] = {0};
    FILE *f = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
    const int got = f && fread(m, 1, 4, f) == 4;
    if (f)
        fclose(f);
    return got && !memcmp(m, "PK\3\4", 4);
}

/* A zip given to info: a PyTorch state_dict described (keys and shapes
 * only, no storage read), else said to be a zip dstrain does not read;
 * it was read as a JSON config ("not valid JSON near PK"). */
static int info_pt(const char *path)
{
    ds_pt_dict d = {0};
    int wrapped = 0;
    ds_status st = ds_pt_load(path, 1, &d, &wrapped);
    if (st != DS_OK) {
        fprintf(stderr, "dstrain info: %s: a zip file, not a config, feature file or checkpoint, "
                        "and not a PyTorch state_dict dstrain reads: %s\n",
                path, ds_status_last_error());
        return 1;
    }
    size_t numel = 0;
    for (int i = 0; i < d.n; i++)
        numel += d.t[i].numel;
    printf("%s: a PyTorch state_dict (torch.save zip%s): %d tensors, %zu values; not a dstrain "
           "checkpoint: make one with dstrain import --pytorch %s OUT.h5\n",
           path, wrapped ? ", in a dict's \"state_dict\"" : "", d.n, numel, path);
    for (int i = 0; i < d.n; i++) {
        char shape[128];
        printf("  %s: %s %s\n", d.t[i].key, ds_pt_dtype_name(d.t[i].dt),
               ds_pt_shape_str(d.t[i].dims, d.t[i].rank, shape, sizeof shape));
    }
    ds_pt_dict_free(&d);
    return 0;
}

int ds_cli_info(int argc, char **argv)
{
    ds_flags fl;
    int rc = ds_flags_begin(&fl, &ds_cli_info_cmd, argc, argv);
    if (rc != DS_FLAGS_GO)
        return rc;
    if ((rc = ds_flags_next(&fl)) != -1)   /* the table has no options */
        return ds_flags_unhandled(&fl, rc);
    if (argc - optind > 1) {
        fprintf(stderr, "dstrain info: one preset, config, feature file or checkpoint at a time "
                        "(dstrain info --help)\n");
        return 2;
    }
    ds_model_cfg c;
    if (argc - optind == 1) {
        const char *a = argv[optind];
        if (is_zip(a))
            return info_pt(a);
        if (strstr(a, ".h5") || strstr(a, ".hdf5"))
            return info_h5(a);
        int is_file = strchr(a, '/') || strstr(a, ".json");
        if (ds_cli_load_model("info", is_file ? NULL : a, is_file ? a : NULL, &c))
            return 1;
        describe(&c);
        return 0;
    }
    printf("%-12s %14s  %s\n", "preset", "parameters", "rnn");
    for (int i = 0; ds_config_preset_name(i); i++) {
        if (ds_config_preset(ds_config_preset_name(i), &c) != DS_OK)
            return ds_cli_fail("info", DS_ERR_ARG);
        printf("%-12s %14zu  %d x %s%s %d\n", c.name, ds_model_config_param_count(&c), c.rnn_layers,
               c.bidirectional ? "bi-" : "", ds_config_cell_name(c.cell), c.hidden);
    }
    return 0;
}
