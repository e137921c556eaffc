/* file.c - durable file replacement and whole-file reads; see file.h. */
#include "file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ds_file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a folder"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO (named pipe)"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISREG(m)  ? "a regular file"
                         : "not a regular file";
}

ds_status ds_file_output_ok(const char *path, const char *what)
{
    struct stat sb;
    if (!path || !*path)
        return DS_FAIL(DS_ERR_ARG, "the %s's path is empty: give a file name", what);
    const size_t n = strlen(path);
    if (n + DS_TMP_SUFFIX_LEN >= DS_PATH_MAX)
        return DS_FAIL(DS_ERR_ARG, "path too long for the %s: %zu characters, and its temporary "
                       "name %d more, over the limit of %d (give a shorter path): %s", what, n,
                       DS_TMP_SUFFIX_LEN, DS_PATH_MAX - 1, path);
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? DS_OK
                               : DS_FAIL(DS_ERR_IO, "%s: cannot look at the %s: %s", path, what,
                                         strerror(errno));
    if (S_ISREG(sb.st_mode))
        return DS_OK;
    if (S_ISLNK(sb.st_mode))
        return DS_FAIL(DS_ERR_ARG, "%s: is a symbolic link: the %s is not written through it "
                       "(give the file it names, or another path)", path, what);
    return DS_FAIL(DS_ERR_ARG, "%s: is %s, not a regular file: the %s would replace it; "
                   "refused (give a file's path)", path, ds_file_kind(sb.st_mode), what);
}

/* fsync of path opened with flags (what: "the folder", "the file", for messages). */
static ds_status sync_opened(const char *path, int flags, const char *what)
{
    int fd = open(path, flags | O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open %s to sync: %s", path, what, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    return rc ? DS_FAIL(DS_ERR_IO, "%s: fsync: %s", path, strerror(err)) : DS_OK;
}

/* A directory through links (a linked scratch folder is the folder the
 * file went into); a file never through a link. */
static ds_status sync_dir(const char *path) { return sync_opened(path, O_DIRECTORY, "the folder"); }
static ds_status sync_path(const char *path)
{
    return sync_opened(path, O_NOFOLLOW | O_NONBLOCK, "the file");
}

ds_status ds_file_commit(const char *tmp, const char *path)
{
    struct stat sb;
    /* a temporary file swapped for a link or anything else after it was
     * written would become path: refused */
    const int missing = lstat(tmp, &sb) != 0;
    if (missing || !S_ISREG(sb.st_mode)) {
        const int gone = missing && errno == ENOENT;
        if (!gone)
            unlink(tmp);
        return DS_FAIL(DS_ERR_IO, "%s: the finished temporary file is %s: %s not replaced", tmp,
                       gone ? "gone" : "no longer a regular file (replaced by someone?)", path);
    }
    ds_status st = sync_path(tmp);
    /* looked at again: a device or FIFO put at path since the start is not
     * replaced either */
    if (st == DS_OK)
        st = ds_file_output_ok(path, "output");
    if (st == DS_OK && rename(tmp, path) != 0)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (st != DS_OK) {
        unlink(tmp);
        return st;
    }
    char *dir = strdup(path);
    if (!dir)
        return DS_FAIL(DS_ERR_MEM, "%s: no memory to name its folder", path);
    st = sync_dir(dirname(dir));
    free(dir);
    return st;
}

/* Six random letters and digits after path into tmp [cap]. */
static ds_status random_tmp(const char *path, const char *what, char *tmp, size_t cap)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[6];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return DS_FAIL(DS_ERR_IO, "%s: no random bytes for the %s's temporary name: %s", path,
                       what, strerror(errno));
    char x[7];
    for (int k = 0; k < 6; k++)
        x[k] = digits[r[k] % (sizeof digits - 1)];
    x[6] = '\0';
    if ((size_t)snprintf(tmp, cap, "%s.%s.tmp", path, x) >= cap)
        return DS_FAIL(DS_ERR_ARG, "%s: path too long for the %s", path, what);
    return DS_OK;
}

enum { TMP_TRIES = 64 };

