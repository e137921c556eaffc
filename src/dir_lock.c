/* dir_lock.c - one run at a time in a folder (flock on .dstrain.lock); see
 * dir_lock.h. */
#include "dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The lock file opened as fd is one the run may write: a regular file
 * with no other name. A hard link planted at the name would make the
 * holder's line overwrite the file it links to; a FIFO would block. */
static ds_status lock_file_ours(int fd, const char *path, const char *what)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot look at the %s's lock: %s", path, what, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: the %s's lock is not a regular file: remove it (a run "
                       "creates its own)", path, what);
    if (sb.st_nlink != 1)
        return DS_FAIL(DS_ERR_IO, "%s: the %s's lock has %lu names (a hard link to another "
                       "file?): not written through; remove it (a run creates its own)", path,
                       what, (unsigned long)sb.st_nlink);
    return DS_OK;
}

/* The holder's line into the lock file held as fd, through a second,
 * writable descriptor that must be the same file (never a link, never a
 * file with another name). */
static void record_holder(int fd, const char *path, const char *what)
{
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
    struct stat held, w;
    /* the holder's line is a courtesy: a failure to write it is not the run's */
    const int wfd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int wrote = 0, err = errno, changed = 0;
    if (wfd >= 0) {
        /* not the file locked, or it has another name now: not written */
        changed = !(fstat(fd, &held) == 0 && fstat(wfd, &w) == 0 && held.st_dev == w.st_dev &&
                    held.st_ino == w.st_ino && S_ISREG(w.st_mode) && w.st_nlink == 1);
        wrote = !changed && ftruncate(wfd, 0) == 0 && write(wfd, line, (size_t)n) == n;
        err = errno;
        close(wfd);
    }
    if (!wrote)
        ds_log_print("warning: %s: cannot record this run in the %s's lock: %s\n", path, what,
                 changed ? "the lock file changed under it (replaced, or given another name)"
                           : strerror(err));
}

ds_status ds_dir_lock_take(const char *dir, const char *what, ds_dir_lock *l)
{
    l->held = 0;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/.dstrain.lock", dir) >= sizeof path)
        return DS_FAIL(DS_ERR_ARG, "%s: path too long for the %s's lock", dir, what);
    /* never through a link planted at the name, never truncated before it
     * is ours; held read-only (flock needs no write access), so the lock
     * keeps no file open for writing on the folder's file system */
    int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open the %s's lock: %s", path, what, strerror(errno));
    ds_status st = lock_file_ours(fd, path, what);
    if (st != DS_OK) {
        close(fd);
        return st;
    }
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
    record_holder(fd, path, what);
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
