// flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1: a straightforward
// correct starting kernel (a starting point, not a tuned result).
//
// One warp per (query token, head). The warp finds its request, walks the
// entries the query may see (causal: positions j <= kv_len - q_len + i for the
// request's i-th query) through the page table, and keeps an online softmax:
// a 576-long dot product reduced over the warp per entry, then the running
// max, sum and 512-wide accumulator. Nothing is shared between heads or
// between the queries of a request.

#define HEADS 16
#define CKV 512
#define KPE 64

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

extern "C" __global__ void mla_prefill_warp_per_head(const unsigned short* __restrict__ q_nope,
                                                     const unsigned short* __restrict__ q_pe,
                                                     const unsigned short* __restrict__ ckv_cache,
                                                     const unsigned short* __restrict__ kpe_cache,
                                                     const int* __restrict__ qo_indptr,
                                                     const int* __restrict__ kv_indptr,
                                                     const int* __restrict__ kv_indices, float sm_scale,
                                                     unsigned short* __restrict__ output, float* __restrict__ lse,
                                                     int total_q, int num_requests) {
  const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) / 32u);
  const int lane = (int)(threadIdx.x % 32u);
  if (warp >= total_q * HEADS) return;
  const int qi = warp / HEADS;
  int b = 0;
  while (b + 1 < num_requests && qo_indptr[b + 1] <= qi) ++b;
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], i = qi - qo_indptr[b];
  const int kv_begin = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv_begin;
  int visible = kv_len - q_len + i + 1;
  visible = visible < 0 ? 0 : (visible > kv_len ? kv_len : visible);
  float qn[16], qp[2], acc[16];
  for (int e = 0; e < 16; ++e) {
    qn[e] = bf16_to_f32(q_nope[(long long)warp * CKV + lane * 16 + e]);
    acc[e] = 0.f;
  }
  for (int e = 0; e < 2; ++e) qp[e] = bf16_to_f32(q_pe[(long long)warp * KPE + lane * 2 + e]);
  float m = -__int_as_float(0x7f800000), s = 0.f;
  for (int j = 0; j < visible; ++j) {
    const long long row = kv_indices[kv_begin + j];
    float c[16];
    float dot = 0.f;
    for (int e = 0; e < 16; ++e) {
      c[e] = bf16_to_f32(ckv_cache[row * CKV + lane * 16 + e]);
      dot += qn[e] * c[e];
    }
    for (int e = 0; e < 2; ++e) dot += qp[e] * bf16_to_f32(kpe_cache[row * KPE + lane * 2 + e]);
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float logit = dot * sm_scale;
    const float m_new = fmaxf(m, logit);
    const float scale = expf(m - m_new), p = expf(logit - m_new);
    s = s * scale + p;
    for (int e = 0; e < 16; ++e) acc[e] = acc[e] * scale + p * c[e];
    m = m_new;
  }
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int e = 0; e < 16; ++e) output[(long long)warp * CKV + lane * 16 + e] = f32_to_bf16(acc[e] * inv);
  if (lane == 0) lse[warp] = s > 0.f ? (m + logf(s)) * 1.4426950408889634f : -__int_as_float(0x7f800000);
}
