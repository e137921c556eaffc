/* config.c - model configuration from JSON, with every field checked and
 * errors that name the source and the field. */
#include "config.h"

#include "file.h"
#include "file_input.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

extern const struct { const char *name; const char *json; } ds_preset_table[];

const char *ds_config_cell_name(ds_cell c)
{
    switch (c) {
    case DS_CELL_LSTM: return "lstm";
    case DS_CELL_GRU: return "gru";
    case DS_CELL_RNN_TANH: return "rnn_tanh";
    case DS_CELL_RNN_RELU: return "rnn_relu";
    }
    return "?";
}

/* x is a whole number an int holds. Compared before the cast: casting a
 * double outside int's range is undefined (found by tests/fuzz). */
static int is_int(double x) { return x >= INT_MIN && x <= INT_MAX && x == (double)(int)x; }

static ds_status get_int(const cJSON *obj, const char *key, int required, int def, int lo,
                         int hi, const char *src, const char *ctx, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return DS_FAIL(DS_ERR_ARG, "%s: %s%s is missing", src, ctx, key);
        *out = def;
        return DS_OK;
    }
    if (cJSON_IsBool(v)) {
        *out = cJSON_IsTrue(v);
    } else if (!cJSON_IsNumber(v) || !is_int(v->valuedouble)) {
        return DS_FAIL(DS_ERR_ARG, "%s: %s%s must be an integer", src, ctx, key);
    } else {
        *out = (int)v->valuedouble;
    }
    if (*out < lo || *out > hi)
        return DS_FAIL(DS_ERR_ARG, "%s: %s%s = %d is outside [%d, %d]", src, ctx, key, *out, lo, hi);
    return DS_OK;
}

/* Every key of obj is one of allowed (NULL-terminated): a misspelt field
 * ("contxt") would otherwise be taken as absent, its default silently used. */
static ds_status check_keys(const cJSON *obj, const char *const *allowed, const char *src,
                            const char *ctx)
{
    for (const cJSON *k = obj->child; k; k = k->next) {
        int known = 0;
        for (int i = 0; allowed[i] && !known; i++)
            known = !strcmp(k->string, allowed[i]);
        if (known)
            continue;
        char list[256] = "";
        for (int i = 0; allowed[i]; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, allowed[i], sizeof list - strlen(list) - 1);
        }
        return DS_FAIL(DS_ERR_ARG, "%s: %s%s is not a field (fields: %s)", src, ctx, k->string, list);
    }
    return DS_OK;
}

static ds_status get_double(const cJSON *obj, const char *key, double def, double lo, double hi,
                            const char *src, const char *ctx, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        *out = def;
        return DS_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
        return DS_FAIL(DS_ERR_ARG, "%s: %s%s must be a number in [%g, %g]", src, ctx, key, lo, hi);
    *out = v->valuedouble;
    return DS_OK;
}

/* "activation": "clipped_relu" (Hardtanh(0, 20), the default) or "relu". */
static ds_status get_activation(const cJSON *l, const char *src, const char *ctx, int *relu)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, "activation");
    *relu = 0;
    if (!v)
        return DS_OK;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "relu"))
        *relu = 1;
    else if (!cJSON_IsString(v) || strcmp(v->valuestring, "clipped_relu"))
        return DS_FAIL(DS_ERR_ARG, "%s: %sactivation must be \"clipped_relu\" or \"relu\"", src, ctx);
    return DS_OK;
}

