// Kernels the CUDA evaluation device runs for itself: input generation,
// output comparison and input digests. Compiled at run time by NVRTC (with -fmad=false, so no
// multiply-add is fused where the host's code rounds twice), through the
// same cubin cache as candidates; the text is embedded into libksearch.
//
// Both follow lib/eval/compare.cpp rule for rule, so a GPU evaluation and a
// host evaluation of the same task see the same inputs and judge outputs the
// same way.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ks_rng.h"

typedef unsigned long long ks_u64_t;

// ---------------------------------------------------------------------------
// Conversions of generated doubles: floats round to nearest even (one
// rounding, straight from double); integers round half away from zero and
// saturate to the type's range; NaN becomes 0.

__device__ __forceinline__ double ks_round_int(double v) { return isnan(v) ? 0.0 : round(v); }

__device__ __forceinline__ float ks_to_f32(double v) { return __double2float_rn(v); }
__device__ __forceinline__ double ks_to_f64(double v) { return v; }
__device__ __forceinline__ __half ks_to_f16(double v) { return __double2half(v); }
__device__ __forceinline__ __nv_bfloat16 ks_to_bf16(double v) { return __double2bfloat16(v); }
__device__ __forceinline__ int ks_to_i32(double v) {
  double r = ks_round_int(v);
  if (r <= -2147483648.0) return (-2147483647 - 1);
  if (r >= 2147483647.0) return 2147483647;
  return (int)r;
}
__device__ __forceinline__ long long ks_to_i64(double v) {
  double r = ks_round_int(v);
  if (r <= -9223372036854775808.0) return (-9223372036854775807LL - 1);
  if (r >= 9223372036854775807.0) return 9223372036854775807LL;
  return (long long)r;
}
__device__ __forceinline__ unsigned char ks_to_u8(double v) {
  double r = ks_round_int(v);
  if (r <= 0.0) return 0;
  if (r >= 255.0) return 255;
  return (unsigned char)r;
}
__device__ __forceinline__ signed char ks_to_i8(double v) {
  double r = ks_round_int(v);
  if (r <= -128.0) return -128;
  if (r >= 127.0) return 127;
  return (signed char)r;
}
__device__ __forceinline__ short ks_to_i16(double v) {
  double r = ks_round_int(v);
  if (r <= -32768.0) return -32768;
  if (r >= 32767.0) return 32767;
  return (short)r;
}
__device__ __forceinline__ unsigned char ks_to_bool(double v) { return ks_round_int(v) != 0.0 ? 1 : 0; }

// float8 elements as raw bytes, converted by ks_rng.h's ks_f8_bits: the same
// function the host uses, so both sides produce the same bits.
struct KsF8E4M3 {
  unsigned char bits;
};
struct KsF8E5M2 {
  unsigned char bits;
};
__device__ __forceinline__ KsF8E4M3 ks_to_f8e4m3(double v) {
  KsF8E4M3 r;
  r.bits = (unsigned char)ks_f8e4m3_bits(v);
  return r;
}
__device__ __forceinline__ KsF8E5M2 ks_to_f8e5m2(double v) {
  KsF8E5M2 r;
  r.bits = (unsigned char)ks_f8e5m2_bits(v);
  return r;
}

