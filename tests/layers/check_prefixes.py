#!/usr/bin/env python3
"""check_prefixes.py - every symbol the libraries export carries its file's
module prefix, so a name found in a backtrace or a profile leads to its file.

usage: check_prefixes.py NM SOURCE_DIR LIB.a [LIB.a ...]

A C object X.c.o (X = a_b_c) may export ds_a_..., ds_a_b_..., ds_a_b_c_...
(or exactly ds_a, ds_a_b, ...): the file's own prefix or its family's
(dataset_read.c exports ds_dataset_*). A backend's files may also export
its ds_cpu_* or ds_cuda_*, and cuda/ the op twins cuda_<op> (cuda/README.md;
the CPU's cpu_<op> are static); CUDA kernels and helpers stay in anonymous
namespaces. Exits 1 listing every symbol that breaks the rule."""
import os, re, subprocess, sys

nm, src, libs = sys.argv[1], sys.argv[2], sys.argv[3:]
# the top-level folder of each source file, by name (names are unique)
folder = {}
for d in ('src', 'cpu', 'cuda', 'data', 'mpi', 'app', 'pytorch', 'bench'):
    for dp, _, fn in os.walk(os.path.join(src, d)):
        for f in fn:
            folder.setdefault(f, d)
# Symbols the toolchain adds to CUDA objects, not ours.
TOOLCHAIN = ('__cuda', '__device_stub', '__nv', '__fatbin', '_GLOBAL__', 'nvtx',
             'typeinfo', 'vtable', 'guard variable', 'std::', '__gnu_cxx', '__gxx',
             'DW.ref.', 'InitializeInjectionNvtx')

def allowed(obj, sym):
    src_name = obj[:-2]                   # conv.cu.o -> conv.cu
    stem = src_name.rsplit('.', 1)[0]
    parts = stem.split('_')
    for i in range(1, len(parts) + 1):
        p = 'ds_' + '_'.join(parts[:i])
        if sym == p or sym.startswith(p + '_'):
            return True
    where = folder.get(src_name)
    if where == 'cpu':
        return sym.startswith('ds_cpu_')
    if where == 'cuda':
        return sym.startswith(('ds_cuda_', 'cuda_'))
    return False

bad, seen = [], 0
for lib in libs:
    out = subprocess.run([nm, '-A', '-C', '-g', '--defined-only', lib],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        # lib.a:obj.c.o:0000000000000000 T name(args)
        try:
            where, rest = line.rsplit('.o:', 1)
        except ValueError:
            continue
        obj = where.split(':')[-1] + '.o'
        f = rest.split(None, 2)
        if len(f) < 3 or f[1] not in 'TDBRWVu':
            continue
        # "ds_status cuda_sumsq<float>(ds_ctx*, ...)" -> cuda_sumsq
        sym = f[2].split('(')[0] or f[2]
        while '<' in sym and re.search(r'<[^<>]*>', sym):
            sym = re.sub(r'<[^<>]*>', '', sym)
        sym = (sym.split() or [f[2]])[-1]
        if sym.startswith(TOOLCHAIN) or '(anonymous namespace)' in f[2]:
            continue
        seen += 1
        if not allowed(obj, sym):
            bad.append('%s: %s' % (obj, f[2]))
for b in sorted(set(bad)):
    print('no module prefix:', b)
print('%d exported symbols checked, %d without their file\'s prefix' % (seen, len(set(bad))))
sys.exit(1 if bad else 0)
