/* testmodel.c - see testmodel.h. */
#include "testmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

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


/* Orders tensor indices by place. */
static const ds_tensor *const *sort_tab;
static int by_place(const void *a, const void *b)
{
    size_t pa = sort_tab[*(const int *)a]->place, pb = sort_tab[*(const int *)b]->place;
    return pa < pb ? -1 : pa > pb;
}

ds_status t_check_placement(const ds_model *m, t_placement *out)
{
    const int n = ds_model_n_params(m);
    const size_t span = ds_model_param_span(m), esize = ds_dtype_size(ds_model_dtype(m));
    const ds_tensor **tab = malloc((size_t)(n ? n : 1) * sizeof *tab);
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!tab || !order) {
        free(tab);
        free(order);
        return DS_FAIL(DS_ERR_MEM, "placement check");
    }
    memset(out, 0, sizeof *out);
    size_t packed = 0;
    for (int i = 0; i < n; i++) {
        tab[i] = ds_model_param(m, i);
        order[i] = i;
        const int rnn_w = strncmp(tab[i]->name, "rnn.", 4) == 0 && !strstr(tab[i]->name, ".bn.");
        const int misaligned = tab[i]->place * esize % DS_ALIGN_BYTES != 0;
        out->misaligned += !rnn_w && misaligned;
        out->misaligned_rnn += rnn_w && misaligned;
        out->outside += tab[i]->place + tab[i]->count > span;
        out->bad_offset += tab[i]->offset != packed;
        packed += tab[i]->count;
        out->count_sum += tab[i]->count;
    }
    sort_tab = tab;
    qsort(order, (size_t)n, sizeof *order, by_place);
    for (int k = 1; k < n; k++)
        out->overlapping += tab[order[k - 1]]->place + tab[order[k - 1]]->count > tab[order[k]]->place;
    free(tab);
    free(order);
    return DS_OK;
}

ds_status t_flat_gap_nonzero(const ds_backend *be, ds_model *m, int which, size_t *nonzero)
{
    const size_t span = ds_model_param_span(m);
    unsigned char *in_tensor = calloc(span ? span : 1, 1);
    double *raw = malloc((span ? span : 1) * sizeof *raw);
    ds_status st = in_tensor && raw ? DS_OK : DS_FAIL(DS_ERR_MEM, "flat buffer copy");
    *nonzero = 0;
    if (st == DS_OK && which != DS_PARAMS && which != DS_GRADS)
        st = DS_FAIL(DS_ERR_ARG, "flat buffer %d: DS_PARAMS or DS_GRADS", which);
    if (st == DS_OK)
        st = t_get_real(be, ds_model_ctx(m), ds_model_dtype(m), span,
                        which == DS_PARAMS ? ds_model_params(m) : ds_model_grads(m), raw);
    for (int i = 0; st == DS_OK && i < ds_model_n_params(m); i++) {
        const ds_tensor *t = ds_model_param(m, i);
        for (size_t k = 0; k < t->count && t->place + k < span; k++)
            in_tensor[t->place + k] = 1;
    }
    for (size_t e = 0; st == DS_OK && e < span; e++)
        *nonzero += !in_tensor[e] && raw[e] != 0;
    free(in_tensor);
    free(raw);
    return st;
}

double t_model_loss(void *arg)
{
    t_loss_arg *a = arg;
    ds_loss l = {0};
    if (a->st == DS_OK)
        a->st = ds_model_put(a->m, DS_PARAMS, a->params);
    if (a->st == DS_OK)
        a->st = ds_model_forward(a->m, a->train);
    if (a->st == DS_OK)
        a->st = ds_model_loss(a->m, 0);
    if (a->st == DS_OK)
        a->st = ds_model_read_loss(a->m, &l, NULL);
    return a->st == DS_OK ? l.loss : NAN;
}
