/* test_h5seal.c - the attributes' CRC-32 (src/h5_seal.c): a sealed file
 * checks; any attribute changed afterwards (its value, or only its type:
 * byte order, exponent bias), added or removed, or the seal itself changed,
 * is a mismatch naming the file; the sum does not depend on
 * the order the attributes were written in; an unsealed file passes only
 * when a seal is not required; a variable-length attribute is refused. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5_io.h"
#include "h5_seal.h"
#include "testutil.h"

/* a file with the same three attributes, written in the given order */
static ds_status write_three(const char *path, int reversed, hid_t *out)
{
    DS_TRY(ds_h5_create(path, out));
    for (int k = 0; k < 3; k++) {
        const int which = reversed ? 2 - k : k;
        ds_status st = which == 0   ? ds_h5_write_attr_f64(*out, "stride", 0.01)
                       : which == 1 ? ds_h5_write_attr_i64(*out, "step", 1234)
                                    : ds_h5_write_attr_str(*out, "rng", "1f 2e 3d 4c");
        DS_TRY(st);
    }
    return DS_OK;
}

/* attribute name rewritten holding bytes [8] as stored, in file type ft */
static int write_raw(hid_t f, const char *name, hid_t ft, const void *bytes)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    int ok = sp >= 0 && H5Adelete(f, name) >= 0;
    hid_t a = ok ? H5Acreate2(f, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT) : H5I_INVALID_HID;
    ok = a >= 0 && H5Awrite(a, ft, bytes) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    return ok;
}

static int64_t seal_of(hid_t f)
{
    int64_t v = -1;
    return ds_h5_read_attr_i64(f, DS_H5_SEAL_ATTR, &v) == DS_OK ? v : -1;
}

/* the check's verdict, its message expected to name path and say mismatch */
static int mismatch(hid_t f, const char *path)
{
    ds_status_clear_error();
    return ds_h5_check_attrs(f, path, 1, NULL) != DS_OK && strstr(ds_status_last_error(), path) &&
           strstr(ds_status_last_error(), "checksum mismatch");
}

int main(void)
{
    char dir[] = "/tmp/ds_seal_XXXXXX", a_path[128], b_path[128];
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(a_path, sizeof a_path, "%s/a.h5", dir);
    snprintf(b_path, sizeof b_path, "%s/b.h5", dir);
    hid_t a, b;
    int sealed = -1;

    /* unsealed: passes unless required */
    T_OK(write_three(a_path, 0, &a));
    T_CHECK(ds_h5_check_attrs(a, a_path, 0, &sealed) == DS_OK && sealed == 0, "unsealed, optional");
    ds_status_clear_error();
    T_CHECK(ds_h5_check_attrs(a, a_path, 1, NULL) != DS_OK &&
                strstr(ds_status_last_error(), DS_H5_SEAL_ATTR " is missing"),
            "unsealed, required: %s", ds_status_last_error());

    /* sealed: checks; the same attributes in another order give the same sum */
    T_OK(ds_h5_seal_attrs(a));
    T_CHECK(ds_h5_check_attrs(a, a_path, 1, &sealed) == DS_OK && sealed == 1, "sealed: %s",
            ds_status_last_error());
    T_OK(write_three(b_path, 1, &b));
    T_OK(ds_h5_seal_attrs(b));
    T_CHECK(seal_of(a) == seal_of(b) && seal_of(a) >= 0, "order: %lld vs %lld",
            (long long)seal_of(a), (long long)seal_of(b));
    /* sealing again (the seal itself is left out of the sum) changes nothing */
    T_OK(ds_h5_seal_attrs(b));
    T_CHECK(seal_of(a) == seal_of(b), "resealed");

    /* each change after sealing is found */
    T_OK(ds_h5_write_attr_f64(b, "stride", 0.010000000000000002));   /* one mantissa bit */
    T_CHECK(mismatch(b, b_path), "a value changed: %s", ds_status_last_error());
    T_OK(ds_h5_write_attr_f64(b, "stride", 0.01));
    T_CHECK(ds_h5_check_attrs(b, b_path, 1, NULL) == DS_OK, "changed back: %s", ds_status_last_error());
    T_OK(ds_h5_write_attr_str(b, "rng", "1f 2e 3d 4d"));
    T_CHECK(mismatch(b, b_path), "a string changed: %s", ds_status_last_error());
    T_OK(ds_h5_write_attr_str(b, "rng", "1f 2e 3d 4c"));
    T_OK(ds_h5_write_attr_i64(b, "extra", 0));
    T_CHECK(mismatch(b, b_path), "an attribute added: %s", ds_status_last_error());
    T_CHECK(H5Adelete(b, "extra") >= 0 && ds_h5_check_attrs(b, b_path, 1, NULL) == DS_OK,
            "the added one removed: %s", ds_status_last_error());
    T_CHECK(H5Adelete(b, "step") >= 0 && mismatch(b, b_path), "an attribute removed: %s",
            ds_status_last_error());
    T_OK(ds_h5_write_attr_i64(b, "step", 1234));
    T_CHECK(ds_h5_check_attrs(b, b_path, 1, NULL) == DS_OK, "step back: %s", ds_status_last_error());
    /* the same stored bytes read another way: the byte order's bit flipped */
    const int64_t step = 1234;
    T_CHECK(write_raw(b, "step", H5T_STD_I64BE, &step) && mismatch(b, b_path),
            "the type changed, the bytes not: %s", ds_status_last_error());
    T_OK(ds_h5_write_attr_i64(b, "step", 1234));
    /* ... or the exponent bias of a double */
    hid_t biased = H5Tcopy(H5T_IEEE_F64LE);
    const double stride = 0.01;
    T_CHECK(biased >= 0 && H5Tset_ebias(biased, 1022) >= 0 && write_raw(b, "stride", biased, &stride)
                && mismatch(b, b_path),
            "the exponent bias changed: %s", ds_status_last_error());
    H5Tclose(biased);
    T_OK(ds_h5_write_attr_f64(b, "stride", 0.01));
    T_CHECK(ds_h5_check_attrs(b, b_path, 1, NULL) == DS_OK, "stride back: %s", ds_status_last_error());
    T_OK(ds_h5_write_attr_i64(b, DS_H5_SEAL_ATTR, seal_of(a) ^ 1));
    T_CHECK(mismatch(b, b_path), "the seal changed: %s", ds_status_last_error());

    /* a variable-length string cannot be summed as stored: refused */
    hid_t vt = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(vt, H5T_VARIABLE);
    const char *text = "variable";
    hid_t at = H5Acreate2(a, "vlen", vt, sp, H5P_DEFAULT, H5P_DEFAULT);
    T_CHECK(at >= 0 && H5Awrite(at, vt, &text) >= 0, "vlen attribute written");
    H5Aclose(at);
    H5Sclose(sp);
    H5Tclose(vt);
    ds_status_clear_error();
    T_CHECK(ds_h5_seal_attrs(a) != DS_OK && strstr(ds_status_last_error(), "vlen: variable-length"),
            "vlen sealed: %s", ds_status_last_error());

    ds_h5_close(a);
    ds_h5_close(b);
    unlink(a_path);
    unlink(b_path);
    rmdir(dir);
    return t_finish("test_h5seal");
}
