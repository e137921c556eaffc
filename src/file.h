/* file.h - durable file replacement (nothing half-written survives a
 * crash), and whole-file reads. */
#ifndef DS_FILE_H
#define DS_FILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "status.h"

/* The longest path any writer builds (the system's PATH_MAX): a path that
 * would be longer is refused naming this limit, never cut short. */
#define DS_PATH_MAX 4096

/* What a file of mode m is, for messages ("a FIFO (named pipe)", "a folder"). */
const char *ds_file_kind(mode_t m);

/* The one rule for every output replaced whole (feature files, checkpoints,
 * exports, bench results): path is not empty, short enough for its
 * temporary name (DS_PATH_MAX), and either does not exist or is a regular
 * file; a device, FIFO, socket, folder or symbolic link at path is refused
 * by name (what names the output), before anything is written. Writers
 * check it when they name their temporary file and again just before the
 * rename, so the rename happens only over a regular file or nothing. */
ds_status ds_file_output_ok(const char *path, const char *what);

/* fsyncs the finished temporary file tmp, renames it to path and fsyncs the
 * directory, so path holds either the old or the new file. On failure tmp is
 * removed and path is untouched. The directory is fsynced through links
 * (scratch and project folders on clusters are links). */
ds_status ds_file_commit(const char *tmp, const char *path);

/* Temporary files are named "PATH.XXXXXX.tmp" (six random letters and
 * digits) beside their destination, and created new: never a file or a
 * link someone planted at the name (shared scratch and checkpoint folders).
 * ds_file_tmp_name picks a name free when chosen (for a library that creates the
 * file itself, exclusively); ds_file_tmp_create creates it (O_CREAT | O_EXCL |
 * O_NOFOLLOW) and gives its descriptor. what names the output in errors. */
#define DS_TMP_SUFFIX_LEN 11   /* ".XXXXXX.tmp" */
ds_status ds_file_tmp_name(const char *path, const char *what, char *tmp, size_t cap);
ds_status ds_file_tmp_create(const char *path, const char *what, char *tmp, size_t cap, int *fd);
/* Whether name ends as a temporary file of ds_file_tmp_name does: base, then the
 * random part and ".tmp". */
int ds_file_tmp_is_of(const char *name, const char *base);

/* Opens path to write a stream (a log) that is not replaced whole: created
 * or truncated (append 0) or appended to, but never through a symbolic link
 * to a file (refused, naming it); a link to a device, FIFO or socket
 * (/dev/stdout) is followed. */
ds_status ds_file_open_stream(const char *path, int append, const char *what, FILE **f);

/* Refuses (DS_ERR_ARG) an output that is the same file as one of the
 * inputs (device and inode, whatever the names): cmd names the command,
 * out_what and in_what[k] the roles. NULL inputs and outputs that do not
 * exist yet are skipped. */
ds_status ds_file_refuse_output_over_input(const char *cmd, const char *out_what, const char *out,
                                      const char *const *in_what, const char *const *in, int n);

/* A text output written whole or not at all: *f opens a temporary file
 * tmp [cap] beside path (ds_file_tmp_create) for writing; ds_file_close_commit
 * closes it, checking every write, and commits it over path;
 * ds_file_abandon closes and removes it. what names the output in errors. */
ds_status ds_file_open_tmp(const char *path, const char *what, char *tmp, size_t cap, FILE **f);
ds_status ds_file_close_commit(FILE *f, const char *tmp, const char *path, const char *what);
void ds_file_abandon(FILE *f, const char *tmp);

/* dir exists (created if missing), is a directory and takes a file (one is
 * written and removed): checked before work that will write there starts.
 * what names the directory's role in errors. A dir that leaves less than
 * DS_DIR_NAME_ROOM characters of DS_PATH_MAX for the names written in it
 * (step-N.h5 and a temporary's part: 37) is refused naming the limit. */
#define DS_DIR_NAME_ROOM 48
ds_status ds_file_dir_ready(const char *dir, const char *what);

/* A folder written to for a whole run, named through links or not: *real
 * (free it) is its real path, resolved once, and id its identity, so that
 * every later write goes to that folder and a folder swapped under the run
 * (moved away, replaced by a link) is noticed by ds_file_dir_same. what
 * names the folder's role; a path too long for the names the run will
 * build in it (name_len more characters) is refused naming the limit. */
typedef struct {
    dev_t dev;
    ino_t ino;
} ds_file_id;
ds_status ds_file_dir_resolve(const char *dir, const char *what, size_t name_len, char **real,
                              ds_file_id *id);
/* Whether real (from ds_file_dir_resolve) is still that folder, itself and
 * not a link: DS_OK, or an error naming the folder, what it was and what it
 * is now. */
ds_status ds_file_dir_same(const char *real, const ds_file_id *id, const char *what);

/* The whole of the text file path, NUL-terminated, into *text (free it);
 * what names it in errors; larger than max bytes is an error. */
ds_status ds_file_read_text(const char *path, size_t max, const char *what, char **text);

#endif
