// flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: the trusted reference.
//
// FP32 arithmetic throughout, every reduction in a fixed order (the result
// is the same on every run), bf16 read and written as raw 16-bit patterns:
// widened exactly, rounded to nearest even on output. Three kernels,
// launched in order by gqa_decode_reference_plan.json:
//
//   1. gqa_ref_logits   logits[j, h] = (q[b, h] . k[kv_indices[j], h / 8]) * sm_scale for every
//                       KV entry j (b is the request whose kv_indptr range holds j)
//   2. gqa_ref_softmax  per (request, q head): the max m and the sum s of exp(logit - m);
//                       lse = (m + ln s) / ln 2, the base-2 log-sum-exp
//   3. gqa_ref_output   output[b, h, d] = sum_j exp(logit_j - m) v[row_j, h / 8, d] / s
//
// A request with no KV entries gets output 0 and lse -inf (FlashInfer's
// reference does the same; the task's workloads have none).

#define QO_HEADS 32
#define KV_HEADS 4
#define GROUP 8     // QO_HEADS / KV_HEADS
#define HEAD_DIM 128

#include "cuda_helpers/ref_bf16.cuh"

__device__ __forceinline__ unsigned short ref_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return (unsigned short)(u >> 16);
}

// The request whose [kv_indptr[b], kv_indptr[b + 1]) holds entry j.
#include "cuda_helpers/ref_request_of.cuh"

// One warp per (KV entry, KV head): the GROUP q heads that read this head.
// Lane l holds dimensions 4l..4l+3; the partial dot products are summed by
// a butterfly over the warp, the same order on every run.
extern "C" __global__ void gqa_ref_logits(const unsigned short* __restrict__ q,
                                          const unsigned short* __restrict__ k_cache,
                                          const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices,
                                          float sm_scale, float* __restrict__ logits, int batch_size,
                                          int num_kv_indices) {
  const int warp = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) / 32u);
  const int lane = (int)(threadIdx.x % 32u);
  const int j = warp / KV_HEADS, kvh = warp % KV_HEADS;
  if (j >= num_kv_indices) return;  // the whole warp leaves together
  const int b = ref_request_of(kv_indptr, batch_size, j);
  const long long row = kv_indices[j];
  const unsigned short* k = k_cache + (row * KV_HEADS + kvh) * HEAD_DIM + lane * 4;
  float kv[4];
  for (int e = 0; e < 4; ++e) kv[e] = ref_bf16(k[e]);
  for (int g = 0; g < GROUP; ++g) {
    const int h = kvh * GROUP + g;
    const unsigned short* qh = q + ((long long)b * QO_HEADS + h) * HEAD_DIM + lane * 4;
    float dot = 0.f;
    for (int e = 0; e < 4; ++e) dot += ref_bf16(qh[e]) * kv[e];
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) logits[(long long)j * QO_HEADS + h] = dot * sm_scale;
  }
}

// Deterministic tree reductions over a block of REF_THREADS threads.
#define REF_THREADS 256

#include "cuda_helpers/ref_block_max.cuh"

#include "cuda_helpers/ref_block_sum.cuh"

// One block per (request, q head). stats[b, h] = (m, 1 / s).
extern "C" __global__ void gqa_ref_softmax(const float* __restrict__ logits, const int* __restrict__ kv_indptr,
                                           float2* __restrict__ stats, float* __restrict__ lse) {
  __shared__ float red[REF_THREADS];
  const int b = blockIdx.x / QO_HEADS, h = blockIdx.x % QO_HEADS;
  const int begin = kv_indptr[b], end = kv_indptr[b + 1];
  const float neg_inf = -__int_as_float(0x7f800000);
  float m = neg_inf;
  for (int j = begin + (int)threadIdx.x; j < end; j += REF_THREADS) m = fmaxf(m, logits[(long long)j * QO_HEADS + h]);
  m = ref_block_max(m, red);
  float s = 0.f;
  if (end > begin)
    for (int j = begin + (int)threadIdx.x; j < end; j += REF_THREADS) s += expf(logits[(long long)j * QO_HEADS + h] - m);
  s = ref_block_sum(s, red);
  if (threadIdx.x == 0) {
    stats[blockIdx.x] = make_float2(m, end > begin ? 1.f / s : 0.f);
    lse[blockIdx.x] = end > begin ? (m + logf(s)) * 1.4426950408889634f : neg_inf;
  }
}

// One block of HEAD_DIM threads per (request, q head); thread d sums its
// dimension over the request's entries in order.
extern "C" __global__ void gqa_ref_output(const unsigned short* __restrict__ v_cache,
                                          const int* __restrict__ kv_indptr, const int* __restrict__ kv_indices,
                                          const float* __restrict__ logits, const float2* __restrict__ stats,
                                          unsigned short* __restrict__ output) {
  const int b = blockIdx.x / QO_HEADS, h = blockIdx.x % QO_HEADS, d = threadIdx.x;
  const int kvh = h / GROUP;
  const float2 st = stats[blockIdx.x];
  float acc = 0.f;
  for (int j = kv_indptr[b]; j < kv_indptr[b + 1]; ++j) {
    const float p = expf(logits[(long long)j * QO_HEADS + h] - st.x);
    acc += p * ref_bf16(v_cache[((long long)kv_indices[j] * KV_HEADS + kvh) * HEAD_DIM + d]);
  }
  output[(long long)blockIdx.x * HEAD_DIM + d] = ref_to_bf16(acc * st.y);
}
