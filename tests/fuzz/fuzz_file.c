/* fuzz_file.c - see fuzz_file.h. Aborting is how a harness reports a
 * broken rule: libFuzzer saves the input that did it as a crash. */
#include "fuzz_file.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const char *path)
{
    fprintf(stderr, "fuzz: %s: %s: %s\n", path, what, strerror(errno));
    abort();
}

/* $DSTRAIN_FUZZ_TMPDIR (scripts/fuzz.sh makes one and removes it with
 * whatever a crashed input left), else tmpfs: each input is a file written
 * and unlinked, thousands a second. */
static const char *temp_dir(void)
{
    const char *d = getenv("DSTRAIN_FUZZ_TMPDIR");
    if (d && *d)
        return d;
    if (access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

void fuzz_file_write(const uint8_t *data, size_t size, char *path, size_t cap)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* HDF5's stacks would drown the fuzzer's output */
    ds_status_clear_error();
    if (snprintf(path, cap, "%s/dstrain-fuzz-XXXXXX", temp_dir()) >= (int)cap)
        die("temporary name too long", path);
    int fd = mkstemp(path);
    if (fd < 0)
        die("cannot create", path);
    for (size_t done = 0; done < size;) {
        ssize_t w = write(fd, data + done, size - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("cannot write", path);
        done += (size_t)w;
    }
    if (close(fd) != 0)
        die("cannot close", path);
}

void fuzz_file_done(const char *path)
{
    if (unlink(path) != 0)
        die("cannot remove", path);
    ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open != 0) {
        fprintf(stderr, "fuzz: %zd HDF5 files or objects left open after %s\n", open, path);
        abort();
    }
}

void fuzz_check_status(ds_status st)
{
    if (st != DS_OK && strcmp(ds_status_last_error(), "no error recorded") == 0) {
        fprintf(stderr, "fuzz: %s returned with no error message recorded\n", ds_status_name(st));
        abort();
    }
    ds_status_clear_error();
}
