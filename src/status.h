/* status.h - one status type for all library code, with a recorded message.
 *
 * A failing call records "file:line: message" once (the innermost failure
 * wins) and returns its code; callers pass the code up with DS_TRY.
 */
#ifndef DS_STATUS_H
#define DS_STATUS_H

typedef enum {
    DS_OK = 0,
    DS_ERR_ARG,          /* bad argument or configuration */
    DS_ERR_IO,           /* file or HDF5 */
    DS_ERR_MEM,          /* allocation */
    DS_ERR_NUM,          /* non-finite value where one is not allowed */
    DS_ERR_BACKEND,      /* BLAS, CUDA, cuDNN, ... */
    DS_ERR_MPI,          /* MPI or NCCL */
    DS_ERR_UNSUPPORTED   /* dtype or feature not built into this backend */
} ds_status;

ds_status ds_status_fail(ds_status code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *ds_status_last_error(void);
void ds_status_clear_error(void);
const char *ds_status_name(ds_status s);

#define DS_FAIL(code, ...) ds_status_fail((code), __FILE__, __LINE__, __VA_ARGS__)
#define DS_TRY(expr) do { ds_status ds_s_ = (expr); if (ds_s_ != DS_OK) return ds_s_; } while (0)
/* For functions that clean up with goto: assigns st and jumps on failure. */
#define DS_TRY_GOTO(st, expr, label) do { (st) = (expr); if ((st) != DS_OK) goto label; } while (0)

#endif
