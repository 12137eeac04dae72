// A tunable starting point for the softmax task: one block of BLOCK threads
// per row, an online (single-pass) maximum and sum, then a second pass that
// writes the outputs. Loads are VEC floats wide when the row allows it.
//
// Tunable parameters (macros set by the evaluator):
//   BLOCK  threads per block (a multiple of 32)
//   VEC    floats per load: 1, 2 or 4

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif

struct MaxSum {
  float m;  // running maximum
  float s;  // sum of exp(x - m)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.m < b.m) {
    MaxSum t = a;
    a = b;
    b = t;
  }
  // a.m >= b.m; an empty partial has m = -inf and s = 0.
  const float scale = b.s == 0.0f ? 0.0f : __expf(b.m - a.m);
  return MaxSum{a.m, a.s + b.s * scale};
}

__device__ __forceinline__ MaxSum add(MaxSum acc, float v) { return combine(acc, MaxSum{v, 1.0f}); }

// The maximum and sum over a warp's lanes, then over a block's warps.
__device__ MaxSum warp_combine(MaxSum v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = combine(v, o);
  }
  return v;
}

__device__ MaxSum block_combine(MaxSum v) {
  __shared__ MaxSum warp_parts[BLOCK / 32];
  v = warp_combine(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_parts[warp] = v;
  __syncthreads();
  v = lane < BLOCK / 32 ? warp_parts[lane] : MaxSum{__int_as_float(0xff800000), 0.0f};
  return warp_combine(v);
}

// VEC floats moved by one load or store instruction.
#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif
union Pack {
  vec_t v;
  float f[VEC];
};

// Both passes over one row by THREADS threads, this one `tid` (a block's
// threads, or a warp's lanes); Reduce combines their partial maxima and sums.
template <int THREADS, MaxSum (*Reduce)(MaxSum)>
__device__ __forceinline__ void softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int C, int tid) {
  // Rows start 4*C bytes apart, so wide accesses are aligned when C % VEC == 0.
  const bool wide = VEC > 1 && C % VEC == 0;
  const vec_t* xv = reinterpret_cast<const vec_t*>(xr);
  vec_t* yv = reinterpret_cast<vec_t*>(yr);

  MaxSum acc{__int_as_float(0xff800000), 0.0f};
  if (wide) {
    for (int i = tid; i < C / VEC; i += THREADS) {
      Pack p;
      p.v = xv[i];
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc = add(acc, p.f[k]);
    }
  } else {
    for (int c = tid; c < C; c += THREADS) acc = add(acc, xr[c]);
  }
  const MaxSum total = Reduce(acc);
  const float inv = 1.0f / total.s;

  if (wide) {
    for (int i = tid; i < C / VEC; i += THREADS) {
      Pack p;
      p.v = xv[i];
#pragma unroll
      for (int k = 0; k < VEC; ++k) p.f[k] = __expf(p.f[k] - total.m) * inv;
      yv[i] = p.v;
    }
  } else {
    for (int c = tid; c < C; c += THREADS) yr[c] = __expf(xr[c] - total.m) * inv;
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_online(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
  const long long row = blockIdx.x;
  if (row >= R) return;
  softmax_row<BLOCK, block_combine>(x + row * C, y + row * C, C, threadIdx.x);
}

// One warp per row (WARP_ROWS=1, for rows of at most 2048 values): BLOCK / 32
// rows per block, no shared memory and no block barrier; the second pass
// finds the row in L1. Where a row is short, a block per row leaves most of
// its threads idle.

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_warp_rows(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
  const long long row = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32;
  if (row >= R) return;  // the whole warp leaves together
  softmax_row<32, warp_combine>(x + row * C, y + row * C, C, threadIdx.x % 32);
}
