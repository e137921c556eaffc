/* fuzz_audio.c - libFuzzer harness: the bytes of an audio file (WAV, FLAC,
 * or whatever libsndfile recognises) through ds_audio_read_max, as prep and
 * transcribe read every file of a corpus, then through the featurizer.
 *
 * Why: audio comes from anywhere (a corpus download, a user's recording, a
 * copy cut short). A damaged or hostile header must be refused with the
 * file named (a WAV claiming more data than it holds is truncated; one
 * claiming hours is refused by --max-duration before its memory is taken),
 * never crash, overrun, leak or allocate what the header dictates. */
#include <stdio.h>
#include <stdlib.h>

#include "audio.h"
#include "featurizer.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    fuzz_file_write(data, size, path, sizeof path);
    float *x = NULL;
    long n = 0;
    ds_status st = ds_audio_read_max(path, 16000, 60, &x, &n);
    fuzz_check_status(st);
    if (st == DS_OK) {
        if (!x || n < 1 || n > 60L * 16000) {
            fprintf(stderr, "fuzz: accepted audio of %ld samples (limit %ld)\n", n, 60L * 16000);
            abort();
        }
        const ds_feature_cfg cfg = ds_feature_defaults();
        if (n >= ds_feature_min_samples(&cfg)) {   /* prep's next step */
            const long frames = ds_feature_frames(&cfg, n);
            float *f = malloc((size_t)frames * (size_t)ds_feature_dim(&cfg) * sizeof *f);
            ds_featurizer *fz = NULL;
            if (!f || ds_featurizer_create(&cfg, &fz) != DS_OK)
                abort();
            fuzz_check_status(ds_featurizer_run(fz, x, n, f));
            ds_featurizer_destroy(fz);
            free(f);
        }
    }
    free(x);
    fuzz_file_done(path);
    return 0;
}
