/* cli_eval.c - `dstrain eval` (WER and CER of a checkpoint on a feature
 * file) and `dstrain transcribe` (text of audio files). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alphabet.h"
#include "audio.h"
#include "checkpoint.h"
#include "cli.h"
#include "flags.h"
#include "decode.h"
#include "evaluate.h"
#include "featurizer.h"
#include "file_input.h"
#include "filter.h"
#include "log.h"

static ds_status run_eval(const char *ckpt, const char *data, int batch)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    ds_dataset *d = NULL;
    long *keep = NULL, n = 0;
    ds_filter_stats fs;
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_status st;
    /* checked before HDF5 opens them: a FIFO would block the open */
    DS_TRY(ds_file_require_regular(ckpt, "checkpoint (--checkpoint)"));
    DS_TRY(ds_file_require_regular(data, "feature file (--data)"));
    DS_TRY(ds_checkpoint_read_config(ckpt, &cfg, &dt, &info));
    DS_TRY_GOTO(st, ds_dataset_open(data, &d), out);
    if (d->n_features != cfg.n_features) {
        st = DS_FAIL(DS_ERR_ARG, "%s: %d features per frame, the checkpoint's model expects %d",
                     data, d->n_features, cfg.n_features);
        goto out;
    }
    /* a checkpoint of synthetic data records no features of its own (its
     * settings do not give its model's width): nothing to hold the data to */
    if (ds_feature_dim(&info.feat) == cfg.n_features) {
        char what[1200];
        snprintf(what, sizeof what, "%s (the model's training data)", ckpt);
        DS_TRY_GOTO(st, ds_feature_check_same(what, &info.feat, data, &d->feat), out);
    }
    DS_TRY_GOTO(st, ds_filter_dataset(d, &cfg, 0, 0, &keep, &n, &fs), out);
    if (n == 0) {   /* a WER of 0 over nothing read as a perfect score */
        if (d->n == 0)
            st = DS_FAIL(DS_ERR_ARG, "%s: nothing to score: the file holds no utterances (make "
                                     "it again with dstrain prep)", data);
        else
            st = DS_FAIL(DS_ERR_ARG, "%s: nothing to score: of its %ld utterances, %ld are too "
                                     "short for the model's CTC (their frames after its "
                                     "convolutions are fewer than their labels need) and %ld "
                                     "outside the duration limits", data, d->n,
                         fs.ctc_impossible, fs.too_short + fs.too_long);
        goto out;
    }
    const ds_model_limits lim = {batch, fs.max_frames > 0 ? fs.max_frames : 1,
                                 fs.max_labels > 0 ? fs.max_labels : 1};
    DS_TRY_GOTO(st, ds_cli_checkpoint_model(ckpt, &lim, &ctx, &m, &info), out);
    ds_eval_result r;
    DS_TRY_GOTO(st, ds_evaluate(m, d, keep, n, batch, info.norm, &r), out);
    printf("%s: %ld utterances (%ld too short for the model, not scored)\n", data, n, fs.ctc_impossible);
    printf("WER %.4f  CER %.4f  loss %.4f\n", ds_score_wer(&r.score), ds_score_cer(&r.score),
           ds_log_printable(r.loss));
out:
    ds_cli_free_model(ctx, m);
    free(keep);
    if (d)
        ds_dataset_close(d);
    return st;
}

enum { O_CHECKPOINT = 256, O_DATA, O_BATCH };

