/* dir_lock.c - one run at a time in a folder (flock on .dstrain.lock); see
 * dir_lock.h. */
#include "dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

ds_status ds_dir_lock_take(const char *dir, const char *what, ds_dir_lock *l)
{
    l->held = 0;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/.dstrain.lock", dir) >= sizeof path)
        return DS_FAIL(DS_ERR_ARG, "%s: path too long for the %s's lock", dir, what);
    /* never through a link planted at the name, never truncated before it
     * is ours; held read-only (flock needs no write access), so the lock
     * keeps no file open for writing on the folder's file system */
    int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open the %s's lock: %s", path, what, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) {
            char holder[256] = "";
            const ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
            holder[n > 0 ? n : 0] = '\0';
            holder[strcspn(holder, "\n")] = '\0';
            close(fd);
            return DS_FAIL(DS_ERR_IO, "%s: another run holds this %s (%s): two runs in one folder "
                           "would overwrite each other's checkpoints; give another folder, or "
                           "stop that run", dir, what, *holder ? holder : "holder unknown");
        }
        close(fd);
        if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
            ds_log_print("warning: %s: this file system takes no locks (%s): nothing stops a second "
                     "run from using the same %s\n", dir, strerror(err), what);
            return DS_OK;
        }
        return DS_FAIL(DS_ERR_IO, "%s: cannot lock the %s: %s", path, what, strerror(err));
    }
    char host[128] = "?", line[320];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    const time_t now = time(NULL);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const int n = snprintf(line, sizeof line, "host %s, process %ld, since %s\n", host,
                           (long)getpid(), when);
    /* the holder's line is a courtesy: a failure to write it is not the run's */
    const int wfd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    const int wrote = wfd >= 0 && write(wfd, line, (size_t)n) == n;
    const int err = errno;
    if (wfd >= 0)
        close(wfd);
    if (!wrote)
        ds_log_print("warning: %s: cannot record this run in the %s's lock: %s\n", path, what,
                 strerror(err));
    l->fd = fd;
    l->held = 1;
    return DS_OK;
}

void ds_dir_lock_release(ds_dir_lock *l)
{
    if (!l->held)
        return;
    close(l->fd);   /* drops the flock */
    l->held = 0;
}