/* One entry of conv into k; *repeat: how many layers it stands for. */
static ds_status parse_conv_layer(const cJSON *l, const char *src, const char *ctx,
                                  ds_conv_cfg *k, int *repeat)
{
    if (!cJSON_IsObject(l))
        return DS_FAIL(DS_ERR_ARG, "%s: %s must be an object", src, ctx);
    static const char *const fields[] = {"channels", "kernel_time", "kernel_freq", "stride_time",
                                         "stride_freq", "pad_time", "pad_freq", "dilation_time",
                                         "bias", "activation", "dropout", "block", "repeat", NULL};
    DS_TRY(check_keys(l, fields, src, ctx));
    DS_TRY(get_int(l, "channels", 1, 0, 1, 4096, src, ctx, &k->channels));
    DS_TRY(get_int(l, "kernel_time", 1, 0, 1, 256, src, ctx, &k->kernel_time));
    DS_TRY(get_int(l, "kernel_freq", 1, 0, 1, 256, src, ctx, &k->kernel_freq));
    DS_TRY(get_int(l, "stride_time", 0, 1, 1, 16, src, ctx, &k->stride_time));
    DS_TRY(get_int(l, "stride_freq", 0, 1, 1, 16, src, ctx, &k->stride_freq));
    DS_TRY(get_int(l, "pad_time", 0, 0, 0, 256, src, ctx, &k->pad_time));
    DS_TRY(get_int(l, "pad_freq", 0, 0, 0, 256, src, ctx, &k->pad_freq));
    DS_TRY(get_int(l, "dilation_time", 0, 1, 1, 64, src, ctx, &k->dilation_time));
    int bias;
    DS_TRY(get_int(l, "bias", 0, 1, 0, 1, src, ctx, &bias));
    k->no_bias = !bias;
    DS_TRY(get_activation(l, src, ctx, &k->relu));
    DS_TRY(get_double(l, "dropout", 0, 0, 0.95, src, ctx, &k->dropout));
    DS_TRY(get_int(l, "block", 0, 0, 0, DS_MAX_CONV, src, ctx, &k->block));   /* 0: none */
    return get_int(l, "repeat", 0, 1, 1, DS_MAX_CONV, src, ctx, repeat);
}

/* A layer keeps its input's frames and bins at every length ("same"
 * padding, stride 1): what a residual sum across it needs. */
static int keeps_shape(const ds_conv_cfg *k)
{
    const int span = (k->dilation_time > 1 ? k->dilation_time : 1) * (k->kernel_time - 1);
    return k->stride_time == 1 && k->stride_freq == 1 && 2 * k->pad_time == span &&
           2 * k->pad_freq == k->kernel_freq - 1;
}

/* Residual blocks: runs of consecutive layers, none the first layer (its
 * input is the features), every layer a residual sum spans keeping its
 * input's shape: a block's own layers, and with dense_residual every
 * layer from the first block on. */
static ds_status check_blocks(const char *src, const ds_model_cfg *c)
{
    int first = -1, last = -1, n_blocks = 0;
    for (int i = 0; i < c->n_conv; i++) {
        const int b = c->conv[i].block;
        if (!b)
            continue;
        if (i == 0)
            return DS_FAIL(DS_ERR_ARG, "%s: conv[0].block: the first layer's input is the "
                                       "features, which a residual cannot add", src);
        if (c->conv[i - 1].block != b) {   /* a block starts */
            for (int k = 0; k < i; k++)
                if (c->conv[k].block == b)
                    return DS_FAIL(DS_ERR_ARG, "%s: conv[%d].block %d: the layers of a block must "
                                               "be consecutive (conv[%d] is in it too)", src, i, b, k);
            if (++n_blocks > DS_MAX_RES && c->dense_residual)
                return DS_FAIL(DS_ERR_ARG, "%s: dense_residual takes at most %d blocks", src,
                               DS_MAX_RES);
        }
        first = first < 0 ? i : first;
        last = i;
    }
    if (c->dense_residual && first < 0)
        return DS_FAIL(DS_ERR_ARG, "%s: dense_residual needs residual blocks (conv[].block)", src);
    for (int i = first; i >= 0 && i <= last; i++)
        if ((c->conv[i].block || c->dense_residual) && !keeps_shape(&c->conv[i]))
            return DS_FAIL(DS_ERR_ARG, "%s: conv[%d] is inside a residual sum, so it must keep "
                                       "its input's frames and bins: stride 1 and \"same\" padding "
                                       "(pad_time = dilation_time (kernel_time - 1) / 2, pad_freq = "
                                       "(kernel_freq - 1) / 2)", src, i);
    return DS_OK;
}

