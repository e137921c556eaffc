/* pt_file.h - torch.save files of state_dicts: the zip (pt_zip.h) with the
 * pickle (pt_pickle_write.h, pt_pickle_read.h) and one record per storage. */
#ifndef DS_PT_FILE_H
#define DS_PT_FILE_H

#include "pt_dict.h"

/* Writes d as torch.save(OrderedDict, path) does (protocol 2; records
 * archive/data.pkl, archive/byteorder, archive/data/<i>, archive/version):
 * torch.load reads it, weights_only=True too. Replaces path at the end
 * (fsynced, renamed), never leaving half a file there. */
ds_status ds_pt_save(const char *path, const ds_pt_dict *d);

/* Reads the state_dict of the torch.save file path (bare, or the
 * "state_dict" entry of a dict of plain values) into d, in its order, every
 * tensor made contiguous; *wrapped (may be NULL) says which it was. Errors
 * name path, and the key where one is concerned.
 * shapes_only: keys, dtypes and shapes are read and every view checked
 * against its storage's claim, but no storage is read and each data stays
 * NULL. A caller that knows the shapes it wants checks them first: a crafted
 * file's expanded views (stride 0) may claim terabytes. */
ds_status ds_pt_load(const char *path, int shapes_only, ds_pt_dict *d, int *wrapped);

#endif
