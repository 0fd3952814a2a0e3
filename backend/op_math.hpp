// The per-element math of the Backend ops, written once for both backends: g++ compiles it
// into the CPU backend's loops (backend/cpu/cpu_backend.cpp), nvcc into the CUDA kernels
// (backend/cuda/), so CI tests the formulas the GPU runs. The two compilers may still differ in
// the last bit (FMA contraction, expf), which the GPU op tests allow for.
//
// Each function is one element (or one pair, or one row's closing step) in fp32; storage
// (fp32 or bf16, util/bf16.hpp) is the caller's.
#pragma once
#include <math.h>

#include "util/bf16.hpp"

namespace tetra::op {

// e^x in a form a compiler vectorizes (the C library's expf is a call per element): x = n ln 2
// + r with |r| <= ln(2)/2, e^r by its Taylor series to r^7 (truncation below 2^-26 relative),
// times 2^n built in the exponent bits (in two halves, so that 2^128 is a float). Within 0.9 ulp
// of e^x (every float from -87 to 88.72 checked against exp in double); 0 below -87, where e^x
// nears the smallest normal float (1.2e-38); inf above 88.73; NaN for a NaN or +inf x.
TETRA_HD float exp_poly(float x) {
  const float xl = x > -88.f ? x : -88.f;  // NaN becomes -88 here; the last line restores it
  const float xc = xl < 89.f ? xl : 89.f;
  // n = floor(x / ln 2 + 1/2), by truncating a positive number (x / ln 2 lies in [-127, 129)):
  // floorf, or a sign test, would keep the loop from vectorizing.
  const int32_t ni = int32_t(xc * 1.44269504f + 128.5f) - 128;
  const float n = float(ni);
  const float r = (xc - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 in two parts
  float p = 1.f / 5040 + r * (1.f / 40320);
  p = 1.f / 720 + r * p;
  p = 1.f / 120 + r * p;
  p = 1.f / 24 + r * p;
  p = 1.f / 6 + r * p;
  p = 0.5f + r * p;
  p = 1.f + r * p;
  p = 1.f + r * p;
  const int32_t n1 = ni / 2, n2 = ni - n1;  // 2^n = 2^n1 2^n2, each a normal float
  const float scaled =
      p * bits_float(uint32_t(n1 + 127) << 23) * bits_float(uint32_t(n2 + 127) << 23);
  return x < -87.f ? 0.f : scaled + (x - x);  // x - x: 0, or NaN for a NaN x
}

// sigmoid(g) = 1 / (1 + e^-g), given e = e^-g.
TETRA_HD float sigmoid_e(float e) {
  return 1.f / (1.f + e);
}

// SwiGLU: h = silu(g) * u, silu(g) = g * sigmoid(g), e^-g by exp_poly on every backend (a loop
// of it vectorizes on the CPU).
TETRA_HD float swiglu_e(float g, float u, float e) {
  return g / (1.f + e) * u;
}
TETRA_HD float swiglu(float g, float u) {
  return swiglu_e(g, u, exp_poly(-g));
}
// Its backward: du = dh * silu(g); dg = dh * u * silu'(g), silu'(g) = sig (1 + g (1 - sig)).
TETRA_HD void swiglu_backward_e(float dh, float g, float u, float e, float& dg, float& du) {
  const float sig = sigmoid_e(e);
  du = dh * g * sig;
  dg = dh * u * sig * (1.f + g * (1.f - sig));
}
TETRA_HD void swiglu_backward(float dh, float g, float u, float& dg, float& du) {
  swiglu_backward_e(dh, g, u, exp_poly(-g), dg, du);
}

// RMSNorm: 1/rms of a row from its sum of squares ss over d elements.
TETRA_HD float rmsnorm_rstd(float ss, float d, float eps) {
  return 1.f / sqrtf(ss / d + eps);
}
// y = x r w.
TETRA_HD float rmsnorm_y(float x, float r, float w) {
  return x * r * w;
}
// With xhat = x r and mean = mean_i(dy_i w_i xhat_i) over the row:
// dx = r (dy w - xhat mean).
TETRA_HD float rmsnorm_dx(float dy, float w, float x, float r, float mean) {
  return r * (dy * w - x * r * mean);
}
// dx plus the residual stream's gradient g (the norm_residual fusion), added to dx already
// rounded to fp32: never contracted with dx's product into an FMA (__fadd_rn on the GPU; the
// CPU adds in a second loop over the row), so that in fp32 the sum has the bits of
// rmsnorm_backward, then add.
TETRA_HD float residual_add(float dx, float g) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(dx, g);
#else
  return dx + g;
#endif
}

// Rotate-half RoPE of one pair (x1, x2) = (x[i], x[i + hd/2]) by the angle whose cosine is c
// and sine s (s negated for the inverse, the backward):
// (x1, x2) -> (x1 c - x2 s, x2 c + x1 s).
TETRA_HD void rope_rotate(float& x1, float& x2, float c, float s) {
  const float a = x1, b = x2;
  x1 = a * c - b * s;
  x2 = b * c + a * s;
}

// AdamW (torch.optim.AdamW) on one element, coefficients from adamw_coeffs:
//   g' = g grad_scale; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
//   p = p (1 - lr wd) - lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
struct AdamCoeffs {
  float beta1, beta2, eps, grad_scale, step_size, bc2_sqrt, decay;
};
// The step's coefficients, computed once on the host (bias corrections at step >= 1).
inline AdamCoeffs adamw_coeffs(float lr, float beta1, float beta2, float eps, float weight_decay,
                               float grad_scale, long long step) {
  const float bc1 = 1.f - powf(beta1, float(step));
  const float bc2 = 1.f - powf(beta2, float(step));
  return AdamCoeffs{beta1, beta2, eps, grad_scale, lr / bc1, sqrtf(bc2), 1.f - lr * weight_decay};
}
TETRA_HD void adamw_update(float& p, float g, float& m, float& v, const AdamCoeffs& c) {
  const float gi = g * c.grad_scale;
  m = c.beta1 * m + (1.f - c.beta1) * gi;
  v = c.beta2 * v + (1.f - c.beta2) * gi * gi;
  const float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
  p = p * c.decay - c.step_size * m / denom;
}

// Online softmax (Milakov and Gimelshein, 2018): a row's running maximum m and sum s of
// exp(l - m) over the logits read so far, in one read of the row; (-inf, 0) before the first.
// Merging two such states of disjoint parts of a row gives the state of their union; a logit l
// is the state (l, 1). When the maximum grows the old sum is rescaled, so the sum is rounded in
// another order than exp(l - max) summed after a pass for the maximum: the maximum is the same
// value, the sum within a few ulps (the fused classifier's test bounds it).
TETRA_HD void softmax_merge(float& m, float& s, float m2, float s2) {
  if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else if (m2 != -INFINITY) {  // a state of no logits adds nothing (and -inf - -inf is NaN)
    s += s2 * expf(m2 - m);
  }
}
TETRA_HD void softmax_add(float& m, float& s, float l) {
  softmax_merge(m, s, l, 1.f);
}

// Cross-entropy gradient of one valid logit l of a row with maximum mx and 1 / sum of
// exponentials inv: scale (softmax - onehot(target)).
TETRA_HD float ce_grad(float l, float mx, float inv, float scale, bool target) {
  const float g = scale * expf(l - mx) * inv;
  return target ? g - scale : g;
}

}  // namespace tetra::op
