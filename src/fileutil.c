/* fileutil.c - see fileutil.h. */
#include "fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* fsync of a file or directory. */
static ds_status sync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open to sync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    return rc ? DS_FAIL(DS_ERR_IO, "%s: fsync: %s", path, strerror(err)) : DS_OK;
}

ds_status ds_file_commit(const char *tmp, const char *path)
{
    char dir[4096];
    ds_status st = sync_path(tmp);
    if (st == DS_OK && rename(tmp, path) != 0)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (st != DS_OK) {
        unlink(tmp);
        return st;
    }
    snprintf(dir, sizeof dir, "%s", path);
    return sync_path(dirname(dir));
}

ds_status ds_file_open_tmp(const char *path, const char *what, char *tmp, size_t cap, FILE **f)
{
    if ((size_t)snprintf(tmp, cap, "%s.tmp", path) >= cap)
        return DS_FAIL(DS_ERR_ARG, "%s: path too long for the %s", path, what);
    *f = fopen(tmp, "w");
    return *f ? DS_OK : DS_FAIL(DS_ERR_IO, "%s: cannot write the %s: %s", tmp, what, strerror(errno));
}

ds_status ds_file_close_commit(FILE *f, const char *tmp, const char *path, const char *what)
{
    /* the flush first, its errno kept: a full disk shows here or in an
     * earlier write that set the error flag */
    errno = 0;
    const int failed = fflush(f) != 0 || ferror(f);
    const int err = errno;
    const int closed = fclose(f);
    if (closed != 0 || failed) {
        const char *why = strerror(err ? err : errno ? errno : EIO);
        unlink(tmp);
        return DS_FAIL(DS_ERR_IO, "%s: writing the %s failed (%s); %s is as it was", tmp, what,
                       why, path);
    }
    return ds_file_commit(tmp, path);
}

void ds_file_abandon(FILE *f, const char *tmp)
{
    if (f)
        fclose(f);
    unlink(tmp);
}

/* mkdir -p: every missing parent of dir, then dir. */
static int make_dirs(const char *dir)
{
    char part[4096];
    snprintf(part, sizeof part, "%s", dir);
    for (char *p = part + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(part, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(part, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

ds_status ds_dir_ready(const char *dir, const char *what)
{
    struct stat sb;
    if (make_dirs(dir) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot create the %s: %s", dir, what, strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: the %s is not a directory", dir, what);
    /* access() would trust the mode bits; a real file says what a write will meet */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.dstrain-probe-%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot write in the %s: %s", dir, what, strerror(errno));
    const int ok = write(fd, "x", 1) == 1;
    const int err = errno;
    close(fd);
    unlink(probe);
    return ok ? DS_OK : DS_FAIL(DS_ERR_IO, "%s: cannot write in the %s: %s", dir, what, strerror(err));
}

ds_status ds_file_read_text(const char *path, size_t max, const char *what, char **text)
{
    *text = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open %s", path, what);
    ds_status st = DS_OK;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || (size_t)n > max) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s unreadable or larger than %zu bytes", path, what, max);
        goto close;
    }
    rewind(f);
    *text = malloc((size_t)n + 1);
    if (!*text) {
        st = DS_FAIL(DS_ERR_MEM, "%s: no memory for %s", path, what);
        goto close;
    }
    if (fread(*text, 1, (size_t)n, f) != (size_t)n) {
        st = DS_FAIL(DS_ERR_IO, "%s: short read of %s", path, what);
        free(*text);
        *text = NULL;
        goto close;
    }
    (*text)[n] = '\0';
close:
    fclose(f);
    return st;
}