// One launch per tensor; element i is a pure function of (seed, stream, i).
#define KS_GENERATE(suffix, T)                                                                 \
  extern "C" __global__ void ks_generate_##suffix(T* out, ks_u64_t n, int kind, double p0,      \
                                                  double p1, ks_u64_t seed, ks_u64_t stream) {  \
    const ks_u64_t step = (ks_u64_t)gridDim.x * blockDim.x;                                    \
    for (ks_u64_t i = (ks_u64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)       \
      out[i] = ks_to_##suffix(ks_rng_value(kind, p0, p1, seed, stream, i));                    \
  }

KS_GENERATE(f32, float)
KS_GENERATE(f64, double)
KS_GENERATE(f16, __half)
KS_GENERATE(bf16, __nv_bfloat16)
KS_GENERATE(i32, int)
KS_GENERATE(i64, long long)
KS_GENERATE(u8, unsigned char)
KS_GENERATE(i8, signed char)
KS_GENERATE(i16, short)
KS_GENERATE(bool, unsigned char)
KS_GENERATE(f8e4m3, KsF8E4M3)
KS_GENERATE(f8e5m2, KsF8E5M2)

// ---------------------------------------------------------------------------
// Comparison. The result block is laid out as CompareResult in cuda_device.cpp.

struct KsCompareResult {
  ks_u64_t mismatches;
  ks_u64_t nonfinite_outputs;    // NaN/inf in the output the policy does not accept
  ks_u64_t nonfinite_reference;  // a finite output where the reference is NaN/inf
  ks_u64_t poisoned;
  ks_u64_t first_bad;      // smallest bad index; ~0 when none
  ks_u64_t max_abs_bits;   // non-negative doubles order like their bit patterns
  ks_u64_t max_rel_bits;
};

__device__ __forceinline__ double ks_value(float v) { return (double)v; }
__device__ __forceinline__ double ks_value(double v) { return v; }
__device__ __forceinline__ double ks_value(__half v) { return (double)__half2float(v); }
__device__ __forceinline__ double ks_value(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
__device__ __forceinline__ double ks_value(int v) { return (double)v; }
__device__ __forceinline__ double ks_value(long long v) { return (double)v; }
__device__ __forceinline__ double ks_value(unsigned char v) { return (double)v; }
__device__ __forceinline__ double ks_value(signed char v) { return (double)v; }
__device__ __forceinline__ double ks_value(short v) { return (double)v; }

// An 8-bit float's value; `nan_mag` is the first magnitude that is NaN,
// `inf_mag` the infinite one (0 when the format has none).
__device__ __forceinline__ double ks_f8_value(unsigned char b, int man_bits, int bias, unsigned inf_mag,
                                              unsigned nan_mag) {
  const unsigned mag = b & 0x7Fu;
  double v;
  if (mag >= nan_mag) {
    v = __longlong_as_double(0x7ff8000000000000LL);
  } else if (inf_mag != 0 && mag == inf_mag) {
    v = __longlong_as_double(0x7ff0000000000000LL);
  } else {
    const unsigned field = mag >> man_bits, man = mag & ((1u << man_bits) - 1u);
    // Both cases are exact: a small integer times a power of two.
    v = field == 0 ? ldexp((double)man, 1 - bias - man_bits)
                   : ldexp((double)(man | (1u << man_bits)), (int)field - bias - man_bits);
  }
  return (b & 0x80u) ? -v : v;
}
__device__ __forceinline__ double ks_value(KsF8E4M3 v) { return ks_f8_value(v.bits, 3, 7, 0, 0x7Fu); }
__device__ __forceinline__ double ks_value(KsF8E5M2 v) { return ks_f8_value(v.bits, 2, 15, 0x7Cu, 0x7Du); }
// bool is stored as a byte; its comparison reads the byte.
struct KsBool {
  unsigned char v;
};
__device__ __forceinline__ double ks_value(KsBool v) { return (double)v.v; }

// T is the element type, U an unsigned integer of the same size (the poison
// pattern is every byte 0xFF).
template <typename T, typename U>
__device__ void ks_compare(const T* out, const T* ref, ks_u64_t n, double atol, double rtol, int rule,
                           int forbid_nonfinite, KsCompareResult* result) {
  const U poison = (U)~(U)0;
  ks_u64_t bad_count = 0, nonfinite_out_count = 0, nonfinite_ref_count = 0, poisoned_count = 0,
           first_bad = ~0ULL;
  double max_abs = 0.0, max_rel = 0.0;
  const ks_u64_t step = (ks_u64_t)gridDim.x * blockDim.x;
  for (ks_u64_t i = (ks_u64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const U ob = reinterpret_cast<const U*>(out)[i];
    const U rb = reinterpret_cast<const U*>(ref)[i];
    const double o = ks_value(out[i]), r = ks_value(ref[i]);
    bool bad = false, nonfinite_out = false, nonfinite_ref = false, poisoned = false;
    if (ob == poison && rb != poison) {
      bad = poisoned = true;
    } else if (isfinite(o) && isfinite(r)) {
      const double diff = fabs(o - r);
      max_abs = fmax(max_abs, diff);
      if (r != 0.0) max_rel = fmax(max_rel, diff / fabs(r));
      // Explicit roundings: the bound must not become a fused multiply-add.
      // rule (Tolerance::Rule): 0 ref_relative, 1 out_relative, 2 abs_or_rel.
      if (rule == 2) bad = !(diff <= atol || __ddiv_rn(diff, __dadd_rn(fabs(r), 1e-8)) <= rtol);
      else bad = !(diff <= __dadd_rn(atol, __dmul_rn(rtol, fabs(rule == 1 ? o : r))));
    } else if (!isfinite(o)) {
      // Accepted only under must_match, and only as the reference's own value.
      const bool same = (isnan(o) && isnan(r)) || (isinf(o) && o == r);
      bad = nonfinite_out = forbid_nonfinite || !same;
    } else {
      bad = nonfinite_ref = true;  // a number where the reference has NaN or infinity
    }
    if (bad) {
      ++bad_count;
      if (nonfinite_out) ++nonfinite_out_count;
      if (nonfinite_ref) ++nonfinite_ref_count;
      if (poisoned) ++poisoned_count;
      if (i < first_bad) first_bad = i;
    }
  }
  // Reduce within the warp, then one set of atomics per warp.
  for (int offset = 16; offset > 0; offset >>= 1) {
    bad_count += __shfl_down_sync(0xffffffffu, bad_count, offset);
    nonfinite_out_count += __shfl_down_sync(0xffffffffu, nonfinite_out_count, offset);
    nonfinite_ref_count += __shfl_down_sync(0xffffffffu, nonfinite_ref_count, offset);
    poisoned_count += __shfl_down_sync(0xffffffffu, poisoned_count, offset);
    first_bad = min(first_bad, __shfl_down_sync(0xffffffffu, first_bad, offset));
    max_abs = fmax(max_abs, __shfl_down_sync(0xffffffffu, max_abs, offset));
    max_rel = fmax(max_rel, __shfl_down_sync(0xffffffffu, max_rel, offset));
  }
  if ((threadIdx.x & 31) != 0) return;
  if (bad_count) {
    atomicAdd(&result->mismatches, bad_count);
    if (nonfinite_out_count) atomicAdd(&result->nonfinite_outputs, nonfinite_out_count);
    if (nonfinite_ref_count) atomicAdd(&result->nonfinite_reference, nonfinite_ref_count);
    if (poisoned_count) atomicAdd(&result->poisoned, poisoned_count);
    atomicMin(&result->first_bad, first_bad);
  }
  if (max_abs > 0.0) atomicMax(&result->max_abs_bits, (ks_u64_t)__double_as_longlong(max_abs));
  if (max_rel > 0.0) atomicMax(&result->max_rel_bits, (ks_u64_t)__double_as_longlong(max_rel));
}

#define KS_COMPARE(suffix, T, U)                                                                  \
  extern "C" __global__ void ks_compare_##suffix(const T* out, const T* ref, ks_u64_t n,         \
                                                 double atol, double rtol, int rule,             \
                                                 int forbid_nonfinite, KsCompareResult* result) { \
    ks_compare<T, U>(out, ref, n, atol, rtol, rule, forbid_nonfinite, result);                   \
  }

KS_COMPARE(f32, float, unsigned int)
KS_COMPARE(f64, double, ks_u64_t)
KS_COMPARE(f16, __half, unsigned short)
KS_COMPARE(bf16, __nv_bfloat16, unsigned short)
KS_COMPARE(i32, int, unsigned int)
KS_COMPARE(i64, long long, ks_u64_t)
KS_COMPARE(u8, unsigned char, unsigned char)
KS_COMPARE(i8, signed char, unsigned char)
KS_COMPARE(i16, short, unsigned short)
KS_COMPARE(bool, KsBool, unsigned char)
KS_COMPARE(f8e4m3, KsF8E4M3, unsigned char)
KS_COMPARE(f8e5m2, KsF8E5M2, unsigned char)

// ---------------------------------------------------------------------------
// Digests (lib/eval/digest.hpp, term for term): the sum of one keyed term
// per whole 8-byte word; the host adds the partial last word and the length.

extern "C" __global__ void ks_digest(const ks_u64_t* words, ks_u64_t n, ks_u64_t key, ks_u64_t* result) {
  const ks_u64_t step = (ks_u64_t)gridDim.x * blockDim.x;
  ks_u64_t sum = 0;
  for (ks_u64_t i = (ks_u64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    sum += ks_mix64(words[i] ^ (key + i * 0x9E3779B97F4A7C15ull));
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0 && sum) atomicAdd(result, sum);
}
