// flashinfer/mla_paged_prefill_causal_h16_ckv512_kpe64_ps1: the baseline for
// vs_baseline scores. Not FlashInfer's kernel (its latencies can be imported
// per card with --baseline-latencies) but a tiled kernel written by hand for
// libksearch: one block per query token, the 16 heads sharing every tile of
// TILE KV rows gathered through the page table into shared memory (as bf16,
// rows padded for conflict-free reads), q pre-scaled by sm_scale * log2(e)
// so the online softmax runs in base 2.

#define HEADS 16
#define CKV 512
#define KPE 64
#define DIM 576
#define QSTRIDE 577   // floats
#define KSTRIDE 578   // bf16, an odd number of 32-bit words
#define TILE 32
#define THREADS 256
#define LOG2E 1.4426950408889634f

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

__device__ __forceinline__ int request_of(const int* __restrict__ indptr, int n, int i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (indptr[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

extern "C" __global__ void __launch_bounds__(THREADS)
mla_prefill_tiled(const unsigned short* __restrict__ q_nope, const unsigned short* __restrict__ q_pe,
                  const unsigned short* __restrict__ ckv_cache, const unsigned short* __restrict__ kpe_cache,
                  const int* __restrict__ qo_indptr, const int* __restrict__ kv_indptr,
                  const int* __restrict__ kv_indices, float sm_scale, unsigned short* __restrict__ output,
                  float* __restrict__ lse, int num_requests) {
  extern __shared__ float smem[];
  float* qs = smem;                                                       // [HEADS][QSTRIDE]
  float* ps = qs + HEADS * QSTRIDE;                                       // [HEADS][TILE]
  float* rescale = ps + HEADS * TILE;                                     // [HEADS]
  unsigned short* kv = reinterpret_cast<unsigned short*>(rescale + HEADS);  // [TILE][KSTRIDE]
  const int t = threadIdx.x, h = t / 16, g = t % 16;
  const int qi = blockIdx.x;
  const int b = request_of(qo_indptr, num_requests, qi);
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], i = qi - qo_indptr[b];
  const int kv_begin = kv_indptr[b], kv_len = kv_indptr[b + 1] - kv_begin;
  int visible = kv_len - q_len + i + 1;
  visible = visible < 0 ? 0 : (visible > kv_len ? kv_len : visible);
  const float neg_inf = -__int_as_float(0x7f800000);
  const float qscale = sm_scale * LOG2E;
  for (int e = t; e < HEADS * DIM; e += THREADS) {
    const int hh = e / DIM, d = e % DIM;
    const long long base = (long long)qi * HEADS + hh;
    qs[hh * QSTRIDE + d] = qscale * (d < CKV ? bf16_to_f32(q_nope[base * CKV + d]) : bf16_to_f32(q_pe[base * KPE + d - CKV]));
  }
  float m = neg_inf, s = 0.f;  // the same in the 16 lanes of a head
  float acc[CKV / 16];
  for (int k = 0; k < CKV / 16; ++k) acc[k] = 0.f;
  __syncthreads();
  for (int c0 = 0; c0 < visible; c0 += TILE) {
    const int rows = visible - c0 < TILE ? visible - c0 : TILE;
    // Gather: 288 32-bit words per row.
    for (int e = t; e < rows * (DIM / 2); e += THREADS) {
      const int r = e / (DIM / 2), w = e % (DIM / 2);
      const long long row = kv_indices[kv_begin + c0 + r];
      const unsigned v = w < CKV / 2 ? reinterpret_cast<const unsigned*>(ckv_cache + row * CKV)[w]
                                     : reinterpret_cast<const unsigned*>(kpe_cache + row * KPE)[w - CKV / 2];
      kv[r * KSTRIDE + 2 * w] = (unsigned short)(v & 0xffffu);
      kv[r * KSTRIDE + 2 * w + 1] = (unsigned short)(v >> 16);
    }
    __syncthreads();
    // Scores of rows g and g + 16 for head h.
    float sc[2];
    for (int u = 0; u < 2; ++u) {
      const int r = g + 16 * u;
      float dot = neg_inf;
      if (r < rows) {
        dot = 0.f;
        for (int d = 0; d < DIM; ++d) dot += qs[h * QSTRIDE + d] * bf16_to_f32(kv[r * KSTRIDE + d]);
      }
      sc[u] = dot;
    }
    float mx = fmaxf(sc[0], sc[1]);
    for (int o = 8; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_new = fmaxf(m, mx);
    float p0 = g < rows ? exp2f(sc[0] - m_new) : 0.f, p1 = g + 16 < rows ? exp2f(sc[1] - m_new) : 0.f;
    float sum = p0 + p1;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float r = exp2f(m - m_new);
    s = s * r + sum;
    m = m_new;
    ps[h * TILE + g] = p0;
    ps[h * TILE + g + 16] = p1;
    __syncthreads();
    for (int k = 0; k < CKV / 16; ++k) {
      float a = acc[k] * r;
      for (int j = 0; j < rows; ++j) a += ps[h * TILE + j] * bf16_to_f32(kv[j * KSTRIDE + g + 16 * k]);
      acc[k] = a;
    }
    __syncthreads();
  }
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int k = 0; k < CKV / 16; ++k)
    output[((long long)qi * HEADS + h) * CKV + g + 16 * k] = f32_to_bf16(acc[k] * inv);
  if (g == 0) lse[(long long)qi * HEADS + h] = s > 0.f ? m + log2f(s) : neg_inf;
}
