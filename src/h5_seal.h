/* h5_seal.h - a checksum over an HDF5 object's attributes. Fletcher32 covers
 * datasets only; the attributes that say what a file holds (a checkpoint's
 * step, resume position, generator state and run options; a feature file's
 * sample rate and windows) get a CRC-32 of their own (zlib), stored beside
 * them as one more attribute, so a flipped byte there is found instead of
 * read as another value. */
#ifndef DS_H5_SEAL_H
#define DS_H5_SEAL_H

#include <hdf5.h>

#include "status.h"

#define DS_H5_SEAL_ATTR "attributes_crc32"

/* Writes (or rewrites) loc's seal: the CRC-32 of every other attribute of
 * loc, in name order, each its name, its type and shape (as a description:
 * class, size, byte order, precision, float fields and bias, string
 * padding; rank and dimensions), then its bytes as stored. Call it after
 * the last attribute is written. */
ds_status ds_h5_seal_attrs(hid_t loc);

/* Checks loc's seal against its attributes; path names the file in the
 * error. A missing seal is an error when required, else (a file written
 * before seals) passes with *sealed = 0. sealed may be NULL. */
ds_status ds_h5_check_attrs(hid_t loc, const char *path, int required, int *sealed);

#endif