int ds_config_residual_sources(const ds_model_cfg *c, int i, int *src)
{
    const int b = c->conv[i].block;
    if (!b || (i + 1 < c->n_conv && c->conv[i + 1].block == b))
        return 0;   /* not a block's last layer */
    int n = 0;
    for (int s = 1; s <= i && n < DS_MAX_RES; s++) {
        const int starts = c->conv[s].block && c->conv[s].block != c->conv[s - 1].block;
        if (starts && (c->dense_residual || c->conv[s].block == b))
            src[n++] = s - 1;
    }
    return n;
}

/* conv: absent or [] only where the input has another way in (context,
 * fc_pre). An entry with "repeat": R stands for R layers alike. */
static ds_status parse_conv(const cJSON *arr, const char *src, ds_model_cfg *c)
{
    c->n_conv = 0;
    if (!arr && (c->context || c->n_fc_pre))
        return DS_OK;
    if (!cJSON_IsArray(arr))
        return DS_FAIL(DS_ERR_ARG, "%s: conv must be an array of layers", src);
    const int entries = cJSON_GetArraySize(arr);
    for (int i = 0; i < entries; i++) {
        char ctx[32];
        snprintf(ctx, sizeof ctx, "conv[%d].", i);
        ds_conv_cfg k = {0};
        int repeat;
        DS_TRY(parse_conv_layer(cJSON_GetArrayItem(arr, i), src, ctx, &k, &repeat));
        if (c->n_conv + repeat > DS_MAX_CONV)
            return DS_FAIL(DS_ERR_ARG, "%s: conv has more than %d layers (repeats counted)", src,
                           DS_MAX_CONV);
        for (int r = 0; r < repeat; r++)
            c->conv[c->n_conv++] = k;
    }
    const int lo = c->context || c->n_fc_pre ? 0 : 1;
    if (c->n_conv < lo)
        return DS_FAIL(DS_ERR_ARG, "%s: conv has %d layers, need %d..%d", src, c->n_conv, lo,
                       DS_MAX_CONV);
    if (c->n_conv && c->context)
        return DS_FAIL(DS_ERR_ARG, "%s: context stacks input frames for FC layers: it takes no "
                                   "conv layers (conv has %d)", src, c->n_conv);
    return check_blocks(src, c);
}

/* rnn: absent is no recurrent layers (Jasper, Wav2Letter+). */
static ds_status parse_rnn(const cJSON *r, const char *src, ds_model_cfg *c)
{
    if (!r) {
        c->rnn_layers = 0;
        return DS_OK;
    }
    if (!cJSON_IsObject(r))
        return DS_FAIL(DS_ERR_ARG, "%s: rnn must be an object", src);
    static const char *const fields[] = {"type", "hidden", "layers", "bidirectional", "lookahead", NULL};
    DS_TRY(check_keys(r, fields, src, "rnn."));
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(r, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    if (!t)
        return DS_FAIL(DS_ERR_ARG, "%s: rnn.type is missing (lstm|gru|rnn_tanh|rnn_relu)", src);
    static const ds_cell cells[] = {DS_CELL_LSTM, DS_CELL_GRU, DS_CELL_RNN_TANH, DS_CELL_RNN_RELU};
    int found = 0;
    for (size_t i = 0; i < sizeof cells / sizeof cells[0] && !found; i++)
        if (!strcmp(t, ds_config_cell_name(cells[i]))) {
            c->cell = cells[i];
            found = 1;
        }
    if (!found)
        return DS_FAIL(DS_ERR_ARG, "%s: rnn.type \"%s\" is not lstm|gru|rnn_tanh|rnn_relu", src, t);
    DS_TRY(get_int(r, "hidden", 1, 0, 1, 16384, src, "rnn.", &c->hidden));
    DS_TRY(get_int(r, "layers", 1, 0, 1, 32, src, "rnn.", &c->rnn_layers));
    DS_TRY(get_int(r, "bidirectional", 0, 1, 0, 1, src, "rnn.", &c->bidirectional));
    DS_TRY(get_int(r, "lookahead", 0, 0, 0, 256, src, "rnn.", &c->lookahead));
    if (c->bidirectional && c->lookahead)
        return DS_FAIL(DS_ERR_ARG, "%s: rnn.lookahead needs a unidirectional rnn", src);
    return DS_OK;
}

/* A list of FC sizes (fc_hidden, fc_pre): absent is none. */
static ds_status parse_fc(const cJSON *arr, const char *key, const char *src, int *n, int *sizes)
{
    *n = 0;
    if (!arr)
        return DS_OK;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > DS_MAX_FC)
        return DS_FAIL(DS_ERR_ARG, "%s: %s must be an array of at most %d sizes", src, key, DS_MAX_FC);
    *n = cJSON_GetArraySize(arr);
    for (int i = 0; i < *n; i++) {
        const cJSON *v = cJSON_GetArrayItem(arr, i);
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > DS_MAX_FC_SIZE ||
            v->valuedouble != (double)v->valueint)
            return DS_FAIL(DS_ERR_ARG, "%s: %s[%d] must be an integer in 1..%d", src, key, i,
                           DS_MAX_FC_SIZE);
        sizes[i] = v->valueint;
    }
    return DS_OK;
}

