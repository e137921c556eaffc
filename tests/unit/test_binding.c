/* test_binding.c - ds_device_bind over a table of (local rank, local size,
 * visible devices, transport) -> device, shared, ranks on the device, or
 * an error; the warning and error texts must name the ranks, the devices
 * and the fix. Also: every rank of a node reaches the same verdict, devices
 * go round robin and ranks_on_device counts the ranks given each one; the
 * texts stay whole on crowded nodes. */
#include <string.h>

#include "device_binding.h"
#include "testutil.h"

enum { MPI_T = 0, NCCL_T = 1 };

typedef struct {
    int local_rank, local_size, visible, nccl;
    ds_status want;          /* DS_OK or the error */
    int device, shared, ranks_on_device;
    const char *must_say[4]; /* substrings of the warning or the error; NULL ends */
} row;

static const row TABLE[] = {
    /* no visible device: the CPU, whatever the transport */
    {0, 1, 0, MPI_T, DS_OK, -1, 0, 1, {NULL}},
    {3, 4, 0, MPI_T, DS_OK, -1, 0, 1, {NULL}},
    {3, 4, 0, NCCL_T, DS_OK, -1, 0, 1, {NULL}},
    /* one visible: the launcher bound it, every rank uses its device 0 */
    {0, 4, 1, MPI_T, DS_OK, 0, 0, 1, {NULL}},
    {3, 4, 1, MPI_T, DS_OK, 0, 0, 1, {NULL}},
    {3, 4, 1, NCCL_T, DS_OK, 0, 0, 1, {NULL}},
    /* as many as ranks: one each */
    {0, 4, 4, NCCL_T, DS_OK, 0, 0, 1, {NULL}},
    {3, 4, 4, NCCL_T, DS_OK, 3, 0, 1, {NULL}},
    {2, 4, 4, MPI_T, DS_OK, 2, 0, 1, {NULL}},
    /* more devices than ranks: the first ones */
    {0, 2, 8, NCCL_T, DS_OK, 0, 0, 1, {NULL}},
    {1, 2, 8, MPI_T, DS_OK, 1, 0, 1, {NULL}},
    /* 4 ranks on 2 devices: MPI warns, NCCL refuses */
    {0, 4, 2, MPI_T, DS_OK, 0, 1, 2,
     {"4 ranks on this node share 2 visible GPUs", "device 0: local ranks 0, 2",
      "device 1: local ranks 1, 3", "at most 2 ranks per node"}},
    {3, 4, 2, MPI_T, DS_OK, 1, 1, 2, {"device 1: local ranks 1, 3", NULL}},
    {1, 4, 2, NCCL_T, DS_ERR_ARG, 0, 0, 0,
     {"device 0: local ranks 0, 2", "NCCL refuses two ranks on one device",
      "at most 2 ranks per node", "--allreduce mpi"}},
    /* 3 ranks on 2 devices: only device 0 is shared, but the node's verdict holds for all */
    {1, 3, 2, MPI_T, DS_OK, 1, 1, 1, {"device 0: local ranks 0, 2", NULL}},
    {1, 3, 2, NCCL_T, DS_ERR_ARG, 0, 0, 0, {"device 0: local ranks 0, 2", "--allreduce mpi", NULL}},
    /* many ranks: the lists are cut short, the text stays whole */
    {13, 64, 3, MPI_T, DS_OK, 1, 1, 21, {"64 ranks on this node share 3", ", ...", "start at most 3"}},
    {13, 64, 3, NCCL_T, DS_ERR_ARG, 0, 0, 0, {"--allreduce mpi", NULL}},
    {70, 128, 8, NCCL_T, DS_ERR_ARG, 0, 0, 0, {"; ...", "--allreduce mpi", NULL}},
    /* impossible arguments */
    {-1, 4, 2, MPI_T, DS_ERR_ARG, 0, 0, 0, {"local rank -1 is outside 0..3", NULL}},
    {4, 4, 2, MPI_T, DS_ERR_ARG, 0, 0, 0, {"local rank 4 is outside 0..3", NULL}},
    {0, 0, 2, MPI_T, DS_ERR_ARG, 0, 0, 0, {"0 ranks on this node", NULL}},
    {0, -2, 2, NCCL_T, DS_ERR_ARG, 0, 0, 0, {"-2 ranks on this node", NULL}},
    {0, 4, -1, MPI_T, DS_ERR_ARG, 0, 0, 0, {"-1 visible devices", NULL}},
};

static int says_all(const char *text, const char *const *must)
{
    for (int i = 0; i < 4 && must[i]; i++)
        if (!strstr(text, must[i])) {
            printf("  missing \"%s\"\n", must[i]);
            return 0;
        }
    return 1;
}