ds_status ds_file_tmp_name(const char *path, const char *what, char *tmp, size_t cap)
{
    struct stat sb;
    DS_TRY(ds_file_output_ok(path, what));
    for (int k = 0; k < TMP_TRIES; k++) {
        DS_TRY(random_tmp(path, what, tmp, cap));
        if (lstat(tmp, &sb) != 0 && errno == ENOENT)
            return DS_OK;
    }
    return DS_FAIL(DS_ERR_IO, "%s: no free temporary name for the %s in %d tries", path, what,
                   TMP_TRIES);
}

/* The exclusive creation of ds_file_tmp_create: the descriptor, or -1 with errno
 * set (a failure to name is reported as EINVAL after the error is set). */
static int create_excl(const char *path, const char *what, char *tmp, size_t cap)
{
    for (int k = 0; k < TMP_TRIES; k++) {
        if (random_tmp(path, what, tmp, cap) != DS_OK) {
            errno = EINVAL;
            return -1;
        }
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

ds_status ds_file_tmp_create(const char *path, const char *what, char *tmp, size_t cap, int *fd)
{
    *fd = -1;
    DS_TRY(ds_file_output_ok(path, what));
    *fd = create_excl(path, what, tmp, cap);
    if (*fd >= 0)
        return DS_OK;
    if (errno == EEXIST)
        return DS_FAIL(DS_ERR_IO, "%s: no free temporary name for the %s in %d tries", path, what,
                       TMP_TRIES);
    return DS_FAIL(DS_ERR_IO, "%s: cannot create the %s: %s", tmp, what, strerror(errno));
}

int ds_file_tmp_is_of(const char *name, const char *base)
{
    const size_t n = strlen(name), b = strlen(base);
    if (n != b + DS_TMP_SUFFIX_LEN || strncmp(name, base, b) != 0 || name[b] != '.' ||
        strcmp(name + b + 7, ".tmp") != 0)
        return 0;
    for (size_t k = b + 1; k < b + 7; k++)
        if (!isalnum((unsigned char)name[k]))
            return 0;
    return 1;
}

ds_status ds_file_open_stream(const char *path, int append, const char *what, FILE **f)
{
    *f = NULL;
    /* O_NONBLOCK: a FIFO with no reader is an error (ENXIO), not a wait for ever */
    const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : O_TRUNC);
    int fd = open(path, flags | O_NOFOLLOW, 0644);
    struct stat sb, target;
    /* a link to a stream (/dev/stdout, a FIFO) is followed: no file behind it to destroy */
    if (fd < 0 && errno == ELOOP && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) &&
        stat(path, &target) == 0 &&
        (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode) || S_ISSOCK(target.st_mode)))
        fd = open(path, flags & ~O_CREAT, 0644);
    if (fd < 0) {
        if (errno == ELOOP && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
            return DS_FAIL(DS_ERR_IO, "%s: the %s is a symbolic link: not written through (give "
                           "the file it names, or another path)", path, what);
        if (errno == ENXIO)
            return DS_FAIL(DS_ERR_IO, "%s: the %s is a FIFO that nothing reads: start its reader "
                           "first, or give a file", path, what);
        return DS_FAIL(DS_ERR_IO, "%s: cannot open the %s for writing: %s", path, what,
                       strerror(errno));
    }
    const int fl = fcntl(fd, F_GETFL);   /* writes block as usual once open */
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *f = fdopen(fd, append ? "a" : "w");
    if (!*f) {
        const int err = errno;
        close(fd);
        return DS_FAIL(DS_ERR_IO, "%s: cannot write the %s: %s", path, what, strerror(err));
    }
    return DS_OK;
}

