/* test_cpu_binding.c - the CPUs a GPU rank's threads run on (cpu_binding.h),
 * over made-up topologies:
 *  - CPU lists parsed and written back ("0-3,8,10-11"), malformed ones
 *    refused naming the file;
 *  - the rule as a table: a launcher's binding kept (its variable set, or
 *    an affinity narrower than the usable CPUs), no topology left alone,
 *    the GPU's usable nearby CPUs taken (a cgroup cuts them), shared in
 *    contiguous even slices by the ranks near the same CPUs, round robin
 *    past one CPU each, a bad share refused;
 *  - the topology read from a made-up sysfs tree (the GPU's local_cpulist
 *    found whatever the case of its PCI address, the online CPUs cut by the
 *    cgroup's cpuset), and a missing device read as unknown;
 *  - the binding applied to every thread of the process, one started
 *    before it included (then put back). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu_binding.h"
#include "testutil.h"

static ds_cpu_set set_of(const char *list)
{
    ds_cpu_set s;
    if (ds_cpu_set_parse(list, "test", &s) != DS_OK)
        T_CHECK(0, "'%s' did not parse: %s", list, ds_status_last_error());
    return s;
}

static int check_lists(void)
{
    static const char *const good[][2] = {
        {"0-3,8,10-11", "0-3,8,10-11"}, {"0,1,2,3\n", "0-3"}, {"", ""}, {"7", "7"},
        {"4095", "4095"}, {"0-1,2-3", "0-3"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        ds_cpu_set s = set_of(good[i][0]);
        char out[64];
        ds_cpu_set_format(&s, out, sizeof out);
        T_CHECK(!strcmp(out, good[i][1]), "'%s' written back as '%s', not '%s'", good[i][0], out,
                good[i][1]);
    }
    static const char *const bad[] = {"0-", "3-1", "a", "4096", "1,,2", "1;2", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ds_cpu_set s;
        ds_status_clear_error();
        T_CHECK(ds_cpu_set_parse(bad[i], "bus/pci/devices/x/local_cpulist", &s) == DS_ERR_ARG &&
                    strstr(ds_status_last_error(), "local_cpulist"),
                "'%s' accepted or unnamed: %s", bad[i], ds_status_last_error());
    }
    ds_status_clear_error();
    return 0;
}

typedef struct {
    const char *what;
    int known;
    const char *gpu, *usable, *current, *launcher;
    int index, count;
    int bind;              /* -1: the rule refuses (DS_ERR_ARG) */
    const char *cpus;      /* when bound */
    const char *says;      /* a part of why */
} rule_case;

static const rule_case RULES[] = {
    {"one rank, GPU near 0-15 of 32", 1, "0-15", "0-31", "0-31", NULL, 0, 1, 1, "0-15", "near its GPU"},
    {"the other socket's GPU", 1, "16-31", "0-31", "0-31", NULL, 0, 1, 1, "16-31", "CPUs 16-31"},
    {"two ranks near one socket: the first half", 1, "0-15", "0-31", "0-31", NULL, 0, 2, 1, "0-7", "2 ranks"},
    {"two ranks near one socket: the second half", 1, "0-15", "0-31", "0-31", NULL, 1, 2, 1, "8-15", "a slice"},
    {"three ranks over 8 CPUs: 2", 1, "0-7", "0-7", "0-7", NULL, 0, 3, 1, "0-1", NULL},
    {"three ranks over 8 CPUs: 3", 1, "0-7", "0-7", "0-7", NULL, 1, 3, 1, "2-4", NULL},
    {"three ranks over 8 CPUs: 3 more", 1, "0-7", "0-7", "0-7", NULL, 2, 3, 1, "5-7", NULL},
    {"split lists (hyperthreads)", 1, "0-3,32-35", "0-63", "0-63", NULL, 1, 2, 1, "32-35", NULL},
    {"a cgroup leaves 4 near ones", 1, "0-15", "0-3,16-19", "0-3,16-19", NULL, 1, 2, 1, "2-3", NULL},
    {"more ranks than CPUs: round robin", 1, "0-1", "0-31", "0-31", NULL, 4, 5, 1, "0", "share a CPU"},
    {"Open MPI's binding kept", 1, "0-15", "0-31", "0-31", "OMPI_MCA_hwloc_base_binding_policy=core", 0, 1,
     0, NULL, "OMPI_MCA_hwloc_base_binding_policy=core"},
    {"Slurm's binding kept", 1, "0-15", "0-31", "20-23", "SLURM_CPU_BIND=cores", 0, 1, 0, NULL, "CPUs 20-23"},
    {"an affinity narrower than the usable CPUs kept", 1, "0-15", "0-31", "5", NULL, 0, 1, 0, NULL,
     "narrower"},
    {"no topology", 0, "", "0-31", "0-31", NULL, 0, 1, 0, NULL, "unknown"},
    {"no nearby CPU usable", 1, "0-15", "16-31", "16-31", NULL, 0, 1, 0, NULL, "none of those near"},
    {"a share past its count", 1, "0-15", "0-31", "0-31", NULL, 2, 2, -1, NULL, "rank 2 of 2"},
    {"no share", 1, "0-15", "0-31", "0-31", NULL, 0, 0, -1, NULL, "rank 0 of 0"},
};

