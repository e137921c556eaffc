/* address_space.c - the address-space limit and the room under it; see
 * address_space.h. */
#include "address_space.h"

#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

unsigned long long ds_address_space_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return 0;
    return (unsigned long long)r.rlim_cur;
}

unsigned long long ds_address_space_mapped(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024;
}

/* Reads `n` bytes at `off`; 1 when all were read. */
static int read_at(FILE *f, long off, void *buf, size_t n)
{
    return fseek(f, off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
}

unsigned long long ds_address_space_elf_span(const char *path, int *cut)
{
    if (cut)
        *cut = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    Elf64_Ehdr eh;
    unsigned long long lo = ~0ULL, hi = 0;
    const unsigned char host_order = *(const unsigned char *)&(const unsigned short){1} == 1
                                         ? ELFDATA2LSB : ELFDATA2MSB;
    if (read_at(f, 0, &eh, sizeof eh) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
        eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_ident[EI_DATA] == host_order &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            unsigned long long at, file_end, mem_end;
            /* a header past the file, or sums that wrap: malformed, span 0 */
            if (__builtin_add_overflow(eh.e_phoff, (unsigned long long)i * sizeof ph, &at) ||
                at > (unsigned long long)LONG_MAX || !read_at(f, (long)at, &ph, sizeof ph)) {
                hi = 0;
                break;
            }
            if (ph.p_type != PT_LOAD)
                continue;
            if (__builtin_add_overflow(ph.p_offset, ph.p_filesz, &file_end) ||
                __builtin_add_overflow(ph.p_vaddr, ph.p_memsz, &mem_end) || ph.p_filesz > ph.p_memsz) {
                hi = 0;
                break;
            }
            if (cut && size >= 0 && file_end > (unsigned long long)size)
                *cut = 1;
            if (ph.p_vaddr < lo)
                lo = ph.p_vaddr;
            if (mem_end > hi)
                hi = mem_end;
        }
    }
    fclose(f);
    return hi > lo ? hi - lo : 0;
}
