/* featurizer.h - audio to feature frames with FFTW. The default follows
 * deepspeech.pytorch: 16 kHz, symmetric Hamming window of 20 ms (n_fft 320),
 * 10 ms stride, frames centred with reflect padding, log1p of the STFT
 * magnitude: 161 features per frame. Log-mel and MFCC serve DeepSpeech-1
 * style models. Features are raw; normalisation happens in the loader.
 *
 * Definitions (n_fft = (int)(sample_rate * window_size_s), hop =
 * (int)(sample_rate * window_stride_s), truncated as Python's int() does):
 *
 *   frames     the signal is padded by p = n_fft/2 samples on both sides by
 *              reflection (x[-i] = x[i], x[n-1+i] = x[n-1-i]; librosa's and
 *              torch's center=True, pad_mode='reflect'), frame t starts at
 *              t * hop of the padded signal: 1 + (n + 2p - n_fft) / hop
 *              frames, which is 1 + n / hop for even n_fft. Reflection
 *              needs n > p: ds_feature_min_samples.
 *   window     symmetric Hamming, w[i] = 0.54 - 0.46 cos(2 pi i / (n_fft-1))
 *              (scipy.signal.hamming(n_fft), torch.hamming_window(n_fft,
 *              periodic=False)); win_length = n_fft.
 *   X[t][k]    one-sided DFT of the windowed frame, k = 0 .. n_fft/2, without
 *              scaling (audio in [-1, 1]).
 *
 *   log-spectrogram  log1p(|X[t][k]|): n_fft/2 + 1 features.
 *   log-mel    log(sum_k W[m][k] |X[t][k]|^2 + 1e-6), natural log, with an
 *              HTK-style bank of M = n_mels triangles: mel(f) = 2595
 *              log10(1 + f/700); edges f_0 .. f_{M+1} equally spaced in mel
 *              from 0 Hz to sample_rate/2; bin k sits at f = k sample_rate /
 *              n_fft; W[m][k] = max(0, min((f - f_m) / (f_{m+1} - f_m),
 *              (f_{m+2} - f) / (f_{m+2} - f_{m+1}))): peak 1, no area
 *              normalisation (torchaudio melscale_fbanks(mel_scale='htk',
 *              norm=None)). The floor 1e-6 keeps silence finite. With n_fft
 *              320 the bins are 50 Hz apart, so narrow low filters may catch
 *              no bin (with 80 filters filter 0 spans 0..44 Hz) and then
 *              read log(1e-6) in every frame.
 *   mfcc       c[j] = sum_m s_j cos(pi j (m + 1/2) / M) L[m], the orthonormal
 *              DCT-II of the log-mel energies L (s_0 = sqrt(1/M), s_j =
 *              sqrt(2/M); scipy.fft.dct(L, norm='ortho')), j < n_mfcc. MFCC
 *              always uses its own bank of M = DS_MFCC_N_MELS filters and
 *              ignores n_mels, so feature_type and n_features (= n_mfcc)
 *              describe an MFCC feature file completely.
 */
#ifndef DS_FEATURIZER_H
#define DS_FEATURIZER_H

#include "feature.h"
#include "status.h"

/* One per thread: FFTW plan, window, filterbank and DCT matrices. */
typedef struct ds_featurizer ds_featurizer;

/* Checks c (positive rate, n_fft >= 2, hop >= 1, 1 <= n_mels, 1 <= n_mfcc <=
 * DS_MFCC_N_MELS). FFTW's planner is not thread-safe; creation and
 * destruction serialise it with a mutex private to featurizer.c, so
 * featurizers may be created and destroyed from any thread as long as
 * nothing else in the process plans FFTW transforms. */
ds_status ds_featurizer_create(const ds_feature_cfg *c, ds_featurizer **out);
void ds_featurizer_destroy(ds_featurizer *f);
/* audio [n] at the configured rate -> out [ds_feature_frames(n)][dim].
 * Needs n >= ds_feature_min_samples (reflect padding); shorter audio is an
 * error. One featurizer runs on one thread at a time; different featurizers
 * run concurrently. */
ds_status ds_featurizer_run(ds_featurizer *f, const float *audio, long n, float *out);

#endif
