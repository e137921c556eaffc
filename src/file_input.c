/* file_input.c - inputs checked before they are opened and watched while
 * they are read; see file_input.h. */
#include "file_input.h"
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ds_status refuse_kind(const char *path, const char *what, mode_t m)
{
    return DS_FAIL(DS_ERR_ARG, "%s: the %s is %s, not a regular file: refused before opening it "
                   "(an open or a read of it could wait for ever); give a file", path, what,
                   ds_file_kind(m));
}

ds_status ds_file_require_regular(const char *path, const char *what)
{
    struct stat sb;
    if (!path || !*path)
        return DS_FAIL(DS_ERR_ARG, "the %s: empty path", what);
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open the %s: %s", path, what, strerror(errno));
    return S_ISREG(sb.st_mode) ? DS_OK : refuse_kind(path, what, sb.st_mode);
}

ds_status ds_file_open_input(const char *path, const char *what, int *fd)
{
    *fd = -1;
    DS_TRY(ds_file_require_regular(path, what));
    const int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open the %s: %s", path, what, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        const int err = errno;
        close(f);
        return DS_FAIL(DS_ERR_IO, "%s: cannot stat the %s: %s", path, what, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {   /* swapped since the check */
        close(f);
        return refuse_kind(path, what, sb.st_mode);
    }
    *fd = f;
    return DS_OK;
}

ds_status ds_file_input_identify(int fd, const char *path, const char *what, ds_file_input_id *id)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot stat the %s: %s", path, what, strerror(errno));
    *id = (ds_file_input_id){sb.st_dev, sb.st_ino, sb.st_size};
    return DS_OK;
}

ds_status ds_file_input_same_size(int fd, const char *path, const char *what,
                                  const ds_file_input_id *id)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot stat the %s: %s", path, what, strerror(errno));
    if (sb.st_size == id->size)
        return DS_OK;
    return DS_FAIL(DS_ERR_IO, "%s: the %s changed size while this run reads it: %lld bytes when "
                   "opened, %lld now (%s in place); what is read from it now is not what was "
                   "opened (a read past its end gives zeros): stopping. Restore the file or "
                   "prepare it again, then start or resume the run", path, what,
                   (long long)id->size, (long long)sb.st_size,
                   sb.st_size < id->size ? "truncated or emptied" : "written to");
}

ds_status ds_file_input_unchanged(int fd, const char *path, const char *what,
                                  const ds_file_input_id *id)
{
    DS_TRY(ds_file_input_same_size(fd, path, what, id));
    struct stat sb;
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: the %s this run opened is gone from its path (%s): moved "
                       "or deleted during the run; restore it, then resume", path, what,
                       strerror(errno));
    if (sb.st_dev != id->dev || sb.st_ino != id->ino)
        return DS_FAIL(DS_ERR_IO, "%s: the path now names another file than the %s this run "
                       "opened (device %llu inode %llu then, device %llu inode %llu now): the "
                       "file was replaced during the run, which would go on reading the old one; "
                       "stopping. Resume (--resume auto) to train on the new file if it holds "
                       "the same data", path, what, (unsigned long long)id->dev,
                       (unsigned long long)id->ino, (unsigned long long)sb.st_dev,
                       (unsigned long long)sb.st_ino);
    return DS_OK;
}

ds_status ds_file_refuse_output_over_each(const char *cmd, const char *out_what, const char *out,
                                          const char *in_what,
                                          const char *(*name_of)(const void *list, long k),
                                          const void *list, long n)
{
    struct stat so, si;
    if (!out || stat(out, &so) != 0)
        return DS_OK;
    for (long k = 0; k < n; k++) {
        const char *in = name_of(list, k);
        if (in && stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return DS_FAIL(DS_ERR_ARG, "%s: the %s %s is the %s %s: refusing to write over an "
                           "input", cmd, out_what, out, in_what, in);
    }
    return DS_OK;
}
