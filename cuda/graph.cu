/* graph.cu - a context's queued work captured as a CUDA Graph and replayed
 * (ds_backend.capture_begin .. graph_destroy; contract in backend.h).
 *
 * Capture is thread-local (cudaStreamCaptureModeThreadLocal): the loader's
 * and NCCL's threads keep running, and only a call of this thread that
 * cannot be captured (a synchronisation, an allocation, a pageable copy)
 * fails, which ends the capture as invalidated. The graph is instantiated
 * and uploaded at once, so that its first replay costs what later ones do;
 * the device memory that takes is measured around it (cudaMemGetInfo, the
 * device's whole use: another context allocating at that moment would be
 * counted, which start-up order makes unlikely; and the driver's granules
 * make it an estimate, to about 2 MiB). */
#include <cstdlib>

#include "cuda_ctx.h"

struct ds_graph {
    cudaGraphExec_t exec;
    size_t nodes;
};

/* Bytes of device memory in use now. */
static ds_status graph_used(size_t *used)
{
    size_t free_b = 0, total = 0;
    DS_CUDA(cudaMemGetInfo(&free_b, &total));
    *used = total - free_b;
    return DS_OK;
}

ds_status ds_cuda_capture_begin(ds_ctx *c)
{
    DS_CUDA(cudaSetDevice(c->device));
    DS_CUDA(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    return DS_OK;
}

/* g instantiated and uploaded into *out; g itself is the caller's. */
static ds_status graph_instantiate(ds_ctx *c, cudaGraph_t g, ds_graph *out, size_t *bytes)
{
    size_t before = 0, after = 0;
    DS_CUDA(cudaGraphGetNodes(g, nullptr, &out->nodes));
    DS_TRY(graph_used(&before));
    const cudaError_t e = cudaGraphInstantiateWithFlags(&out->exec, g, 0);
    if (e != cudaSuccess) {
        out->exec = nullptr;
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the captured step (%zu operations) could not be "
                       "instantiated: %s", out->nodes, cudaGetErrorString(e));
    }
    DS_CUDA(cudaGraphUpload(out->exec, c->stream));
    DS_CUDA(cudaStreamSynchronize(c->stream));   /* start-up of a shape, not a step */
    DS_TRY(graph_used(&after));
    *bytes = after > before ? after - before : 0;
    return DS_OK;
}

ds_status ds_cuda_capture_end(ds_ctx *c, ds_graph **out, size_t *bytes)
{
    if (out)
        *out = nullptr;
    if (bytes)
        *bytes = 0;
    /* the capture ends first, whatever else fails: a stream left capturing
     * would record every later op instead of running it */
    (void)cudaSetDevice(c->device);
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess || !g || !out) {
        (void)cudaGetLastError();   /* not left behind for the uncaptured step's launch checks */
        if (g)
            (void)cudaGraphDestroy(g);
        if (!out && e == cudaSuccess)
            return DS_OK;   /* discarded, as asked */
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the capture ended as %s (%s): a call inside it "
                       "cannot be captured", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    ds_graph *gr = (ds_graph *)calloc(1, sizeof *gr);
    ds_status st = gr ? graph_instantiate(c, g, gr, bytes) : DS_FAIL(DS_ERR_MEM, "graph");
    (void)cudaGraphDestroy(g);   /* the executable graph is a copy */
    if (st != DS_OK) {
        (void)cudaGetLastError();   /* a failed upload's error is this capture's, said here */
        if (gr && gr->exec)
            (void)cudaGraphExecDestroy(gr->exec);
        free(gr);
        return st;
    }
    *out = gr;
    return DS_OK;
}

ds_status ds_cuda_graph_launch(ds_ctx *c, ds_graph *g)
{
    DS_CUDA(cudaSetDevice(c->device));
    DS_CUDA(cudaGraphLaunch(g->exec, c->stream));
    return DS_OK;
}

void ds_cuda_graph_destroy(ds_ctx *c, ds_graph *g)
{
    (void)c;
    if (!g)
        return;
    if (g->exec)
        (void)cudaGraphExecDestroy(g->exec);
    free(g);
}
