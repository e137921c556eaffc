/* run_config.c - a run's options as key=value lines, compared on resume; see
 * run_config.h. */
#include "run_config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "kv_text.h"

/* The model's JSON as model.key=value lines; arrays as key[i]. */
static void flatten(ds_kv_text *t, const cJSON *v, const char *prefix)
{
    char key[256];
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        int i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            if (cJSON_IsArray(v))
                snprintf(key, sizeof key, "%s[%d]", prefix, i);
            else
                snprintf(key, sizeof key, "%s.%s", prefix, c->string);
            flatten(t, c, key);
        }
        return;
    }
    if (cJSON_IsString(v)) {
        ds_kv_put(t, "%s=", prefix);
        ds_kv_put_str(t, v->valuestring);
        ds_kv_put(t, "\n");
    }
    else if (cJSON_IsBool(v))
        ds_kv_put(t, "%s=%s\n", prefix, cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v)) {
        char b[32];
        ds_kv_put(t, "%s=%s\n", prefix, ds_kv_num(v->valuedouble, b, sizeof b));
    }
    else
        ds_kv_put(t, "%s=null\n", prefix);
}

ds_status ds_run_config_text(const ds_train_opts *o, int ranks, const char *features,
                             long utterances, const char *data_fingerprint, char *buf, size_t cap)
{
    ds_kv_text t = {buf, cap, 0, 0};
    buf[0] = '\0';
    char json[DS_CONFIG_JSON_MAX];
    DS_TRY(ds_config_to_json(&o->model, json, sizeof json));
    cJSON *root = cJSON_Parse(json);
    if (!root)
        return DS_FAIL(DS_ERR_ARG, "model %s: its own JSON does not parse", o->model.name);
    flatten(&t, root, "model");
    cJSON_Delete(root);
    const ds_optim_cfg *c = &o->optim;
    char a[32], b[32];
    ds_kv_put(&t, "precision=%s\ndevice=", ds_dtype_name(o->precision));
    ds_kv_put_str(&t, o->device);
    ds_kv_put(&t, "\nglobal_batch=%d\nbatch=%d\nranks=%d\nseed=%llu\n", o->batch * ranks,
              o->batch, ranks, (unsigned long long)o->seed);
    ds_kv_put(&t, "data=");
    ds_kv_put_str(&t, o->train_path ? o->train_path : "synthetic");
    ds_kv_put(&t, "\nfeatures=");
    ds_kv_put_str(&t, features);   /* read from the data file */
    ds_kv_put(&t, "\nutterances=%ld\nnorm=%s\n", utterances, ds_feature_norm_name(o->norm));
    if (data_fingerprint)
        ds_kv_put(&t, "data_fingerprint=%s\n", data_fingerprint);
    if (!o->train_path)
        ds_kv_put(&t, "synthetic_utts=%d\nmax_frames=%d\n", o->synthetic_utts, o->max_frames);
    else
        ds_kv_put(&t, "min_duration=%s\nmax_duration=%s\nspec_augment=%d,%d,%d,%d\n",
                  ds_kv_num(o->min_duration, a, sizeof a), ds_kv_num(o->max_duration, b, sizeof b),
                  o->aug.freq_masks, o->aug.freq_width, o->aug.time_masks, o->aug.time_width);
    ds_kv_put(&t, "optimizer=%s\nlr=%s\n", ds_optim_kind_name(c->kind),
              ds_kv_num(c->lr, a, sizeof a));
    ds_kv_put(&t, "momentum=%s\nnesterov=%d\n", ds_kv_num(c->momentum, a, sizeof a), c->nesterov);
    ds_kv_put(&t, "betas=%s,", ds_kv_num(c->beta1, a, sizeof a));
    ds_kv_put(&t, "%s\n", ds_kv_num(c->beta2, a, sizeof a));
    ds_kv_put(&t, "eps=%s\n", ds_kv_num(c->eps, a, sizeof a));
    ds_kv_put(&t, "weight_decay=%s\n", ds_kv_num(c->weight_decay, a, sizeof a));
    ds_kv_put(&t, "lr_schedule=%s\nanneal=%s\n", ds_optim_lr_schedule_name(c->schedule),
              ds_kv_num(c->anneal, a, sizeof a));
    ds_kv_put(&t, "poly_power=%s\nwarmup=%ld\n", ds_kv_num(c->poly_power, a, sizeof a),
              c->warmup_steps);
    ds_kv_put(&t, "max_norm=%s\n", ds_kv_num(c->max_grad_norm, a, sizeof a));
    ds_kv_put(&t, "loss_scale=%s\nloss_scale_window=%ld\n", ds_kv_num(c->loss_scale, a, sizeof a),
              c->loss_scale_window);
    ds_kv_put(&t, "steps=%ld\nepochs=%d\nreduce_dtype=%s\nlocal_bn=%d\n", o->steps, o->epochs,
              ds_dtype_name(o->reduce_dtype), o->local_bn);
    if (o->bucket_frames)   /* absent when off: as in checkpoints made before the option */
        ds_kv_put(&t, "bucket_frames=%d\n", o->bucket_frames);
    if (t.full)
        return DS_FAIL(DS_ERR_ARG, "the run's configuration is over %zu characters", cap);
    return DS_OK;
}

