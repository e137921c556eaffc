/* pt_zip.h - the zip container of torch.save files, through libzip.
 *
 * torch.save writes one zip: every record under one top folder (the
 * "archive name"), stored uncompressed, each record's data 64-byte aligned
 * (a padding extra field "FB" in its local header):
 *     NAME/data.pkl      the pickle
 *     NAME/byteorder     "little"
 *     NAME/data/KEY      one storage's bytes
 *     NAME/version       "3\n"
 * torch.load takes NAME from the first record. We write NAME "archive", as
 * torch does for buffers. */
#ifndef DS_PT_ZIP_H
#define DS_PT_ZIP_H

#include <stddef.h>

#include "status.h"

typedef struct ds_pt_zip_writer ds_pt_zip_writer;

/* A new archive at path (replaced when it exists; written on close) with
 * records under prefix/. */
ds_status ds_pt_zip_create(const char *path, const char *prefix, ds_pt_zip_writer **out);
/* Adds prefix/name holding data [len] bytes, stored, its data 64-byte
 * aligned. data is read at ds_pt_zip_close: keep it until then. */
ds_status ds_pt_zip_add(ds_pt_zip_writer *w, const char *name, const void *data, size_t len);
/* Writes the archive and frees w, also on failure (then nothing is left at path). */
ds_status ds_pt_zip_close(ds_pt_zip_writer *w);
/* Frees w without writing anything. NULL is fine. */
void ds_pt_zip_discard(ds_pt_zip_writer *w);

typedef struct ds_pt_zip_reader ds_pt_zip_reader;

/* Opens the archive at path (consistency checked) and takes its top folder
 * from the first record, as torch.load does. */
ds_status ds_pt_zip_open(const char *path, ds_pt_zip_reader **out);
/* Whether the archive holds prefix/name. */
int ds_pt_zip_has(ds_pt_zip_reader *r, const char *name);
/* The whole of prefix/name, checksum verified, into *data [*len] (malloc'd,
 * free it). A record of more than max bytes is refused before reading. what
 * (or NULL) says in messages what the record holds ("key fc.0.module.1.weight"). */
ds_status ds_pt_zip_read(ds_pt_zip_reader *r, const char *name, const char *what, size_t max,
                         void **data, size_t *len);
void ds_pt_zip_close_reader(ds_pt_zip_reader *r);

#endif
