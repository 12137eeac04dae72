// flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: a straightforward correct
// starting kernel (a starting point, not a tuned result).
//
// One warp per (request, q head). Lane l holds dimensions 4l..4l+3 of q; the
// warp walks the request's KV entries through the page table, one at a time:
// a dot product reduced over the warp, then an online softmax update of the
// running max, sum and output accumulator. No sharing of K/V rows between the
// 8 q heads of a group, no split of long requests across blocks.

#define QO_HEADS 32
#define KV_HEADS 4
#define GROUP 8
#define HEAD_DIM 128

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

extern "C" __global__ void gqa_decode_warp_per_head(const unsigned short* __restrict__ q,
                                                    const unsigned short* __restrict__ k_cache,
                                                    const unsigned short* __restrict__ v_cache,
                                                    const int* __restrict__ kv_indptr,
                                                    const int* __restrict__ kv_indices, float sm_scale,
                                                    unsigned short* __restrict__ output, float* __restrict__ lse,
                                                    int batch_size) {
  const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) / 32u);
  const int lane = (int)(threadIdx.x % 32u);
  if (warp >= batch_size * QO_HEADS) return;
  const int b = warp / QO_HEADS, h = warp % QO_HEADS, kvh = h / GROUP;
  float qv[4], acc[4] = {0.f, 0.f, 0.f, 0.f};
  const unsigned short* qh = q + (long long)warp * HEAD_DIM + lane * 4;
  for (int e = 0; e < 4; ++e) qv[e] = bf16_to_f32(qh[e]);
  float m = -__int_as_float(0x7f800000), s = 0.f;
  for (int j = kv_indptr[b]; j < kv_indptr[b + 1]; ++j) {
    const long long row = ((long long)kv_indices[j] * KV_HEADS + kvh) * HEAD_DIM + lane * 4;
    float dot = 0.f;
    for (int e = 0; e < 4; ++e) dot += qv[e] * bf16_to_f32(k_cache[row + e]);
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float logit = dot * sm_scale;
    const float m_new = fmaxf(m, logit);
    const float scale = expf(m - m_new), p = expf(logit - m_new);
    s = s * scale + p;
    for (int e = 0; e < 4; ++e) acc[e] = acc[e] * scale + p * bf16_to_f32(v_cache[row + e]);
    m = m_new;
  }
  const float inv = s > 0.f ? 1.f / s : 0.f;
  unsigned short* out = output + (long long)warp * HEAD_DIM + lane * 4;
  for (int e = 0; e < 4; ++e) out[e] = f32_to_bf16(acc[e] * inv);
  if (lane == 0) lse[warp] = s > 0.f ? (m + logf(s)) * 1.4426950408889634f : -__int_as_float(0x7f800000);
}