/* Keys an exact resume cannot do without: the weights' shapes and types,
 * what the optimizer's state means, and the order the samples come in. */
static int must_match(const char *key, size_t len)
{
    static const char *const keys[] = {"precision", "global_batch", "seed",
                                       "features", "utterances", "norm", "synthetic_utts",
                                       "max_frames", "optimizer", "local_bn",
                                       "data_fingerprint", NULL};
    if (len > 6 && !strncmp(key, "model.", 6))
        return 1;
    for (int i = 0; keys[i]; i++)
        if (strlen(keys[i]) == len && !strncmp(key, keys[i], len))
            return 1;
    return 0;
}

/* Keys a checkpoint of an older version lacks: absent there, not a
 * difference that refuses the resume (a present one must match). */
static int added_later(const char *key, size_t len)
{
    static const char k[] = "data_fingerprint";
    return len == sizeof k - 1 && !strncmp(key, k, len);
}

/* Each key of a whose value in b differs or is missing -> why (must match)
 * or notes; a is the checkpoint's lines when a_is_was. */
static void compare(const char *a, const char *b, int a_is_was, ds_kv_text *why,
                    ds_kv_text *notes, int *n_why)
{
    for (const char *p = a; p && *p;) {
        const char *end = strchr(p, '\n');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq) {
            const size_t klen = (size_t)(eq - p), alen = n - klen - 1;
            size_t blen = 0;
            const char *bv = ds_kv_find(b, p, klen, &blen);
            /* the second pass (a is now) only adds keys the checkpoint lacks */
            if (!a_is_was && bv) {
                p = end ? end + 1 : NULL;
                continue;
            }
            if (!bv || blen != alen || strncmp(bv, eq + 1, alen) != 0) {
                /* a key this version added, which an older checkpoint lacks: a note */
                const int must = must_match(p, klen) && !(!a_is_was && !bv && added_later(p, klen));
                ds_kv_text *t = must ? why : notes;
                const char *was = a_is_was ? eq + 1 : bv, *now = a_is_was ? bv : eq + 1;
                const int wl = (int)(a_is_was ? alen : blen), nl = (int)(a_is_was ? blen : alen);
                ds_kv_put(t, "%s%.*s: %.*s in the checkpoint, %.*s now", t->len ? "; " : "",
                          (int)klen, p, was ? wl : 6, was ? was : "(none)", now ? nl : 6,
                          now ? now : "(none)");
                *n_why += must;
            }
        }
        p = end ? end + 1 : NULL;
    }
}

int ds_run_config_diff(const char *was, const char *now, char *why, size_t why_cap, char *notes,
                       size_t notes_cap)
{
    ds_kv_text w = {why, why_cap, 0, 0}, n = {notes, notes_cap, 0, 0};
    why[0] = notes[0] = '\0';
    int count = 0;
    compare(was, now, 1, &w, &n, &count);
    compare(now, was, 0, &w, &n, &count);   /* keys the checkpoint's run did not have */
    return count;
}
