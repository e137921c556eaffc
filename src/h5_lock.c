/* h5_lock.c - HDF5 from more than one thread: one lock; see h5_lock.h. */
#include "h5_lock.h"

#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int library_safe;   /* set once by probe */
static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;

static void probe(void)
{
    hbool_t safe = 0;
    const char *force = getenv("DSTRAIN_H5_SERIALIZE");
    if (H5is_library_threadsafe(&safe) < 0)
        safe = 0;   /* unknown: the lock is the safe assumption */
    library_safe = safe && !(force && strcmp(force, "1") == 0);
}

int ds_h5_threadsafe(void)
{
    pthread_once(&once, probe);
    return library_safe;
}

const char *ds_h5_thread_mode(char *buf, unsigned long cap)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, cap, "HDF5 %u.%u.%u, %s", maj, min, rel,
             ds_h5_threadsafe() ? "thread-safe"
                                : "used as not thread-safe: its calls are serialised by a lock");
    return buf;
}

/* A failing lock on a static, never-destroyed default mutex means memory is
 * corrupt: nothing sensible can go on. */
void ds_h5_lock(void)
{
    if (!ds_h5_threadsafe() && pthread_mutex_lock(&h5_mutex) != 0)
        abort();
}

void ds_h5_unlock(void)
{
    if (!ds_h5_threadsafe() && pthread_mutex_unlock(&h5_mutex) != 0)
        abort();
}
