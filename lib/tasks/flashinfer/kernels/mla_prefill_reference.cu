// flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1: the trusted reference.
//
// One block per query token, all 16 heads: the block walks the query's
// visible KV entries (causal: the i-th query of a request with q_len queries
// and kv_len entries sees entry positions j <= kv_len - q_len + i) in tiles of
// TILE rows, gathered through the page table into shared memory as fp32, and
// keeps an online softmax per head. FP32 arithmetic, every reduction in a
// fixed order; bf16 widened exactly and rounded to nearest even on output;
// lse = ln(sum exp(logit)) / ln 2. A query that sees no entry gets output 0
// and lse -inf.
//
// Shared memory (dynamic, floats): q[16][STRIDE], kv[TILE][STRIDE],
// p[16][TILE], and per head m, s, rescale. STRIDE = 577 keeps the row reads
// of the score step free of bank conflicts.

#define HEADS 16
#define CKV 512
#define KPE 64
#define DIM 576      // CKV + KPE
#define STRIDE 577
#define TILE 16
#define THREADS 256

#include "cuda_helpers/ref_bf16.cuh"

#include "cuda_helpers/ref_to_bf16.cuh"

__device__ __forceinline__ int ref_request_of(const int* __restrict__ indptr, int n, int i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (indptr[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

extern "C" __global__ void __launch_bounds__(THREADS)
mla_prefill_ref(const unsigned short* __restrict__ q_nope, const unsigned short* __restrict__ q_pe,
                const unsigned short* __restrict__ ckv_cache, const unsigned short* __restrict__ kpe_cache,
                const int* __restrict__ qo_indptr, const int* __restrict__ kv_indptr,
                const int* __restrict__ kv_indices, float sm_scale, unsigned short* __restrict__ output,
                float* __restrict__ lse, int num_requests) {
  extern __shared__ float smem[];
  float* qs = smem;                       // [HEADS][STRIDE]
  float* kv = qs + HEADS * STRIDE;        // [TILE][STRIDE]
  float* ps = kv + TILE * STRIDE;         // [HEADS][TILE]
  float* m_h = ps + HEADS * TILE;         // [HEADS]
  float* s_h = m_h + HEADS;               // [HEADS]
  float* rescale = s_h + HEADS;           // [HEADS]
  const int t = threadIdx.x;
  const int qi = blockIdx.x;
  const int b = ref_request_of(qo_indptr, num_requests, qi);
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], i = qi - qo_indptr[b];
  const int kv_begin = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv_begin;
  int visible = kv_len - q_len + i + 1;
  visible = visible < 0 ? 0 : (visible > kv_len ? kv_len : visible);
  const float neg_inf = -__int_as_float(0x7f800000);

  for (int e = t; e < HEADS * DIM; e += THREADS) {
    const int h = e / DIM, d = e % DIM;
    const long long base = (long long)qi * HEADS + h;
    qs[h * STRIDE + d] = d < CKV ? ref_bf16(q_nope[base * CKV + d]) : ref_bf16(q_pe[base * KPE + d - CKV]);
  }
  if (t < HEADS) {
    m_h[t] = neg_inf;
    s_h[t] = 0.f;
  }
  // Thread t: score (head t / 16, row t % 16); accumulator of head t / 16 for
  // dimensions t % 16, t % 16 + 16, ..., t % 16 + 496.
  const int h = t / 16, g = t % 16;
  float acc[CKV / 16];
  for (int k = 0; k < CKV / 16; ++k) acc[k] = 0.f;
  __syncthreads();

  for (int c0 = 0; c0 < visible; c0 += TILE) {
    const int rows = visible - c0 < TILE ? visible - c0 : TILE;
    for (int e = t; e < rows * DIM; e += THREADS) {
      const int r = e / DIM, d = e % DIM;
      const long long row = kv_indices[kv_begin + c0 + r];
      kv[r * STRIDE + d] = d < CKV ? ref_bf16(ckv_cache[row * CKV + d]) : ref_bf16(kpe_cache[row * KPE + d - CKV]);
    }
    __syncthreads();
    float score = neg_inf;
    if (g < rows) {
      float dot = 0.f;
      for (int d = 0; d < DIM; ++d) dot += qs[h * STRIDE + d] * kv[g * STRIDE + d];
      score = dot * sm_scale;
    }
    // The 16 lanes of a head (half a warp) agree on the tile's max and sum.
    float mx = score;
    for (int o = 8; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_old = m_h[h];
    const float m_new = fmaxf(m_old, mx);  // finite: every tile holds at least one visible row
    const float p = g < rows ? expf(score - m_new) : 0.f;
    float sum = p;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    ps[h * TILE + g] = p;
    __syncthreads();  // everyone has read m_h before it changes
    if (g == 0) {
      const float r = expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
      rescale[h] = r;
      s_h[h] = s_h[h] * r + sum;
      m_h[h] = m_new;
    }
    __syncthreads();
    const float r = rescale[h];
    for (int k = 0; k < CKV / 16; ++k) {
      float a = acc[k] * r;
      for (int j = 0; j < rows; ++j) a += ps[h * TILE + j] * kv[j * STRIDE + g + 16 * k];
      acc[k] = a;
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
  const float s = s_h[h];
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int k = 0; k < CKV / 16; ++k)
    output[((long long)qi * HEADS + h) * CKV + g + 16 * k] = ref_to_bf16(acc[k] * inv);
  if (g == 0) lse[(long long)qi * HEADS + h] = s > 0.f ? (m_h[h] + logf(s)) * 1.4426950408889634f : neg_inf;
}