/* output: {"batch_norm": bool, "bias": bool}, absent: DeepSpeech2's (BatchNorm, no bias). */
static ds_status parse_output(const cJSON *o, const char *src, ds_model_cfg *c)
{
    c->out_bn = 1, c->out_bias = 0;
    if (!o)
        return DS_OK;
    if (!cJSON_IsObject(o))
        return DS_FAIL(DS_ERR_ARG, "%s: output must be an object {\"batch_norm\": ..., \"bias\": ...}", src);
    static const char *const fields[] = {"batch_norm", "bias", NULL};
    DS_TRY(check_keys(o, fields, src, "output."));
    DS_TRY(get_int(o, "batch_norm", 0, 1, 0, 1, src, "output.", &c->out_bn));
    return get_int(o, "bias", 0, 0, 0, 1, src, "output.", &c->out_bias);
}

/* No object in v (at where: "conv[0].") has a key twice: readers differ on
 * which one counts (cJSON's lookup takes the first, Python's json the last),
 * so the model trained would not be the one another tool reads. */
static ds_status no_duplicate_keys(const cJSON *v, const char *src, const char *where)
{
    char at[256];
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (cJSON_IsObject(v))
            for (const cJSON *d = v->child; d != c; d = d->next)
                if (!strcmp(d->string, c->string))
                    return DS_FAIL(DS_ERR_ARG, "%s: the key %s%s appears twice (JSON readers "
                                               "differ on which one counts): keep one",
                                   src, where, c->string);
        if (cJSON_IsObject(v))
            snprintf(at, sizeof at, "%s%s.", where, c->string);
        else
            snprintf(at, sizeof at, "%.*s[%d].", (int)(strlen(where) ? strlen(where) - 1 : 0),
                     where, i);
        DS_TRY(no_duplicate_keys(c, src, at));
    }
    return DS_OK;
}

/* Each conv layer leaves at least one frequency bin: a kernel wider than
 * its (padded) input made a model of "0 parameters" that trains nothing. */
static ds_status check_freq_bins(const char *src, const ds_model_cfg *c)
{
    int bins = c->n_features;
    for (int i = 0; i < c->n_conv; i++) {
        const ds_conv_cfg *k = &c->conv[i];
        const int padded = bins + 2 * k->pad_freq;
        if (padded < k->kernel_freq)
            return DS_FAIL(DS_ERR_ARG, "%s: conv[%d].kernel_freq = %d is wider than the layer's "
                                       "%d frequency bins (%d in, pad_freq %d each side; "
                                       "n_features %d), so it produces none: make it at most "
                                       "%d, or pad more", src, i, k->kernel_freq, padded, bins,
                           k->pad_freq, c->n_features, padded);
        bins = (padded - k->kernel_freq) / k->stride_freq + 1;
    }
    return DS_OK;
}

