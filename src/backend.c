/* backend.c - backend lookup by name, and facts shared by all backends. */
#include <string.h>

#include "backend.h"
#include "backend_plugin.h"

extern const ds_backend ds_cpu_backend;

const ds_backend *ds_backend_get(const char *name)
{
    if (strcmp(name, "cpu") == 0)
        return &ds_cpu_backend;
    if (strcmp(name, "cuda") == 0)   /* loaded from its plugin at the first ask */
        return ds_backend_plugin_cuda();
    return NULL;
}

const char *ds_backend_missing(const char *name)
{
    if (strcmp(name, "cuda") == 0 && !ds_backend_get(name))
        return ds_backend_plugin_error();
    return ds_backend_get(name) ? "" : "no such backend (cpu or cuda)";
}

int ds_backend_cell_gates(ds_cell cell)
{
    switch (cell) {
    case DS_CELL_LSTM: return 4;
    case DS_CELL_GRU: return 3;
    default: return 1;
    }
}

ds_roles ds_backend_precision_roles(ds_dtype compute)
{
    switch (compute) {
    case DS_F64: return (ds_roles){DS_F64, DS_F64, DS_F64, DS_F64};
    case DS_F16: return (ds_roles){DS_F16, DS_F32, DS_F32, DS_F64};
    case DS_BF16: return (ds_roles){DS_BF16, DS_F32, DS_F32, DS_F64};
    default: return (ds_roles){DS_F32, DS_F32, DS_F32, DS_F64};
    }
}

size_t ds_backend_align_elems(ds_dtype t, size_t count)
{
    const size_t per = DS_ALIGN_BYTES / ds_dtype_size(t);
    return (count + per - 1) / per * per;
}

/* Output size of a strided window, or 0 when the padded input is shorter than k. */
static int window_out(int in, int k, int stride, int pad)
{
    return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

ds_conv_geom ds_backend_conv_geom_of(int n, int ci, int hi, int wi, int co, int kh, int kw, int sh, int sw,
                             int ph, int pw)
{
    return (ds_conv_geom){n, ci, hi, wi, co, kh, kw, sh, sw, ph, pw, window_out(hi, kh, sh, ph),
                          window_out(wi, kw, sw, pw), 1};
}

ds_conv_geom ds_backend_conv_geom_resized(const ds_conv_geom *g, int n, int hi)
{
    ds_conv_geom r = ds_backend_conv_geom_of(n, g->ci, hi, g->wi, g->co, g->kh, g->kw, g->sh, g->sw,
                                             g->ph, g->pw);
    r.dh = g->dh;
    r.ho = window_out(hi, ds_backend_conv_dilation(g) * (g->kh - 1) + 1, g->sh, g->ph);
    return r;
}

ds_conv_geom ds_backend_conv1d_geom(int n, int ci, int t, int co, int k, int stride, int dil)
{
    const int d = dil > 1 ? dil : 1;
    ds_conv_geom g = ds_backend_conv_geom_of(n, ci, t, 1, co, k, 1, stride, 1, d * (k - 1) / 2, 0);
    g.dh = d;
    g.ho = window_out(t, d * (k - 1) + 1, stride, g.ph);
    return g;
}
