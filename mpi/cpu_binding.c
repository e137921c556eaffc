/* cpu_binding.c - the CPUs nearest a rank's GPU; see cpu_binding.h. */
#include "cpu_binding.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

ds_status ds_cpu_set_parse(const char *list, const char *what, ds_cpu_set *s)
{
    memset(s, 0, sizeof *s);
    const char *p = list;
    while (*p && *p != '\n') {
        char *end;
        errno = 0;
        const long lo = strtol(p, &end, 10);
        long hi = lo;
        if (end == p || errno || lo < 0)
            return DS_FAIL(DS_ERR_ARG, "%s: '%s' is not a CPU list (at '%s')", what, list, p);
        p = end;
        if (*p == '-') {
            hi = strtol(++p, &end, 10);
            if (end == p || hi < lo)
                return DS_FAIL(DS_ERR_ARG, "%s: '%s' is not a CPU list (a range at '%s')", what, list, p);
            p = end;
        }
        if (hi >= DS_CPU_MAX)
            return DS_FAIL(DS_ERR_ARG, "%s: CPU %ld of '%s' is past the %d dstrain handles", what, hi,
                           list, DS_CPU_MAX);
        for (long c = lo; c <= hi; c++)
            s->on[c] = 1;
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return DS_FAIL(DS_ERR_ARG, "%s: '%s' is not a CPU list (at '%s')", what, list, p);
    }
    return DS_OK;
}

void ds_cpu_set_format(const ds_cpu_set *s, char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = 0;
    for (int c = 0; c < DS_CPU_MAX && used < size; c++) {
        if (!s->on[c])
            continue;
        int e = c;
        while (e + 1 < DS_CPU_MAX && s->on[e + 1])
            e++;
        const int k = e > c ? snprintf(buf + used, size - used, "%s%d-%d", used ? "," : "", c, e)
                            : snprintf(buf + used, size - used, "%s%d", used ? "," : "", c);
        used += k > 0 ? (size_t)k : 0;
        c = e;
    }
}

int ds_cpu_set_count(const ds_cpu_set *s)
{
    int n = 0;
    for (int c = 0; c < DS_CPU_MAX; c++)
        n += s->on[c];
    return n;
}

/* 1 when a is a strict subset of b. */
static int strict_subset(const ds_cpu_set *a, const ds_cpu_set *b)
{
    int smaller = 0;
    for (int c = 0; c < DS_CPU_MAX; c++) {
        if (a->on[c] && !b->on[c])
            return 0;
        smaller |= b->on[c] && !a->on[c];
    }
    return smaller;
}

ds_status ds_cpu_bind_rule(const ds_cpu_topo *t, ds_cpu_binding *out)
{
    memset(out, 0, sizeof *out);
    if (t->share_count < 1 || t->share_index < 0 || t->share_index >= t->share_count)
        return DS_FAIL(DS_ERR_ARG, "CPU binding: rank %d of %d sharing its GPU's CPUs", t->share_index,
                       t->share_count);
    char now[128];
    ds_cpu_set_format(&t->current, now, sizeof now);
    if (t->launcher) {
        snprintf(out->why, sizeof out->why, "CPUs %s as the launcher bound the rank (%s)", now, t->launcher);
        return DS_OK;
    }
    if (strict_subset(&t->current, &t->usable)) {
        snprintf(out->why, sizeof out->why, "CPUs %s as the launcher bound the rank (an affinity "
                 "narrower than the CPUs it may use)", now);
        return DS_OK;
    }
    if (!t->known) {
        snprintf(out->why, sizeof out->why, "CPUs %s: the GPU's nearby CPUs are unknown (no topology)", now);
        return DS_OK;
    }
    int near[DS_CPU_MAX], n = 0;   /* usable CPUs near the GPU, ascending */
    for (int c = 0; c < DS_CPU_MAX; c++)
        if (t->gpu.on[c] && t->usable.on[c])
            near[n++] = c;
    if (n == 0) {
        snprintf(out->why, sizeof out->why, "CPUs %s: none of those near the GPU may be used here", now);
        return DS_OK;
    }
    const int m = t->share_count, k = t->share_index;
    out->bind = 1;
    if (m > n) {   /* more ranks than CPUs: one each, round robin */
        out->cpus.on[near[k % n]] = 1;
    } else {       /* slice k of m: [k*n/m, (k+1)*n/m) */
        for (int i = (int)((long)k * n / m); i < (int)((long)(k + 1) * n / m); i++)
            out->cpus.on[near[i]] = 1;
    }
    char list[128];
    ds_cpu_set_format(&out->cpus, list, sizeof list);
    snprintf(out->why, sizeof out->why, "CPUs %s, near its GPU%s (%d rank%s of this node share%s them%s)",
             list, m > 1 ? ", a slice" : "", m, m > 1 ? "s" : "", m > 1 ? "" : "s",
             m > n ? "; more ranks than CPUs, so some share a CPU" : "");
    return DS_OK;
}

