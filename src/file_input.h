/* file_input.h - the files a command reads: checked to be regular files
 * before they are opened (a FIFO or a device given as an input would block
 * the open or the read for ever), kept apart from the outputs by device and
 * inode, and watched for a change while they are read. */
#ifndef DS_FILE_INPUT_H
#define DS_FILE_INPUT_H

#include <sys/types.h>

#include "status.h"

/* path (links followed) exists and is a regular file; a FIFO, device,
 * socket or folder is refused naming the path, what (the input's role, as
 * "checkpoint to resume (--resume)") and what it is. Never opens it. */
ds_status ds_file_require_regular(const char *path, const char *what);

/* Opens path read-only for an input that must be a regular file: the
 * descriptor's own fstat decides (no window between a check and the open;
 * O_NONBLOCK so that a FIFO does not block the open). *fd is -1 on failure. */
ds_status ds_file_open_input(const char *path, const char *what, int *fd);

/* What an input was when it was opened: to notice it changed under a run. */
typedef struct {
    dev_t dev;
    ino_t ino;
    off_t size;
} ds_file_input_id;

/* The identity and size of the open descriptor fd (of path, named what). */
ds_status ds_file_input_identify(int fd, const char *path, const char *what, ds_file_input_id *id);
/* fd still has the size it had (a file truncated or rewritten in place
 * reads as zeros past its new end): an error naming path, both sizes and
 * what to do. */
ds_status ds_file_input_same_size(int fd, const char *path, const char *what,
                                  const ds_file_input_id *id);
/* The same, and path still names that file (not deleted, moved or
 * replaced by another): the check at an epoch's start. */
ds_status ds_file_input_unchanged(int fd, const char *path, const char *what,
                                  const ds_file_input_id *id);

/* An output that is one of a list's inputs: out (refused when it exists and
 * is the same file as input k, by device and inode) against n inputs, input
 * k's path given by name_of(list, k) (NULL: skipped). One stat per input:
 * cheap beside reading them. cmd, out_what, in_what name them in the error. */
ds_status ds_file_refuse_output_over_each(const char *cmd, const char *out_what, const char *out,
                                          const char *in_what,
                                          const char *(*name_of)(const void *list, long k),
                                          const void *list, long n);

#endif