static void check_row(size_t i, const row *r)
{
    ds_binding b;
    memset(&b, 0x5a, sizeof b);
    ds_status_clear_error();
    ds_status st = ds_device_bind(r->local_rank, r->local_size, r->visible, r->nccl, &b);
    const char *text = st == DS_OK ? b.warning : ds_status_last_error();
    printf("row %2zu: local rank %3d of %3d, %d visible, %-4s -> ", i, r->local_rank, r->local_size,
           r->visible, r->nccl ? "nccl" : "mpi");
    if (st == DS_OK)
        printf("device %d, shared %d, %d on it%s%s\n", b.device, b.shared, b.ranks_on_device,
               text[0] ? "; warning: " : "", text);
    else
        printf("%s: %s\n", ds_status_name(st), text);
    T_CHECK(st == r->want, "row %zu: status %s, want %s", i, ds_status_name(st), ds_status_name(r->want));
    if (st == DS_OK && r->want == DS_OK)
        T_CHECK(b.device == r->device && b.shared == r->shared && b.ranks_on_device == r->ranks_on_device
                    && b.visible_devices == r->visible && !b.warning[0] == !r->must_say[0],
                "row %zu: device %d shared %d on it %d, warning \"%s\"", i, b.device, b.shared,
                b.ranks_on_device, b.warning);
    T_CHECK(says_all(text, r->must_say), "row %zu: the text lacks what it must say", i);
    ds_status_clear_error();
}

/* For each node shape, every local rank reaches the same verdict (status,
 * shared, warning), the devices are used round robin, and ranks_on_device
 * counts the ranks that got the same device. */
static void check_node_consistency(void)
{
    size_t shapes = 0, bad = 0;
    for (int size = 1; size <= 16; size++)
        for (int vis = 0; vis <= 9; vis++)
            for (int nccl = 0; nccl < 2; nccl++) {
                ds_binding first, b;
                int count[16] = {0};
                ds_status st0 = ds_device_bind(0, size, vis, nccl, &first);
                shapes++;
                for (int r = 0; r < size; r++) {
                    ds_status st = ds_device_bind(r, size, vis, nccl, &b);
                    bad += st != st0;
                    if (st != DS_OK || st0 != DS_OK)
                        continue;
                    const int want = vis == 0 ? -1 : vis == 1 ? 0 : r % vis;
                    bad += b.device != want || b.shared != first.shared
                           || strcmp(b.warning, first.warning) != 0 || b.device >= (vis ? vis : 1);
                    if (b.device >= 0)
                        count[b.device]++;
                }
                bad += (st0 == DS_OK) == (nccl && vis > 1 && size > vis);   /* NCCL fails exactly then */
                for (int r = 0; r < size && st0 == DS_OK && vis > 1; r++) {
                    ds_device_bind(r, size, vis, nccl, &b);
                    bad += b.ranks_on_device != count[b.device];
                }
                ds_status_clear_error();
            }
    printf("%zu node shapes (1-16 ranks, 0-9 devices, both transports): %zu inconsistencies\n",
           shapes, bad);
    T_CHECK(bad == 0, "%zu inconsistencies between ranks of a node", bad);
}

/* Up to 4096 ranks and 64 devices on a node: the texts are never cut off
 * (they end with the fix). */
static void check_texts_whole(void)
{
    static const char tail[] = "for one GPU each";
    size_t cut = 0, n = 0;
    for (int size = 2; size <= 4096; size = size * 3 / 2 + 1)
        for (int vis = 2; vis < size && vis <= 64; vis++, n++) {
            ds_binding b;
            if (ds_device_bind(size - 1, size, vis, 0, &b) != DS_OK
                || strlen(b.warning) < sizeof tail
                || strcmp(b.warning + strlen(b.warning) - (sizeof tail - 1), tail) != 0)
                cut++;
            ds_status_clear_error();
            if (ds_device_bind(0, size, vis, 1, &b) != DS_ERR_ARG
                || !strstr(ds_status_last_error(), "or use --allreduce mpi"))
                cut++;
            ds_status_clear_error();
        }
    printf("%zu crowded node shapes: %zu texts cut off\n", n, cut);
    T_CHECK(cut == 0, "%zu warning or error texts cut off", cut);
}

int main(void)
{
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++)
        check_row(i, &TABLE[i]);
    ds_status st = ds_device_bind(0, 1, 1, 0, NULL);
    T_CHECK(st == DS_ERR_ARG, "NULL result: %s", ds_status_name(st));
    ds_status_clear_error();
    check_node_consistency();
    check_texts_whole();
    return t_finish("test_binding");
}
