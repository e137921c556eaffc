/* status.c - the recorded error message behind ds_status. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

ds_status ds_status_fail(ds_status code, const char *file, int line, const char *fmt, ...)
{
    if (last_error[0] == '\0') {   /* keep the innermost (first) failure */
        int n = snprintf(last_error, sizeof last_error, "%s:%d: ", file, line);
        va_list ap;
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof last_error)
            vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *ds_status_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

void ds_status_clear_error(void) { last_error[0] = '\0'; }

const char *ds_status_name(ds_status s)
{
    switch (s) {
    case DS_OK: return "ok";
    case DS_ERR_ARG: return "invalid argument";
    case DS_ERR_IO: return "i/o error";
    case DS_ERR_MEM: return "out of memory";
    case DS_ERR_NUM: return "numerical error";
    case DS_ERR_BACKEND: return "backend error";
    case DS_ERR_MPI: return "communication error";
    case DS_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown status";
}
