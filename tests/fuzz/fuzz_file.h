/* fuzz_file.h - what the three harnesses share: the fuzz input as a file
 * (the readers under test take a path), and the checks every input ends
 * with. */
#ifndef DS_FUZZ_FILE_H
#define DS_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Writes data [size] to a new file in $DSTRAIN_FUZZ_TMPDIR, else /dev/shm
 * (else $TMPDIR, else /tmp);
 * its name goes to path [cap]. Clears the recorded error and silences
 * HDF5's error printing. 0 on success; on failure says why and aborts. */
void fuzz_file_write(const uint8_t *data, size_t size, char *path, size_t cap);
/* Unlinks path and aborts if an HDF5 file or object is still open: every
 * failure must close what it opened, or a training job leaks a handle per
 * bad file it meets. */
void fuzz_file_done(const char *path);
/* A failure must record the message the user will see; aborts if st is an
 * error with none recorded. Then clears it, as the next input starts afresh. */
void fuzz_check_status(ds_status st);

#endif
