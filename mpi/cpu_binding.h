/* cpu_binding.h - the CPUs a GPU rank's threads run on: those nearest its
 * GPU, from the machine's topology, unless the launcher bound the rank.
 *
 * A GPU step is queued by the host (issue 34: ds2 in FP16 is host-bound),
 * and a rank's threads that wander to the other socket pay a remote memory
 * hop on every upload and every launch. The rule (ds_cpu_bind_rule) is pure,
 * so every case is a table test with a made-up topology:
 *  - the launcher bound the rank (Open MPI's --bind-to, Slurm's --cpu-bind:
 *    its policy variable set, or an affinity narrower than the CPUs the
 *    process may use): left as it is, a binding the user chose;
 *  - the GPU's nearby CPUs unknown (no topology), or none of them usable:
 *    left as it is;
 *  - else the usable CPUs near the GPU, shared among the node's ranks whose
 *    GPUs are near the same CPUs: the k-th of m such ranks (local rank
 *    order) takes the k-th of m contiguous, equal slices (sizes differing by
 *    one at most); with more such ranks than CPUs, one CPU each, round robin.
 * ds_cpu_topo_read fills the inputs from sysfs (a root argument, so tests
 * pass a made-up tree); ds_cpu_bind_apply sets the affinity of every
 * thread of the process (threads started later inherit the main thread's). */
#ifndef DS_CPU_BINDING_H
#define DS_CPU_BINDING_H

#include "status.h"
#include "world.h"

#define DS_CPU_MAX 4096   /* CPU numbers below this */

typedef struct {
    unsigned char on[DS_CPU_MAX];   /* 1: CPU i is in the set */
} ds_cpu_set;

/* "0-3,8,10-11" -> *s (cleared first). DS_ERR_ARG, naming what, on a malformed
 * list or a CPU number at or past DS_CPU_MAX. "" is the empty set. */
ds_status ds_cpu_set_parse(const char *list, const char *what, ds_cpu_set *s);
/* *s as a list ("0-3,8"), cut to fit size; "" for the empty set. */
void ds_cpu_set_format(const ds_cpu_set *s, char *buf, size_t size);
int ds_cpu_set_count(const ds_cpu_set *s);

typedef struct {
    int known;               /* 1: gpu holds the GPU's nearby CPUs (its PCI device's
                              * local_cpulist); 0: no topology for it */
    ds_cpu_set gpu;
    ds_cpu_set usable;       /* CPUs the process may run on: online, in its cgroup */
    ds_cpu_set current;      /* its affinity now */
    const char *launcher;    /* the launcher's binding variable and value ("OMPI_MCA_hwloc_
                              * base_binding_policy=core"), NULL when none is set */
    int share_index, share_count;   /* this rank among the node's ranks near the same CPUs */
} ds_cpu_topo;

typedef struct {
    int bind;                /* 1: set cpus; 0: leave the affinity as it is */
    ds_cpu_set cpus;
    char why[320];           /* one line: what was chosen and why */
} ds_cpu_binding;

ds_status ds_cpu_bind_rule(const ds_cpu_topo *t, ds_cpu_binding *out);

/* t's topology for the GPU at PCI address pci_bus_id ("0000:3B:00.0", any
 * case) from sysfs under root ("/sys"): its local_cpulist, the online CPUs
 * and the cgroup's cpuset (where readable), and current from the process's
 * affinity. launcher and the share are the caller's. */
ds_status ds_cpu_topo_read(const char *root, const char *pci_bus_id, ds_cpu_topo *t);

/* Every thread of the process onto s (sched_setaffinity per task). */
ds_status ds_cpu_bind_apply(const ds_cpu_set *s);

/* The rule applied to this rank of w (NULL: a lone process) for its GPU at
 * pci_bus_id, topology from sysfs at root: the node's ranks exchange their
 * GPUs' CPU lists (collective on w->node_comm), the launcher's binding
 * variables are read, and the binding set when the rule binds. */
ds_status ds_cpu_bind_rank(ds_world *w, const char *root, const char *pci_bus_id, ds_cpu_binding *out);

#endif
