/* fuzz_config.c - libFuzzer harness: model config JSON through
 * ds_config_parse, and every accepted config back to JSON and parsed again.
 *
 * Why: configs are written by hand (--config, `dstrain info FILE.json`) and
 * ride inside every checkpoint as ds_config_to_json's text, parsed again on
 * load. The parser must refuse a bad one naming the field, and whatever it
 * accepts must come back from that round trip unchanged, or a checkpoint
 * that saved fine could never be loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_file.h"
#include "model.h"

static void fail(const char *what, const char *json)
{
    fprintf(stderr, "fuzz: %s: %s\n%s\n", what, ds_status_last_error(), json);
    abort();
}

static void round_trip(const ds_model_cfg *a)
{
    char json[DS_CONFIG_JSON_MAX];   /* what a checkpoint's write_attrs gives it */
    ds_model_cfg b;
    if (ds_config_to_json(a, json, sizeof json) != DS_OK)
        fail("an accepted config does not fit ds_config_to_json", "");
    if (ds_config_parse(json, "round trip", &b) != DS_OK)
        fail("ds_config_to_json wrote what ds_config_parse refuses", json);
    if (memcmp(a, &b, sizeof b) != 0)   /* parse zeroes the struct: padding compares */
        fail("a config changed on its way through JSON", json);
    (void)ds_model_config_param_count(a);     /* `dstrain info`'s parameter count */
    (void)ds_model_config_out_frames(a, 400);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = malloc(size + 1);   /* the parser takes a C string */
    if (!json)
        abort();
    memcpy(json, data, size);
    json[size] = '\0';
    ds_status_clear_error();
    ds_model_cfg cfg;
    ds_status st = ds_config_parse(json, "fuzz", &cfg);
    fuzz_check_status(st);
    if (st == DS_OK)
        round_trip(&cfg);
    free(json);
    return 0;
}