static const ds_flag eval_flags[] = {
    DS_FLAG_ARG(O_CHECKPOINT, "checkpoint", "C.h5", NULL, "the checkpoint (`dstrain train`)"),
    DS_FLAG_ARG(O_DATA, "data", "FEATURES.h5", NULL,
                "the feature file to score it on (`dstrain prep`), normalised as in training"),
    DS_FLAG_ARG(O_BATCH, "batch", "B", "16", "utterances per forward pass"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_eval_cmd = {
    .name = "eval",
    .run = ds_cli_eval,
    .summary = "WER and CER of a checkpoint on a feature file",
    .usage = "dstrain eval --checkpoint C.h5 --data FEATURES.h5 [--batch B]",
    .about = "Greedy-decoded WER and CER, and the CTC loss, of the checkpoint's model on the "
             "feature file; utterances too short for the model are counted, not scored.",
    .flags = eval_flags};

int ds_cli_eval(int argc, char **argv)
{
    const char *ckpt = NULL, *data = NULL;
    int batch = 16, c;
    double v;
    ds_flags fl;
    if ((c = ds_flags_begin(&fl, &ds_cli_eval_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_CHECKPOINT: ckpt = optarg; break;
        case O_DATA: data = optarg; break;
        case O_BATCH:
            if (ds_cli_count("eval", "batch", optarg, 1, 1e6, &v))
                return 2;
            batch = (int)v;
            break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dstrain eval: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (!ckpt || !data) {
        fprintf(stderr, "dstrain eval: need --checkpoint C.h5 and --data FEATURES.h5\n");
        return 2;
    }
    ds_status st = run_eval(ckpt, data, batch);
    return st == DS_OK ? 0 : ds_cli_fail("eval", st);
}

/* Features of one audio file, normalised as in training: malloc'd *x [*frames][dim]. */
static ds_status featurize(const char *path, const ds_ckpt_info *info, double max_s, float **x,
                           int *frames)
{
    float *audio = NULL;
    long n = 0;
    ds_featurizer *fz = NULL;
    DS_TRY(ds_audio_read_max(path, info->feat.sample_rate, max_s, &audio, &n));
    for (long i = 0; i < n; i++)
        if (!isfinite(audio[i])) {   /* a float WAV's NaN: empty text, exit 0, once */
            const char *what = isnan(audio[i]) ? "NaN" : "infinite";
            free(audio);
            return DS_FAIL(DS_ERR_NUM, "%s: sample %ld (%.3f s) is %s: not transcribed (prep "
                                       "skips such audio too)", path, i,
                           (double)i / info->feat.sample_rate, what);
        }
    const int dim = ds_feature_dim(&info->feat);
    *frames = (int)ds_feature_frames(&info->feat, n);
    *x = malloc((size_t)*frames * dim * sizeof **x);
    ds_status st = *x ? ds_featurizer_create(&info->feat, &fz)
                      : DS_FAIL(DS_ERR_MEM, "%s: features (%zu bytes)", path,
                                (size_t)*frames * dim * sizeof **x);
    if (st == DS_OK)
        st = ds_featurizer_run(fz, audio, n, *x);
    for (size_t k = 0; st == DS_OK && k < (size_t)*frames * dim; k++)
        if (!isfinite((*x)[k]))   /* as prep refuses them */
            st = DS_FAIL(DS_ERR_NUM, "%s: NaN or infinite feature at frame %zu: not transcribed",
                         path, k / (size_t)dim);
    if (st == DS_OK)
        ds_loader_normalize(*x, *frames, dim, info->norm, NULL, NULL);
    ds_featurizer_destroy(fz);
    free(audio);
    return st;
}

/* A file name on transcribe's AUDIO<TAB>TEXT lines: a tab, newline or other
 * control character in it is written as an escape (\t, \n, \xHH, and a
 * backslash as \\), so that one line stays one file. */
static void print_name(const char *path)
{
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", stdout);
        else if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
}

static ds_status transcribe_one(const char *ckpt, const char *path, double max_s)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    ds_batch b = {0};
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    float *x = NULL;
    double *logits = NULL;
    int frames = 0, *labels = NULL;
    char *text = NULL;
    ds_status st;
    DS_TRY(ds_checkpoint_read_config(ckpt, &cfg, &dt, &info));
    if (info.norm == DS_NORM_GLOBAL)   /* the file's statistics are not in the checkpoint yet */
        return DS_FAIL(DS_ERR_UNSUPPORTED, "%s: trained with --norm global; transcribe supports "
                                           "utterance and none", ckpt);
    DS_TRY_GOTO(st, featurize(path, &info, max_s, &x, &frames), out);
    if (ds_model_config_out_frames(&cfg, frames) < 1) {
        st = DS_FAIL(DS_ERR_ARG, "%s: %d frames is too short for the model", path, frames);
        goto out;
    }
    const ds_model_limits lim = {1, frames, 1};
    DS_TRY_GOTO(st, ds_cli_checkpoint_model(ckpt, &lim, &ctx, &m, &info), out);
    DS_TRY_GOTO(st, ds_batch_alloc(&b, 1, frames, cfg.n_features, 1), out);
    memcpy(b.features, x, (size_t)frames * cfg.n_features * sizeof *x);
    b.n = 1;
    b.t = frames;
    b.lengths[0] = frames;
    DS_TRY_GOTO(st, ds_model_set_batch(m, &b), out);
    DS_TRY_GOTO(st, ds_model_forward(m, 0), out);
    const int t = ds_model_batch_out_frames(m);
    logits = malloc((size_t)t * cfg.n_classes * sizeof *logits);
    labels = malloc((size_t)t * sizeof *labels);
    text = malloc((size_t)t + 1);
    if (!logits || !labels || !text) {
        st = DS_FAIL(DS_ERR_MEM, "%s: decoding buffers", path);
        goto out;
    }
    DS_TRY_GOTO(st, ds_model_logits(m, logits), out);
    int n = ds_decode_greedy(logits, t, cfg.n_classes, cfg.n_classes, DS_BLANK, labels);
    ds_alphabet_labels_to_text(labels, n, text);
    print_name(path);
    printf("\t%s\n", text);
out:
    free(text);
    free(labels);
    free(logits);
    free(x);
    ds_batch_free(&b);
    ds_cli_free_model(ctx, m);
    return st;
}

enum { O_CKPT = 256, O_MAX_DURATION };

static const ds_flag transcribe_flags[] = {
    DS_FLAG_OPERAND("AUDIO...", "audio files libsndfile reads (WAV, FLAC, ...) at the "
                                "checkpoint's sample rate (16 kHz)"),
    DS_FLAG_ARG(O_CKPT, "checkpoint", "C.h5", NULL, "the checkpoint (`dstrain train`)"),
    DS_FLAG_ARG(O_MAX_DURATION, "max-duration", "S", "300",
                "a file longer than S seconds is refused, named, before its memory is taken; "
                "0: no limit"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_transcribe_cmd = {
    .name = "transcribe",
    .run = ds_cli_transcribe,
    .summary = "text of audio files from a checkpoint",
    .usage = "dstrain transcribe --checkpoint C.h5 AUDIO...",
    .about = "Prints `AUDIO<TAB>TEXT` for each file (greedy CTC decoding); a file that fails is "
             "named and the others go on (exit 1).",
    .flags = transcribe_flags};

int ds_cli_transcribe(int argc, char **argv)
{
    const char *ckpt = NULL;
    double max_s = DS_AUDIO_MAX_DURATION_S;
    int c;
    ds_flags fl;
    if ((c = ds_flags_begin(&fl, &ds_cli_transcribe_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1) {
        if (c == O_CKPT)
            ckpt = optarg;
        else if (c == O_MAX_DURATION) {
            if (ds_cli_num("transcribe", "max-duration", optarg, 0, 1e7, &max_s))
                return 2;
        } else
            return ds_flags_unhandled(&fl, c);
    }
    if (!ckpt || optind >= argc) {
        fprintf(stderr, "dstrain transcribe: need --checkpoint C.h5 and at least one audio file\n");
        return 2;
    }
    int failed = 0;
    for (int i = optind; i < argc; i++) {
        ds_status_clear_error();
        ds_status st = transcribe_one(ckpt, argv[i], max_s);
        if (st != DS_OK)
            failed = ds_cli_fail("transcribe", st);
    }
    return failed;
}