static int check_rules(void)
{
    static ds_cpu_topo t;
    static ds_cpu_binding b;
    for (size_t i = 0; i < sizeof RULES / sizeof *RULES; i++) {
        const rule_case *c = &RULES[i];
        t = (ds_cpu_topo){.known = c->known, .launcher = c->launcher, .share_index = c->index,
                          .share_count = c->count};
        t.gpu = set_of(c->gpu);
        t.usable = set_of(c->usable);
        t.current = set_of(c->current);
        ds_status_clear_error();
        const ds_status st = ds_cpu_bind_rule(&t, &b);
        if (c->bind < 0) {
            T_CHECK(st == DS_ERR_ARG && strstr(ds_status_last_error(), c->says), "%s: status %d: %s",
                    c->what, st, ds_status_last_error());
            continue;
        }
        T_CHECK(st == DS_OK, "%s: %s", c->what, ds_status_last_error());
        char got[64] = "";
        if (b.bind)
            ds_cpu_set_format(&b.cpus, got, sizeof got);
        T_CHECK(b.bind == c->bind && (!c->bind || !strcmp(got, c->cpus)),
                "%s: bind %d to '%s', wanted %d to '%s' (%s)", c->what, b.bind, got, c->bind,
                c->cpus ? c->cpus : "", b.why);
        T_CHECK(!c->says || strstr(b.why, c->says), "%s: '%s' does not say '%s'", c->what, b.why, c->says);
    }
    ds_status_clear_error();
    return 0;
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[512], dir[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "mkdir -p \"$(dirname '%s')\"", path);
    T_CHECK(system(dir) == 0, "%s", dir);
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int check_read(void)
{
    char root[] = "/tmp/test_cpu_binding.XXXXXX";
    T_CHECK(mkdtemp(root) != NULL, "mkdtemp");
    put(root, "bus/pci/devices/0000:3b:00.0/local_cpulist", "0-7,16-23\n");
    put(root, "devices/system/cpu/online", "0-31\n");
    put(root, "fs/cgroup/cpuset.cpus.effective", "0-3,16-31\n");
    static ds_cpu_topo t;
    T_OK(ds_cpu_topo_read(root, "0000:3B:00.0", &t));
    char gpu[64], usable[64];
    ds_cpu_set_format(&t.gpu, gpu, sizeof gpu);
    ds_cpu_set_format(&t.usable, usable, sizeof usable);
    T_CHECK(t.known && !strcmp(gpu, "0-7,16-23") && !strcmp(usable, "0-3,16-31"),
            "read: known %d, gpu '%s', usable '%s'", t.known, gpu, usable);
    T_CHECK(t.share_count == 1 && t.share_index == 0 && ds_cpu_set_count(&t.current) > 0,
            "read: share %d of %d, %d CPUs now", t.share_index, t.share_count, ds_cpu_set_count(&t.current));
    T_OK(ds_cpu_topo_read(root, "0000:AF:00.0", &t));
    T_CHECK(!t.known, "a device without a sysfs entry read as known");
    put(root, "bus/pci/devices/0000:3b:00.0/local_cpulist", "0-7,x\n");
    ds_status_clear_error();
    T_CHECK(ds_cpu_topo_read(root, "0000:3b:00.0", &t) == DS_ERR_ARG &&
                strstr(ds_status_last_error(), "0000:3b:00.0/local_cpulist"),
            "a malformed local_cpulist: %s", ds_status_last_error());
    ds_status_clear_error();
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", root);
    T_CHECK(system(rm) == 0, "%s", rm);
    return 0;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int tid_ready, done;
static pid_t worker_tid;

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    worker_tid = (pid_t)syscall(SYS_gettid);
    tid_ready = 1;
    pthread_cond_broadcast(&cv);
    while (!done)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int check_apply(void)
{
    cpu_set_t before, got;
    T_CHECK(sched_getaffinity(0, sizeof before, &before) == 0, "sched_getaffinity");
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &before))
            first = c;
    pthread_t th;
    T_CHECK(pthread_create(&th, NULL, worker, NULL) == 0, "pthread_create");
    pthread_mutex_lock(&mu);
    while (!tid_ready)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    ds_cpu_set one = {0};
    one.on[first] = 1;
    T_OK(ds_cpu_bind_apply(&one));
    T_CHECK(sched_getaffinity(worker_tid, sizeof got, &got) == 0 && CPU_COUNT(&got) == 1 &&
                CPU_ISSET(first, &got),
            "a thread started before the binding is not on CPU %d (%d CPUs)", first, CPU_COUNT(&got));
    T_CHECK(sched_getaffinity(0, sizeof got, &got) == 0 && CPU_COUNT(&got) == 1, "the main thread: %d CPUs",
            CPU_COUNT(&got));
    ds_cpu_set all = {0};   /* put back */
    for (int c = 0; c < CPU_SETSIZE && c < DS_CPU_MAX; c++)
        all.on[c] = CPU_ISSET(c, &before) != 0;
    T_OK(ds_cpu_bind_apply(&all));
    pthread_mutex_lock(&mu);
    done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    return 0;
}

int main(void)
{
    check_lists();
    check_rules();
    check_read();
    check_apply();
    return t_finish("test_cpu_binding");
}