ds_status ds_config_parse(const char *json, const char *source, ds_model_cfg *out)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        return DS_FAIL(DS_ERR_ARG, "%s: not valid JSON near \"%.20s\"", source, at ? at : "?");
    }
    ds_status st = DS_OK;
    if (!cJSON_IsObject(root)) {
        st = DS_FAIL(DS_ERR_ARG, "%s: the config must be a JSON object", source);
        goto free_root;
    }
    static const char *const fields[] = {"name", "comment", "n_features", "n_classes", "conv",
                                         "rnn", "fc_hidden", "bn_eps", "bn_momentum", "context",
                                         "fc_pre", "dropout", "output", "dense_residual", NULL};
    DS_TRY_GOTO(st, no_duplicate_keys(root, source, ""), free_root);
    DS_TRY_GOTO(st, check_keys(root, fields, source, ""), free_root);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(out->name, sizeof out->name, "%s", cJSON_IsString(name) ? name->valuestring : "custom");
    DS_TRY_GOTO(st, get_int(root, "n_features", 0, 161, 1, 100000, source, "", &out->n_features), free_root);
    DS_TRY_GOTO(st, get_int(root, "n_classes", 0, 29, 2, 100000, source, "", &out->n_classes), free_root);
    DS_TRY_GOTO(st, get_int(root, "context", 0, 0, 0, 64, source, "", &out->context), free_root);
    DS_TRY_GOTO(st, parse_fc(cJSON_GetObjectItemCaseSensitive(root, "fc_pre"), "fc_pre", source,
                             &out->n_fc_pre, out->fc_pre), free_root);
    DS_TRY_GOTO(st, get_int(root, "dense_residual", 0, 0, 0, 1, source, "", &out->dense_residual),
                free_root);
    DS_TRY_GOTO(st, parse_conv(cJSON_GetObjectItemCaseSensitive(root, "conv"), source, out), free_root);
    DS_TRY_GOTO(st, check_freq_bins(source, out), free_root);
    DS_TRY_GOTO(st, parse_rnn(cJSON_GetObjectItemCaseSensitive(root, "rnn"), source, out), free_root);
    DS_TRY_GOTO(st, parse_fc(cJSON_GetObjectItemCaseSensitive(root, "fc_hidden"), "fc_hidden",
                             source, &out->n_fc, out->fc_hidden), free_root);
    DS_TRY_GOTO(st, get_double(root, "dropout", 0, 0, 0.95, source, "", &out->dropout), free_root);
    if (out->dropout > 0 && !out->n_fc_pre && !out->n_fc) {
        st = DS_FAIL(DS_ERR_ARG, "%s: dropout %g follows FC layers (fc_pre, fc_hidden): this "
                                 "config has none, so it would drop nothing", source, out->dropout);
        goto free_root;
    }
    DS_TRY_GOTO(st, parse_output(cJSON_GetObjectItemCaseSensitive(root, "output"), source, out), free_root);
    DS_TRY_GOTO(st, get_double(root, "bn_eps", 1e-5, 0, 1, source, "", &out->bn_eps), free_root);
    DS_TRY_GOTO(st, get_double(root, "bn_momentum", 0.1, 0, 1, source, "", &out->bn_momentum), free_root);
free_root:
    cJSON_Delete(root);
    return st;
}

ds_status ds_config_load_file(const char *path, ds_model_cfg *out)
{
    char *text;
    /* a FIFO or a device would block the read for ever */
    DS_TRY(ds_file_require_regular(path, "model config (--config)"));
    DS_TRY(ds_file_read_text(path, 1 << 20, "model config", &text));
    ds_status st = ds_config_parse(text, path, out);
    free(text);
    return st;
}

const char *ds_config_preset_json(const char *name)
{
    for (int i = 0; ds_preset_table[i].name; i++)
        if (!strcmp(ds_preset_table[i].name, name))
            return ds_preset_table[i].json;
    return NULL;
}

const char *ds_config_preset_name(int i)
{
    for (int k = 0; k < i; k++)
        if (!ds_preset_table[k].name)
            return NULL;
    return ds_preset_table[i].name;
}

