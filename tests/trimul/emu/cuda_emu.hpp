// A host emulation of the parts of the CUDA execution model the TriMul
// kernels use, so their logic (indexing, tiling, barriers, warp collectives,
// tensor-core fragment layouts, cp.async pipelines, launch plans) can be
// checked on a machine without a GPU. Test-only.
//
// Every thread of a block is a fiber (ucontext); blocks run one after
// another. __syncthreads() and the warp collectives are real barriers over
// the live threads, so a missing barrier or a divergent collective shows up
// as wrong results or a reported deadlock. cp.async copies land at the
// matching wait, the latest moment the hardware allows, so a stage read
// before its wait sees stale data. The PTX wrappers of a kernel source
// (between the "PTX wrappers: begin/end" comment lines) are replaced by the
// emulations below, which implement the documented fragment layouts.
//
// Kernel sources reach the compiler through emulate_cu.cmake, which includes
// this header first; nothing else includes it (it defines CUDA's keywords as
// macros).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "emu/runtime.hpp"

// ---------------------------------------------------------------------------
// CUDA vocabulary

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define threadIdx (::ks_emu::thread_idx())
#define blockIdx (::ks_emu::block_idx())
#define blockDim (::ks_emu::block_dim())
#define gridDim (::ks_emu::grid_dim())
#define warpSize 32
#define __syncthreads() ::ks_emu::syncthreads()
#define __syncwarp(...) ::ks_emu::syncwarp()

struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
// Fibers switch only at barriers and collectives, so a plain update is atomic.
inline float atomicAdd(float* p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline float __expf(float v) { return std::exp(v); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
using std::sqrt;
using std::exp;

template <class T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a wide type");
  T out;
  const int lane = static_cast<int>(::ks_emu::lane_id());
  int src = lane ^ lane_mask;
  if (width < 32 && (src / width) != (lane / width)) src = lane;
  ::ks_emu::warp_exchange(&v, &out, sizeof(T), src);
  return out;
}

template <class T>
T __shfl_sync(unsigned /*mask*/, T v, int src_lane, int width = 32) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a wide type");
  T out;
  const int lane = static_cast<int>(::ks_emu::lane_id());
  const int src = (lane / width) * width + (src_lane % width);
  ::ks_emu::warp_exchange(&v, &out, sizeof(T), src);
  return out;
}


// ---------------------------------------------------------------------------
// Emulations of the PTX wrappers the TriMul kernel sources define between
// their "PTX wrappers: begin/end" lines (same names and signatures).

__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  return static_cast<unsigned>(::ks_emu::float_to_f16(lo)) |
         (static_cast<unsigned>(::ks_emu::float_to_f16(hi)) << 16);
}

__device__ __forceinline__ void unpack_f16x2(unsigned v, float& lo, float& hi) {
  lo = ::ks_emu::f16_to_float(static_cast<unsigned short>(v & 0xffffu));
  hi = ::ks_emu::f16_to_float(static_cast<unsigned short>(v >> 16));
}

__device__ __forceinline__ void mma_f16_16x8x16(float (&c)[4], const unsigned (&a)[4],
                                                const unsigned (&b)[2]) {
  ::ks_emu::mma_m16n8k16_f16(c, a, b);
}

__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, int src_bytes) {
  ::ks_emu::cp_async(smem_dst, gmem_src, 16, src_bytes);
}

__device__ __forceinline__ void cp_async_commit() { ::ks_emu::cp_async_commit(); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  ::ks_emu::cp_async_wait(N);
}