/* The first line of root/rel into buf; 0 when it cannot be read. */
static int read_line(const char *root, const char *rel, char *buf, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    const int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

ds_status ds_cpu_topo_read(const char *root, const char *pci_bus_id, ds_cpu_topo *t)
{
    memset(t, 0, sizeof *t);
    t->share_count = 1;
    char id[64], rel[160], line[8192];
    snprintf(id, sizeof id, "%s", pci_bus_id ? pci_bus_id : "");
    for (char *p = id; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    snprintf(rel, sizeof rel, "bus/pci/devices/%s/local_cpulist", id);
    if (id[0] && read_line(root, rel, line, sizeof line)) {
        DS_TRY(ds_cpu_set_parse(line, rel, &t->gpu));
        t->known = ds_cpu_set_count(&t->gpu) > 0;
    }
    if (read_line(root, "devices/system/cpu/online", line, sizeof line))
        DS_TRY(ds_cpu_set_parse(line, "devices/system/cpu/online", &t->usable));
    else
        for (int c = 0; c < DS_CPU_MAX && c < sysconf(_SC_NPROCESSORS_CONF); c++)
            t->usable.on[c] = 1;
    ds_cpu_set cg;   /* the cgroup's cpuset (v2), where there is one */
    if (read_line(root, "fs/cgroup/cpuset.cpus.effective", line, sizeof line) && line[0] != '\n') {
        DS_TRY(ds_cpu_set_parse(line, "fs/cgroup/cpuset.cpus.effective", &cg));
        for (int c = 0; c < DS_CPU_MAX; c++)
            t->usable.on[c] &= cg.on[c];
    }
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        return DS_FAIL(DS_ERR_IO, "sched_getaffinity: %s", strerror(errno));
    for (int c = 0; c < DS_CPU_MAX && c < CPU_SETSIZE; c++)
        t->current.on[c] = (unsigned char)(CPU_ISSET(c, &mask) != 0);
    return DS_OK;
}

ds_status ds_cpu_bind_apply(const ds_cpu_set *s)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    for (int c = 0; c < DS_CPU_MAX && c < CPU_SETSIZE; c++)
        if (s->on[c])
            CPU_SET(c, &mask);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return DS_FAIL(DS_ERR_IO, "/proc/self/task: %s", strerror(errno));
    ds_status st = DS_OK;
    const struct dirent *e;
    while (st == DS_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        const pid_t tid = (pid_t)atol(e->d_name);
        if (sched_setaffinity(tid, sizeof mask, &mask) != 0 && errno != ESRCH)   /* ESRCH: it ended */
            st = DS_FAIL(DS_ERR_IO, "sched_setaffinity of thread %d: %s", (int)tid, strerror(errno));
    }
    closedir(d);
    return st;
}

/* The launcher's binding variable that is set, as "NAME=value", or NULL. */
static const char *launcher_binding(char *buf, size_t size)
{
    static const char *const vars[] = {"OMPI_MCA_hwloc_base_binding_policy", "SLURM_CPU_BIND"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            snprintf(buf, size, "%s=%s", vars[i], v);
            return buf;
        }
    }
    return NULL;
}

enum { LIST_CHARS = 512 };   /* a GPU's local_cpulist as exchanged between ranks */

ds_status ds_cpu_bind_rank(ds_world *w, const char *root, const char *pci_bus_id, ds_cpu_binding *out)
{
    static ds_cpu_topo t;   /* 12 KiB: off the stack */
    char launcher[160];
    DS_TRY(ds_cpu_topo_read(root, pci_bus_id, &t));
    t.launcher = launcher_binding(launcher, sizeof launcher);
    if (w && w->local_size > 1) {   /* the node's ranks near the same CPUs share them */
        char mine[LIST_CHARS] = "", *all = calloc((size_t)w->local_size, LIST_CHARS);
        if (!all)
            return DS_FAIL(DS_ERR_MEM, "CPU binding: %d ranks' CPU lists", w->local_size);
        if (t.known)
            ds_cpu_set_format(&t.gpu, mine, sizeof mine);
        ds_world_wait_begin(w, "the node's GPU CPU lists");
        const int rc = MPI_Allgather(mine, LIST_CHARS, MPI_CHAR, all, LIST_CHARS, MPI_CHAR, w->node_comm);
        ds_world_wait_end(w);
        const ds_status st = ds_world_check(rc, "MPI_Allgather (the node's GPU CPU lists)");
        t.share_index = 0, t.share_count = 0;
        for (int r = 0; st == DS_OK && r < w->local_size; r++)
            if (!strcmp(all + (size_t)r * LIST_CHARS, mine)) {
                t.share_index += r < w->local_rank;
                t.share_count++;
            }
        free(all);
        DS_TRY(st);
    }
    DS_TRY(ds_cpu_bind_rule(&t, out));
    return out->bind ? ds_cpu_bind_apply(&out->cpus) : DS_OK;
}
