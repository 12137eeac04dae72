#include <cuda_bf16.h>
#include <math.h>

#include "kernel.h"

// One warp per (request, q head): an online softmax over the request's KV
// entries read through the page table, each lane holding 4 of the 128
// dimensions. q head h reads KV head h / 8; the lse is base 2.
__global__ void gqa_decode_warp(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                const __nv_bfloat16* __restrict__ v, const int* __restrict__ indptr,
                                const int* __restrict__ indices, float sm_scale, int batch,
                                __nv_bfloat16* __restrict__ out, float* __restrict__ lse) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= batch * 32) return;
  const int b = warp / 32, h = warp % 32, kvh = h / 8;
  const __nv_bfloat16* qrow = q + (static_cast<long>(b) * 32 + h) * 128 + lane * 4;
  float qv[4], acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int i = 0; i < 4; ++i) qv[i] = __bfloat162float(qrow[i]);
  float m = -INFINITY, l = 0.f;
  for (int j = indptr[b]; j < indptr[b + 1]; ++j) {
    const long row = (static_cast<long>(indices[j]) * 4 + kvh) * 128 + lane * 4;
    float s = 0.f;
    for (int i = 0; i < 4; ++i) s += qv[i] * __bfloat162float(k[row + i]);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= sm_scale;
    const float m2 = fmaxf(m, s);
    const float c = expf(m - m2), p = expf(s - m2);
    l = l * c + p;
    for (int i = 0; i < 4; ++i) acc[i] = acc[i] * c + p * __bfloat162float(v[row + i]);
    m = m2;
  }
  __nv_bfloat16* orow = out + (static_cast<long>(b) * 32 + h) * 128 + lane * 4;
  for (int i = 0; i < 4; ++i) orow[i] = __float2bfloat16(l > 0.f ? acc[i] / l : 0.f);
  if (lane == 0) lse[b * 32 + h] = l > 0.f ? (m + logf(l)) * 1.4426950408889634f : -INFINITY;
}

void gqa_decode_launch(const void* q, const void* k_cache, const void* v_cache, const int* kv_indptr,
                       const int* kv_indices, float sm_scale, int batch, void* output, float* lse,
                       cudaStream_t stream) {
  const int warps = batch * 32, per_block = 4;
  if (warps == 0) return;
  gqa_decode_warp<<<(warps + per_block - 1) / per_block, per_block * 32, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k_cache),
      static_cast<const __nv_bfloat16*>(v_cache), kv_indptr, kv_indices, sm_scale, batch,
      static_cast<__nv_bfloat16*>(output), lse);
}