ds_status ds_config_preset(const char *name, ds_model_cfg *out)
{
    const char *json = ds_config_preset_json(name);
    if (!json) {
        char list[256] = "";
        for (int i = 0; ds_preset_table[i].name; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, ds_preset_table[i].name, sizeof list - strlen(list) - 1);
        }
        return DS_FAIL(DS_ERR_ARG, "unknown model preset \"%s\" (presets: %s)", name, list);
    }
    char source[96];
    snprintf(source, sizeof source, "preset %s", name);
    return ds_config_parse(json, source, out);
}

/* s as the inside of a JSON string into out [cap >= 6 * strlen(s) + 1]:
 * the name is free text from the user's JSON, and a quote, backslash or
 * control character in it written raw made a checkpoint whose config could
 * not be parsed again (found by tests/fuzz). */
static void json_escape(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 7 <= cap; p++) {
        if (*p == '"' || *p == '\\')
            n += (size_t)snprintf(out + n, cap - n, "\\%c", *p);
        else if (*p < 0x20)
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = '\0';
}

ds_status ds_config_to_json(const ds_model_cfg *c, char *buf, size_t cap)
{
    char name[6 * sizeof c->name];
    json_escape(c->name, name, sizeof name);
    size_t n = 0;
#define PUT(...)                                                       \
    do {                                                               \
        int k_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__); \
        if (k_ < 0)                                                    \
            return DS_FAIL(DS_ERR_ARG, "config json");                 \
        n += (size_t)k_;                                               \
    } while (0)
    PUT("{\"name\":\"%s\",\"n_features\":%d,\"n_classes\":%d,\"conv\":[", name, c->n_features,
        c->n_classes);
    for (int i = 0; i < c->n_conv; i++) {
        const ds_conv_cfg *k = &c->conv[i];
        PUT("%s{\"channels\":%d,\"kernel_time\":%d,\"kernel_freq\":%d,\"stride_time\":%d,"
            "\"stride_freq\":%d,\"pad_time\":%d,\"pad_freq\":%d",
            i ? "," : "", k->channels, k->kernel_time, k->kernel_freq, k->stride_time,
            k->stride_freq, k->pad_time, k->pad_freq);
        /* the other families' fields only where set, as below */
        if (k->dilation_time > 1)
            PUT(",\"dilation_time\":%d", k->dilation_time);
        if (k->no_bias)
            PUT(",\"bias\":false");
        if (k->relu)
            PUT(",\"activation\":\"relu\"");
        if (k->dropout > 0)
            PUT(",\"dropout\":%.17g", k->dropout);
        if (k->block)
            PUT(",\"block\":%d", k->block);
        PUT("}");
    }
    PUT("]");
    if (c->rnn_layers)
        PUT(",\"rnn\":{\"type\":\"%s\",\"hidden\":%d,\"layers\":%d,\"bidirectional\":%s,"
            "\"lookahead\":%d}",
            ds_config_cell_name(c->cell), c->hidden, c->rnn_layers,
            c->bidirectional ? "true" : "false", c->lookahead);
    PUT(",\"fc_hidden\":[");
    for (int i = 0; i < c->n_fc; i++)
        PUT("%s%d", i ? "," : "", c->fc_hidden[i]);
    PUT("],\"bn_eps\":%.17g,\"bn_momentum\":%.17g", c->bn_eps, c->bn_momentum);
    /* the other families' fields only where set: a DeepSpeech2 config
     * writes the JSON it always wrote */
    if (c->context)
        PUT(",\"context\":%d", c->context);
    if (c->n_fc_pre) {
        PUT(",\"fc_pre\":[");
        for (int i = 0; i < c->n_fc_pre; i++)
            PUT("%s%d", i ? "," : "", c->fc_pre[i]);
        PUT("]");
    }
    if (c->dropout > 0)
        PUT(",\"dropout\":%.17g", c->dropout);
    if (c->dense_residual)
        PUT(",\"dense_residual\":true");
    if (!c->out_bn || c->out_bias)
        PUT(",\"output\":{\"batch_norm\":%s,\"bias\":%s}", c->out_bn ? "true" : "false",
            c->out_bias ? "true" : "false");
    PUT("}");
#undef PUT
    if (n >= cap)
        return DS_FAIL(DS_ERR_ARG, "config JSON longer than %zu bytes", cap);
    return DS_OK;
}
