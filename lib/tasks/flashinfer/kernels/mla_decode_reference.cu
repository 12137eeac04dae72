// flashinfer/mla_paged_decode_h16_ckv512_kpe64_ps1: the trusted reference.
//
// FP32 arithmetic, every reduction in a fixed order, bf16 as raw 16-bit
// patterns (widened exactly, rounded to nearest even on output). Three
// kernels, launched by mla_decode_reference_plan.json:
//
//   1. mla_ref_logits   logits[j, h] = (q_nope[b, h] . ckv[row_j] + q_pe[b, h] . kpe[row_j]) * sm_scale
//                       for every KV entry j, row_j = kv_indices[j], b the request holding j
//   2. mla_ref_softmax  per (request, head): max m, sum s of exp(logit - m), lse = (m + ln s) / ln 2
//   3. mla_ref_output   output[b, h, d] = sum_j exp(logit_j - m) ckv[row_j, d] / s  (values = ckv)
//
// A request without entries gets output 0 and lse -inf.

#define HEADS 16
#define CKV 512
#define KPE 64

#include "cuda_helpers/ref_bf16.cuh"

#include "cuda_helpers/ref_to_bf16.cuh"

#include "cuda_helpers/ref_request_of.cuh"

// One warp per (KV entry, head). Lane l holds ckv dimensions 16l..16l+15 and
// kpe dimensions 2l, 2l+1; a butterfly sums the lanes, the same order every run.
extern "C" __global__ void mla_ref_logits(const unsigned short* __restrict__ q_nope,
                                          const unsigned short* __restrict__ q_pe,
                                          const unsigned short* __restrict__ ckv_cache,
                                          const unsigned short* __restrict__ kpe_cache,
                                          const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices,
                                          float sm_scale, float* __restrict__ logits, int batch_size,
                                          int num_kv_indices) {
  const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) / 32u);
  const int lane = (int)(threadIdx.x % 32u);
  const int j = warp / HEADS, h = warp % HEADS;
  if (j >= num_kv_indices) return;
  const int b = ref_request_of(kv_indptr, batch_size, j);
  const long long row = kv_indices[j];
  const unsigned short* qn = q_nope + ((long long)b * HEADS + h) * CKV + lane * 16;
  const unsigned short* qp = q_pe + ((long long)b * HEADS + h) * KPE + lane * 2;
  const unsigned short* c = ckv_cache + row * CKV + lane * 16;
  const unsigned short* p = kpe_cache + row * KPE + lane * 2;
  float dot = 0.f;
  for (int e = 0; e < 16; ++e) dot += ref_bf16(qn[e]) * ref_bf16(c[e]);
  for (int e = 0; e < 2; ++e) dot += ref_bf16(qp[e]) * ref_bf16(p[e]);
  for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  if (lane == 0) logits[(long long)j * HEADS + h] = dot * sm_scale;
}

#define REF_THREADS 256

#include "cuda_helpers/ref_block_max.cuh"

#include "cuda_helpers/ref_block_sum.cuh"

// One block per (request, head); stats = (m, 1 / s).
extern "C" __global__ void mla_ref_softmax(const float* __restrict__ logits, const int* __restrict__ kv_indptr,
                                           float2* __restrict__ stats, float* __restrict__ lse) {
  __shared__ float red[REF_THREADS];
  const int b = blockIdx.x / HEADS, h = blockIdx.x % HEADS;
  const int begin = kv_indptr[b], end = kv_indptr[b + 1];
  const float neg_inf = -__int_as_float(0x7f800000);
  float m = neg_inf;
  for (int j = begin + (int)threadIdx.x; j < end; j += REF_THREADS) m = fmaxf(m, logits[(long long)j * HEADS + h]);
  m = ref_block_max(m, red);
  float s = 0.f;
  if (end > begin)
    for (int j = begin + (int)threadIdx.x; j < end; j += REF_THREADS) s += expf(logits[(long long)j * HEADS + h] - m);
  s = ref_block_sum(s, red);
  if (threadIdx.x == 0) {
    stats[blockIdx.x] = make_float2(m, end > begin ? 1.f / s : 0.f);
    lse[blockIdx.x] = end > begin ? (m + logf(s)) * 1.4426950408889634f : neg_inf;
  }
}

// One block of CKV threads per (request, head); thread d sums over the
// request's entries in order.
extern "C" __global__ void mla_ref_output(const unsigned short* __restrict__ ckv_cache,
                                          const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices,
                                          const float* __restrict__ logits, const float2* __restrict__ stats,
                                          unsigned short* __restrict__ output) {
  const int b = blockIdx.x / HEADS, h = blockIdx.x % HEADS, d = threadIdx.x;
  const float2 st = stats[blockIdx.x];
  float acc = 0.f;
  for (int j = kv_indptr[b]; j < kv_indptr[b + 1]; ++j)
    acc += expf(logits[(long long)j * HEADS + h] - st.x) * ref_bf16(ckv_cache[(long long)kv_indices[j] * CKV + d]);
  output[(long long)blockIdx.x * CKV + d] = ref_to_bf16(acc * st.y);
}
