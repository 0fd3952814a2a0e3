// RoPE's frequencies, the one place they are computed: the CPU backend's rotation and the CUDA
// backend's cos/sin table (and its rows past the table) both take them from here, so the GPU
// rotates by the angles CI tests.
//
// Rotate-half RoPE turns pair i < hd/2 of a head at position p by the angle p * f_i, with the
// inverse frequency f_i = theta^(-2i/hd) (Su et al., 2021). Llama 3 (rope_type "llama3" in a
// Hugging Face config.json, as transformers' _compute_llama3_parameters computes it) scales
// the frequencies by their wavelength w_i = 2 pi / f_i against the context the model was first
// trained on (original_context):
//   w_i < original_context / high_freq_factor   f_i unchanged        (high frequencies)
//   w_i > original_context / low_freq_factor    f_i / factor         (low frequencies)
//   otherwise                                   (1 - s) f_i / factor + s f_i, with
//                                               s = (original_context / w_i - low_freq_factor)
//                                                   / (high_freq_factor - low_freq_factor)
// All in double; the backends round cos and sin of the angle to fp32.
#pragma once
#include <math.h>

#include <cstdint>

#include "util/bf16.hpp"  // TETRA_HD

namespace tetra {

struct Rope {
  double theta = 10000.0;
  // Llama 3's scaling, when factor > 0 (0: none, the default RoPE).
  double factor = 0, low_freq_factor = 1, high_freq_factor = 4, original_context = 8192;

  TETRA_HD double inv_freq(int64_t i, int64_t hd) const {
    const double f = pow(theta, -2.0 * double(i) / double(hd));
    if (factor <= 0) return f;
    const double wavelen = 2.0 * 3.14159265358979323846 / f;
    if (wavelen < original_context / high_freq_factor) return f;
    if (wavelen > original_context / low_freq_factor) return f / factor;
    const double s =
        (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    return (1.0 - s) * f / factor + s * f;
  }
  bool operator<(const Rope& o) const {  // a key of the CUDA backend's tables
    const double a[] = {theta, factor, low_freq_factor, high_freq_factor, original_context};
    const double b[] = {o.theta, o.factor, o.low_freq_factor, o.high_freq_factor,
                        o.original_context};
    for (int k = 0; k < 5; ++k)
      if (a[k] != b[k]) return a[k] < b[k];
    return false;
  }
};

}  // namespace tetra
