/* fileutil.h - durable file replacement (nothing half-written survives a
 * crash), and whole-file reads. */
#ifndef DS_FILEUTIL_H
#define DS_FILEUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

/* fsyncs the finished temporary file tmp, renames it to path and fsyncs the
 * directory, so path holds either the old or the new file. On failure tmp is
 * removed and path is untouched. */
ds_status ds_file_commit(const char *tmp, const char *path);

/* A text output written whole or not at all: *f opens tmp [cap] = path.tmp
 * for writing; ds_file_close_commit closes it, checking every write, and
 * commits it over path; ds_file_abandon closes and removes it. what names
 * the output in errors. */
ds_status ds_file_open_tmp(const char *path, const char *what, char *tmp, size_t cap, FILE **f);
ds_status ds_file_close_commit(FILE *f, const char *tmp, const char *path, const char *what);
void ds_file_abandon(FILE *f, const char *tmp);

/* dir exists (created if missing), is a directory and takes a file (one is
 * written and removed): checked before work that will write there starts.
 * what names the directory's role in errors. */
ds_status ds_dir_ready(const char *dir, const char *what);

/* The whole of the text file path, NUL-terminated, into *text (free it);
 * what names it in errors; larger than max bytes is an error. */
ds_status ds_file_read_text(const char *path, size_t max, const char *what, char **text);

#endif