ds_status ds_file_refuse_output_over_input(const char *cmd, const char *out_what, const char *out,
                                      const char *const *in_what, const char *const *in, int n)
{
    struct stat so, si;
    if (!out || stat(out, &so) != 0)
        return DS_OK;
    for (int k = 0; k < n; k++)
        if (in[k] && stat(in[k], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return DS_FAIL(DS_ERR_ARG, "%s: the %s %s is the %s %s: refusing to write over an "
                           "input", cmd, out_what, out, in_what[k], in[k]);
    return DS_OK;
}

ds_status ds_file_open_tmp(const char *path, const char *what, char *tmp, size_t cap, FILE **f)
{
    int fd;
    *f = NULL;
    DS_TRY(ds_file_tmp_create(path, what, tmp, cap, &fd));
    *f = fdopen(fd, "w");
    if (*f)
        return DS_OK;
    const int err = errno;
    close(fd);
    unlink(tmp);
    return DS_FAIL(DS_ERR_IO, "%s: cannot write the %s: %s", tmp, what, strerror(err));
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
    char part[DS_PATH_MAX];
    if (strlen(dir) >= sizeof part) {
        errno = ENAMETOOLONG;
        return -1;
    }
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

ds_status ds_file_dir_ready(const char *dir, const char *what)
{
    struct stat sb;
    /* the probe's name, and any file's written there, must fit beside it */
    if (strlen(dir) + DS_DIR_NAME_ROOM >= DS_PATH_MAX)
        return DS_FAIL(DS_ERR_ARG, "path too long for the %s: %zu characters, and a file's name "
                       "in it, over the limit of %d (give a shorter path): %s", what, strlen(dir),
                       DS_PATH_MAX - 1, dir);
    if (make_dirs(dir) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot create the %s: %s", dir, what, strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: the %s is not a directory", dir, what);
    /* access() would trust the mode bits; a real file says what a write
     * will meet: a new one of a random name, never one planted there */
    char base[4200], probe[4300];
    snprintf(base, sizeof base, "%s/.dstrain-probe", dir);
    int fd = create_excl(base, what, probe, sizeof probe);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot write in the %s: %s", dir, what, strerror(errno));
    const int ok = write(fd, "x", 1) == 1;
    const int err = errno;
    close(fd);
    unlink(probe);
    return ok ? DS_OK : DS_FAIL(DS_ERR_IO, "%s: cannot write in the %s: %s", dir, what, strerror(err));
}

ds_status ds_file_dir_resolve(const char *dir, const char *what, size_t name_len, char **real,
                              ds_file_id *id)
{
    struct stat sb;
    *real = NULL;
    if (strlen(dir) + 1 + name_len >= DS_PATH_MAX)
        return DS_FAIL(DS_ERR_ARG, "path too long for the %s: %zu characters, and %zu more for the "
                       "names written in it, over the limit of %d (give a shorter path): %s",
                       what, strlen(dir), name_len + 1, DS_PATH_MAX - 1, dir);
    char *r = realpath(dir, NULL);
    if (!r)
        return DS_FAIL(DS_ERR_IO, "%s: cannot resolve the %s's real path: %s", dir, what,
                       strerror(errno));
    ds_status st = DS_OK;
    if (strlen(r) + 1 + name_len >= DS_PATH_MAX)
        st = DS_FAIL(DS_ERR_ARG, "path too long for the %s: its real path has %zu characters, and "
                     "%zu more for the names written in it, over the limit of %d: %s", what,
                     strlen(r), name_len + 1, DS_PATH_MAX - 1, r);
    else if (lstat(r, &sb) != 0)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot look at the %s (%s): %s", dir, what, r, strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        st = DS_FAIL(DS_ERR_IO, "%s: the %s (%s) is %s, not a folder", dir, what, r,
                     ds_file_kind(sb.st_mode));
    if (st != DS_OK) {
        free(r);
        return st;
    }
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
    *real = r;
    return DS_OK;
}

ds_status ds_file_dir_same(const char *real, const ds_file_id *id, const char *what)
{
    struct stat sb;
    if (lstat(real, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "the %s %s is gone (%s): moved or removed during the run; "
                       "stopping rather than writing elsewhere", what, real, strerror(errno));
    if (S_ISLNK(sb.st_mode) || !S_ISDIR(sb.st_mode) || sb.st_dev != id->dev ||
        sb.st_ino != id->ino)
        return DS_FAIL(DS_ERR_IO, "the %s %s is no longer the folder this run started with "
                       "(device %lu, inode %lu then; now %s, device %lu, inode %lu): replaced "
                       "during the run; stopping rather than writing elsewhere", what, real,
                       (unsigned long)id->dev, (unsigned long)id->ino, ds_file_kind(sb.st_mode),
                       (unsigned long)sb.st_dev, (unsigned long)sb.st_ino);
    return DS_OK;
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
