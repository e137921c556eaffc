/* address_space.h - the address-space limit (ulimit -v) and what is mapped
 * under it: OpenBLAS's buffers (app/blas_limits.c) and the CUDA plugin's
 * libraries (src/backend_plugin.c) are checked against it before they are
 * taken, since both fail badly past it (a spin, a crash in a constructor). */
#ifndef DS_ADDRESS_SPACE_H
#define DS_ADDRESS_SPACE_H

#include <stddef.h>

/* The soft address-space limit in bytes, or 0 when there is none. */
unsigned long long ds_address_space_limit(void);

/* The address space this process maps now (VmSize), in bytes; 0 if unknown. */
unsigned long long ds_address_space_mapped(void);

/* The address space the shared object at `path` takes when loaded: the span
 * of its PT_LOAD segments, from its ELF program headers. 0 when the file
 * cannot be read or is not a 64-bit ELF of this machine's byte order.
 * *cut (when given) is set to 1 when a segment's bytes pass the end of the
 * file (a copy or an install cut short): the loader would map it anyway,
 * and touching the missing pages kills the process with SIGBUS. */
unsigned long long ds_address_space_elf_span(const char *path, int *cut);

#endif
