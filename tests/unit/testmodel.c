/* testmodel.c - see testmodel.h. */
#include "testmodel.h"

#include <stdlib.h>
#include <string.h>

/* Moves BatchNorm parameters and running statistics off their identity
 * initialisation so the check exercises them. */
ds_status t_perturb_bn(ds_model *m, ds_rng *rng)
{
    size_t np = ds_model_param_count(m), ns = ds_model_bn_stats_count(m);
    double *p = malloc((np > ns ? np : ns) * sizeof *p);
    if (!p)
        return DS_FAIL(DS_ERR_MEM, "host copy");
    ds_status st = ds_model_get(m, DS_PARAMS, p);
    for (int i = 0; st == DS_OK && i < ds_model_n_params(m); i++) {
        const ds_tensor *t = ds_model_param(m, i);
        int gamma = strstr(t->name, ".bn.weight") != NULL, beta = strstr(t->name, ".bn.bias") != NULL;
        for (size_t k = 0; (gamma || beta) && k < t->count; k++)
            p[t->offset + k] = gamma ? ds_rng_range(rng, 0.5, 1.5) : ds_rng_range(rng, -0.5, 0.5);
    }
    if (st == DS_OK)
        st = ds_model_put(m, DS_PARAMS, p);
    if (st == DS_OK)
        st = ds_model_get(m, DS_BN_STATS, p);
    for (int i = 0; st == DS_OK && i < ds_model_n_bn_stats(m); i++) {
        const ds_tensor *t = ds_model_bn_stat(m, i);
        int var = strstr(t->name, "running_var") != NULL;
        for (size_t k = 0; k < t->count; k++)
            p[t->offset + k] = var ? ds_rng_range(rng, 0.5, 1.5) : 0.2 * ds_rng_normal(rng);
    }
    if (st == DS_OK)
        st = ds_model_put(m, DS_BN_STATS, p);
    free(p);
    return st;
}

