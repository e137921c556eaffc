/* dir_lock.h - one run at a time in a folder: an exclusive flock on
 * DIR/.dstrain.lock, held for the run's life, the file naming its holder
 * (host, process, start) so that a second run is refused with those. */
#ifndef DS_DIR_LOCK_H
#define DS_DIR_LOCK_H

#include "status.h"

typedef struct {
    int held;    /* 0: nothing to release (a zeroed lock) */
    int fd;
} ds_dir_lock;

/* Takes dir's lock for what (the folder's role, in messages); refused with
 * DS_ERR_IO naming the holder while another process holds it. On a file
 * system without locks (flock unsupported) it warns and goes on unlocked. */
ds_status ds_dir_lock_take(const char *dir, const char *what, ds_dir_lock *l);
void ds_dir_lock_release(ds_dir_lock *l);

#endif
