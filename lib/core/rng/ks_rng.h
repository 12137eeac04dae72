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

/* Distribution kinds; the values match ks::Distribution::Kind. */
enum { KS_DIST_NORMAL = 0, KS_DIST_UNIFORM = 1, KS_DIST_CAUCHY = 2, KS_DIST_INT_RANGE = 3,
       KS_DIST_CONSTANT = 4 };

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
 * int_range [p0, p1] inclusive, constant p0. */
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
  return p0 + p1 * sqrt(-2.0 * log(u)) * cos(2.0 * pi * u2);
}

/* The seed of input set k of a workload (k = 0, 1, ... for the checked
 * seeds, then one more for the re-check after timing). */
KS_HD ks_u64 ks_rng_derive_seed(ks_u64 workload_seed, ks_u64 k) {
  return k == 0 ? workload_seed : ks_mix64(workload_seed + k * 0x9e3779b97f4a7c15ULL);
}

#endif /* KS_RNG_H */
