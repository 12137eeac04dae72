// flashinfer/gqa_paged_decode_h32_kv4_d128_ps1: the baseline for vs_baseline
// scores. Not FlashInfer's kernel (that one needs the FlashInfer library; its
// latencies can be imported per card with --baseline-latencies), but the
// same design as FlashInfer's decode kernels, written by hand for
// libksearch: split-KV "flash decoding".
//
//   1. gqa_split_partial  one block of 4 warps per (split, KV head, request): the 8 q heads of a
//                         group share every K/V row the block loads; each warp takes every 4th
//                         entry of the split, keeps an online softmax (in base 2) for the 8 heads,
//                         and the 4 warps merge in shared memory into the split's partial
//                         (max, sum, accumulator)
//   2. gqa_split_combine  one block per (request, q head) merges the splits: output and lse
//
// The number of splits (num_splits in the plan) grows for small batches and
// long requests so that about two blocks per SM are busy.

#define QO_HEADS 32
#define KV_HEADS 4
#define GROUP 8
#define HEAD_DIM 128
#define WARPS 4
#define LOG2E 1.4426950408889634f

#include "cuda_helpers/bf16_to_f32.cuh"

#include "cuda_helpers/f32_to_bf16.cuh"

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// part_ml[(b * QO_HEADS + h) * num_splits + split] = (max, sum) in base 2;
// part_acc[... same index ...][d] = the unnormalised accumulator.
extern "C" __global__ void __launch_bounds__(WARPS * 32)
gqa_split_partial(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k_cache,
                  const unsigned short* __restrict__ v_cache, const int* __restrict__ kv_indptr,
                  const int* __restrict__ kv_indices, float sm_scale, float2* __restrict__ part_ml,
                  float* __restrict__ part_acc, int num_splits) {
  __shared__ float sh_m[WARPS][GROUP], sh_s[WARPS][GROUP];
  __shared__ float sh_acc[WARPS][GROUP][HEAD_DIM];
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int begin = kv_indptr[b], len = kv_indptr[b + 1] - begin;
  const int lo = begin + (int)((long long)len * split / num_splits);
  const int hi = begin + (int)((long long)len * (split + 1) / num_splits);
  // Logits in base 2: exp(x) = exp2(x * log2 e), with the scale folded into q.
  const float qscale = sm_scale * LOG2E;
  float qv[GROUP][4], m[GROUP], s[GROUP], acc[GROUP][4];
  for (int g = 0; g < GROUP; ++g) {
    const unsigned short* qh = q + ((long long)b * QO_HEADS + kvh * GROUP + g) * HEAD_DIM + lane * 4;
    for (int e = 0; e < 4; ++e) {
      qv[g][e] = bf16_to_f32(qh[e]) * qscale;
      acc[g][e] = 0.f;
    }
    m[g] = neg_inf();
    s[g] = 0.f;
  }
  for (int j = lo + warp; j < hi; j += WARPS) {
    const long long row = ((long long)kv_indices[j] * KV_HEADS + kvh) * HEAD_DIM + lane * 4;
    float kf[4], vf[4];
    for (int e = 0; e < 4; ++e) {
      kf[e] = bf16_to_f32(k_cache[row + e]);
      vf[e] = bf16_to_f32(v_cache[row + e]);
    }
    for (int g = 0; g < GROUP; ++g) {
      float dot = 0.f;
      for (int e = 0; e < 4; ++e) dot += qv[g][e] * kf[e];
      for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      const float m_new = fmaxf(m[g], dot);
      const float scale = exp2f(m[g] - m_new), p = exp2f(dot - m_new);
      s[g] = s[g] * scale + p;
      for (int e = 0; e < 4; ++e) acc[g][e] = acc[g][e] * scale + p * vf[e];
      m[g] = m_new;
    }
  }
  for (int g = 0; g < GROUP; ++g) {
    if (lane == 0) {
      sh_m[warp][g] = m[g];
      sh_s[warp][g] = s[g];
    }
    for (int e = 0; e < 4; ++e) sh_acc[warp][g][lane * 4 + e] = acc[g][e];
  }
  __syncthreads();
  // Thread d merges dimension d of the four warps, for each head.
  const int d = threadIdx.x;
  for (int g = 0; g < GROUP; ++g) {
    float mm = neg_inf();
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, sh_m[w][g]);
    float ss = 0.f, aa = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      if (sh_s[w][g] == 0.f) continue;  // a warp without entries (its max is -inf)
      const float f = exp2f(sh_m[w][g] - mm);
      ss += sh_s[w][g] * f;
      aa += sh_acc[w][g][d] * f;
    }
    const long long idx = ((long long)b * QO_HEADS + kvh * GROUP + g) * num_splits + split;
    part_acc[idx * HEAD_DIM + d] = aa;
    if (d == 0) part_ml[idx] = make_float2(mm, ss);
  }
}

extern "C" __global__ void gqa_split_combine(const float2* __restrict__ part_ml, const float* __restrict__ part_acc,
                                             unsigned short* __restrict__ output, float* __restrict__ lse,
                                             int num_splits) {
  const long long bh = blockIdx.x;  // b * QO_HEADS + h
  const int d = threadIdx.x;
  float mm = neg_inf();
  for (int sp = 0; sp < num_splits; ++sp) mm = fmaxf(mm, part_ml[bh * num_splits + sp].x);
  float ss = 0.f, aa = 0.f;
  for (int sp = 0; sp < num_splits; ++sp) {
    const float2 ml = part_ml[bh * num_splits + sp];
    if (ml.y == 0.f) continue;
    const float f = exp2f(ml.x - mm);
    ss += ml.y * f;
    aa += part_acc[(bh * num_splits + sp) * HEAD_DIM + d] * f;
  }
  output[bh * HEAD_DIM + d] = f32_to_bf16(ss > 0.f ? aa / ss : 0.f);
  if (d == 0) lse[bh] = ss > 0.f ? mm + log2f(ss) : neg_inf();
}
