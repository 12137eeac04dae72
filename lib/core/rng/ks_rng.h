/* Counter-based input generators shared by the host and CUDA backends.
 *
 * Element i of a tensor is a pure function of (seed, stream, i): inputs are
 * the same whichever backend, thread count or launch order produced them, so
 * a CPU reference and a GPU kernel see identical data (transcendental
 * functions are evaluated in double, so the two agree to the last bit except
 * in rare rounding ties).
 *
 * This file is compiled as C++ on the host and, embedded as a string, by
 * NVRTC on the device: keep it free of includes and of library calls other
 * than log, sqrt, cos, tan, floor.
 */
#ifndef KS_RNG_H
#define KS_RNG_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KS_HD __host__ __device__ __forceinline__
#else
#define KS_HD inline
#endif

typedef unsigned long long ks_u64;

/* Distribution kinds; the values match ks::Distribution::Kind. INDPTR and
 * PERMUTATION fill a whole tensor at once (core/rng/structured.hpp), not
 * element by element. */
enum { KS_DIST_NORMAL = 0, KS_DIST_UNIFORM = 1, KS_DIST_CAUCHY = 2, KS_DIST_INT_RANGE = 3,
       KS_DIST_CONSTANT = 4, KS_DIST_CLAMPED_NORMAL = 5, KS_DIST_INDPTR = 6, KS_DIST_PERMUTATION = 7 };

/* A 64-bit finaliser (Stafford's mix 13): a bijection with full avalanche. */
KS_HD ks_u64 ks_mix64(ks_u64 x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/* The raw 64-bit draw for element `index` of stream `stream`. */
KS_HD ks_u64 ks_rng_bits(ks_u64 seed, ks_u64 stream, ks_u64 index) {
  ks_u64 k = ks_mix64(seed ^ (stream * 0x9e3779b97f4a7c15ULL));
  return ks_mix64(k + index * 0xd1b54a32d192ed03ULL);
}

/* Uniform in (0, 1): never exactly 0, so log() is safe. */
KS_HD double ks_rng_uniform(ks_u64 seed, ks_u64 stream, ks_u64 index) {
  return ((double)(ks_rng_bits(seed, stream, index) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* One value of the given distribution, in double precision.
 * normal(p0 = mean, p1 = std), uniform[p0, p1), cauchy(p0 = loc, p1 = scale),
 * int_range [p0, p1] inclusive, constant p0, clamped_normal: N(0, 1) clamped
 * to [p0, p1]. */
KS_HD double ks_rng_value(int kind, double p0, double p1, ks_u64 seed, ks_u64 stream,
                          ks_u64 index) {
  const double pi = 3.14159265358979323846;
  if (kind == KS_DIST_CONSTANT) return p0;
  double u = ks_rng_uniform(seed, stream, index);
  if (kind == KS_DIST_UNIFORM) return p0 + (p1 - p0) * u;
  if (kind == KS_DIST_CAUCHY) return p0 + p1 * tan(pi * (u - 0.5));
  if (kind == KS_DIST_INT_RANGE) {
    double span = p1 - p0 + 1.0;
    double v = p0 + floor(u * span);
    return v > p1 ? p1 : v;
  }
  /* Box-Muller on a second, independent draw of the same element. */
  double u2 = ks_rng_uniform(seed, stream ^ 0x5851f42d4c957f2dULL, index);
  double z = sqrt(-2.0 * log(u)) * cos(2.0 * pi * u2);
  if (kind == KS_DIST_CLAMPED_NORMAL) return z < p0 ? p0 : (z > p1 ? p1 : z);
  return p0 + p1 * z;
}

/* x rounded to the nearest integer, ties to even; x >= 0 and below 2^52.
 * Only floor and exact double arithmetic, so host and device agree bit for bit. */
KS_HD double ks_round_half_even(double x) {
  double f = floor(x);
  double d = x - f;
  if (d > 0.5) return f + 1.0;
  if (d < 0.5) return f;
  return (f - 2.0 * floor(f * 0.5)) != 0.0 ? f + 1.0 : f;
}

/* The bits of an 8-bit float (man_bits stored mantissa bits, exponent bias
 * `bias`, `max_bits` the largest finite magnitude's encoding) nearest to v:
 * one round-to-nearest-even straight from double, saturating to the largest
 * finite value (CUDA's __NV_SATFINITE): E4M3FN has no infinity, and E5M2
 * follows the same rule so a generated input is never infinite. NaN becomes
 * the canonical NaN 0x7F. Powers of two scale exactly, so every step but
 * the one rounding is exact. */
KS_HD unsigned ks_f8_bits(double v, int man_bits, int bias, unsigned max_bits) {
  if (v != v) return 0x7Fu;
  unsigned sign = 0;
  if (v < 0.0 || (v == 0.0 && 1.0 / v < 0.0)) {
    sign = 0x80u;
    v = -v;
  }
  if (v == 0.0) return sign;
  /* Largest finite value: (2 - 2^-man) * 2^emax with its fields from max_bits. */
  int max_field = (int)(max_bits >> man_bits);
  double max_man = (double)((max_bits & ((1u << man_bits) - 1u)) | (1u << man_bits));
  double max_val = max_man;
  for (int k = 0; k < max_field - bias - man_bits; ++k) max_val *= 2.0;
  if (v >= 2.0 * max_val) return sign | max_bits; /* also infinity */
  /* e with 2^e <= v < 2^(e+1), within the format's range. */
  int e = 0;
  double p = 1.0; /* 2^e */
  while (v >= 2.0 * p) { p *= 2.0; ++e; }
  while (v < p && e > -64) { p *= 0.5; --e; }
  const int min_normal_exp = 1 - bias;
  double q;
  unsigned bits;
  if (e < min_normal_exp) {
    /* Subnormal: units of 2^(min_normal_exp - man_bits). A result of
     * 2^man_bits units is the smallest normal, whose encoding is the same. */
    double scaled = v;
    for (int k = 0; k < man_bits - min_normal_exp; ++k) scaled *= 2.0;
    q = ks_round_half_even(scaled);
    bits = (unsigned)q;
  } else {
    double scaled = v / p; /* in [1, 2), exact */
    for (int k = 0; k < man_bits; ++k) scaled *= 2.0;
    q = ks_round_half_even(scaled);
    if (q >= (double)(2u << man_bits)) {
      q = (double)(1u << man_bits);
      ++e;
    }
    bits = ((unsigned)(e + bias) << man_bits) | ((unsigned)q - (1u << man_bits));
  }
  if (bits > max_bits) bits = max_bits;
  return sign | bits;
}

KS_HD unsigned ks_f8e4m3_bits(double v) { return ks_f8_bits(v, 3, 7, 0x7Eu); }
KS_HD unsigned ks_f8e5m2_bits(double v) { return ks_f8_bits(v, 2, 15, 0x7Bu); }

/* The seed of input set k of a workload (k = 0, 1, ... for the checked
 * seeds, then one more for the re-check after timing). */
KS_HD ks_u64 ks_rng_derive_seed(ks_u64 workload_seed, ks_u64 k) {
  return k == 0 ? workload_seed : ks_mix64(workload_seed + k * 0x9e3779b97f4a7c15ULL);
}

#endif /* KS_RNG_H */
